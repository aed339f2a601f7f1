"""The recipe `search.py` searches: every parameter in one place, each with the trainer's default beside it.

A parameter is a flag of `train_multitask.py` (its `dest` is TrainConfig's field) and a range or a set of
choices. `default` is the value the trainer takes when the flag is left out, as its own parser gives it
(tests/tasks/search/test_search.py holds them equal); None means the trainer chooses (the learning rate by the model's
size, the dropout of the checkpoint's config.json). A flag given on `search.py`'s command line fixes its
parameter for every trial: it is left out of the space.

A new parameter is one more line of SPACE.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..config import COMMAND_AVERAGE


@dataclass(frozen=True)
class Parameter:
    """One searched option: the trainer's flag and its default."""
    name: str                 # TrainConfig's field, the flag's dest
    default: Any              # the trainer's default (None: the trainer chooses)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def argv(self, value) -> list:
        """The trainer's flags for `value`."""
        return [self.flag, str(value)]

    def given_in(self, argv) -> bool:
        """The flag is on a command line: the parameter is fixed there."""
        return any(a == self.flag or a.startswith(self.flag + "=") for a in argv)


@dataclass(frozen=True)
class Number(Parameter):
    """A float (or an int with `integer`) in [low, high], drawn on a log scale with `log`."""
    low: float = 0.0
    high: float = 1.0
    log: bool = False
    integer: bool = False

    def suggest(self, trial):
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, log=self.log)

    def declaration(self) -> dict:
        return {"name": self.name, "default": self.default, "low": self.low, "high": self.high, "log": self.log,
                "integer": self.integer}


@dataclass(frozen=True)
class Choice(Parameter):
    """One of `choices`."""
    choices: tuple = ()

    def suggest(self, trial):
        return trial.suggest_categorical(self.name, list(self.choices))

    def declaration(self) -> dict:
        return {"name": self.name, "default": self.default, "choices": list(self.choices)}


# name, the trainer's default, then the range searched. The ranges: the learning rate around both defaults
# (2e-5 bert-base's, 1e-4 compact models'), Devlin et al.'s (2019, A.3) epochs 2-4 and batch sizes 16/32,
# warm-up up to 20% of the steps, dropout up to 0.3, weight averaging none, EMA or SWA.
SPACE = (
    Number("lr", None, low=1e-5, high=3e-4, log=True),          # default: by the model's size (tasks.config)
    Number("epochs", 2, low=1, high=4, integer=True),
    Choice("batch_size", 32, (16, 32, 64)),
    Number("warmup", 0.06, low=0.0, high=0.2),
    Number("dropout", None, low=0.0, high=0.3),                 # default: the checkpoint's config.json
    Choice("pooling", "mean", ("mean", "pooler", "cls-token")),
    Choice("pair_mode", "cross", ("cross", "siamese")),
    Choice("sampler", "proportional", ("annealed", "proportional", "round-robin", "union")),
    Choice("average", COMMAND_AVERAGE, ("none", "ema", "swa")),   # the copy a trial's model is (--average)
)


def searched(fixed_argv, space=SPACE) -> tuple:
    """The parameters a search draws: those whose flag `fixed_argv` (the trainer's flags given) leaves out."""
    return tuple(p for p in space if not p.given_in(fixed_argv))


def by_name(name: str, space=SPACE) -> Optional[Parameter]:
    return next((p for p in space if p.name == name), None)

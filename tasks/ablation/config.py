"""A sweep's options as one typed value, validated once: what `sweep.run` takes.

`ablate.py` builds a `SweepConfig` from its command line; the reproduction builds one per sweep of an
experiment, directly (`from_settings`: named, typed values). `training` holds the training options every
trial derives its own from (each trial sets its seed and data fraction), `options` the study's own (its
`Study.Options`).
"""
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from minbert import DEFAULT_MODEL, UserError

from ..config import TrainConfig, validate, with_environment
from ..registry import MULTITASK_TASKS
from .plateau import PlateauRule
from .study import Study

# The cap; trials stop earlier on their held-out plateau (docs/studies.md: the budget)
TRIAL_STEPS = 1000
TRIAL_EVAL_EVERY = 50   # a sweep's --eval-every default (training's own is every epoch's end)
SWEEP_EPOCHS = 1        # with --trial-steps 0


@dataclass(frozen=True)
class SweepConfig:
    study: Study
    training: TrainConfig               # validated here (tasks.config.validate)
    options: Any = None                 # the study's Options; None: its defaults
    seeds: tuple = ()                   # fine-tuning seeds; (): (training.seed,)
    fractions: tuple = ()               # seeded fractions of the training sets; (): (training.data_fraction,)
    out: Optional[str] = None           # the sweep folder; None: training.out, else runs/ablate-MODE
    trial_steps: int = TRIAL_STEPS      # the step cap; 0: training.epochs passes
    plateau: PlateauRule = field(default_factory=PlateauRule)
    shard: Optional[tuple] = None       # (I, N): shard I of N; None: every trial
    shard_salt: str = ""                # hashed with each trial's name: sweeps whose trials share names shard apart
    workers: Optional[int] = None       # worker processes; None: auto
    summarize: bool = False             # train nothing: merge the results files and write the summary
    export_models: bool = False         # each trial's model folder to models/TRIAL/

    def __post_init__(self):
        fill = {"options": self.options if self.options is not None else self.study.Options(),
                "seeds": tuple(self.seeds or (self.training.seed,)),
                "fractions": tuple(self.fractions or (self.training.data_fraction,)),
                "out": str(self.out or self.training.out or Path("runs") / f"ablate-{self.study.name}")}
        implied = self.study.model(fill["options"])  # a study whose options name its models (pretraining's ladder)
        if implied is not None and self.training.model == DEFAULT_MODEL:
            fill["training"] = dataclasses.replace(self.training, model=implied)
        for name, value in fill.items():
            object.__setattr__(self, name, value)
        check(self)

    @property
    def mode(self) -> str:
        return self.study.name

    def replace(self, **changes) -> "SweepConfig":
        return dataclasses.replace(self, **changes)


def check(c: SweepConfig) -> None:
    """Reject what no sweep can run, before anything is loaded (a layer or head the model lacks is the study's
    to refuse, when it lists its trials)."""
    if not isinstance(c.options, c.study.Options):
        raise UserError(f"--mode {c.study.name}: its options are a {c.study.Options.__name__}, not a "
                        f"{type(c.options).__name__}")
    rule = c.plateau
    checks = [
        (all(isinstance(s, int) and s >= 0 for s in c.seeds), f"--seeds must be integers >= 0, got {list(c.seeds)}"),
        (len(set(c.seeds)) == len(c.seeds), f"--seeds: a seed is given twice in {list(c.seeds)}"),
        (all(0 < f <= 1 for f in c.fractions), f"--data-fractions must each be in (0, 1], got {list(c.fractions)}"),
        (len(set(c.fractions)) == len(c.fractions), f"--data-fractions: a fraction is given twice in "
                                                    f"{list(c.fractions)}"),
        (c.trial_steps >= 0, f"--trial-steps must be >= 0, got {c.trial_steps}"),
        (c.shard is None or (len(c.shard) == 2 and 1 <= c.shard[0] <= c.shard[1] and c.shard[1] > 1),
         f"--shard {c.shard}: not (I, N) with 1 <= I <= N and N > 1 (the whole sweep is None)"),
        (c.workers is None or c.workers >= 1, f"--workers must be >= 1, got {c.workers}"),
        (not (c.summarize and c.shard is not None), "--summarize merges every shard's results: give it without "
                                                     "--shard"),
        (rule.patience >= 0, f"--plateau-patience must be >= 0, got {rule.patience}"),
        (rule.tolerance >= 0 and math.isfinite(rule.tolerance), f"--plateau-tolerance must be >= 0, got "
                                                                 f"{rule.tolerance}"),
        (0 < rule.holdout_share < 1, f"--plateau-holdout must be in (0, 1), got {rule.holdout_share}"),
        (rule.holdout_max >= 1, f"--plateau-holdout-max must be >= 1, got {rule.holdout_max}"),
        (not c.training.per_task_best, "--per-task-best writes a run folder's predictions: a sweep's trials keep "
                                       "none (train_multitask.py takes it)"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
    validate(c.training)


# The plateau rule's settings by their ablate.py names
PLATEAU_SETTINGS = {"plateau_patience": "patience", "plateau_tolerance": "tolerance",
                    "plateau_holdout": "holdout_share", "plateau_holdout_max": "holdout_max"}


def task_names(task: str) -> str:
    """--task's value as TrainConfig.tasks: one task, or all = the course's three (multitask)."""
    return ",".join(MULTITASK_TASKS) if task == "all" else task


def from_settings(study: Study, settings: dict, **fixed) -> SweepConfig:
    """A SweepConfig from named values, as ablate.py's flags name them (`task` or `tasks`, `data_fractions`,
    `trial_steps`, the plateau's, the study's options, any training option); `fixed` are further training
    options (model, device, ...) and SweepConfig fields (seeds, out, workers, ...). Defaults are ablate.py's."""
    values = dict(settings)
    names = {f.name for f in dataclasses.fields(study.Options)}
    options = study.Options(**{k: values.pop(k) for k in list(values) if k in names})
    rule = PlateauRule(**{PLATEAU_SETTINGS[k]: values.pop(k) for k in list(values) if k in PLATEAU_SETTINGS})
    sweep = {k: fixed.pop(k) for k in list(fixed) if k in SWEEP_FIELDS}
    sweep.update(fractions=tuple(values.pop("data_fractions", ())), trial_steps=values.pop("trial_steps", TRIAL_STEPS))
    if "task" in values:
        values["tasks"] = task_names(values.pop("task"))
    unknown = sorted((set(values) | set(fixed)) - set(TrainConfig.names()))
    if unknown:
        raise UserError(f"--mode {study.name}: no option {', '.join(unknown)}")
    if "epochs" in values and sweep["trial_steps"]:
        raise UserError("--epochs applies with --trial-steps 0 only")
    training = with_environment(TrainConfig(**{"epochs": SWEEP_EPOCHS, "eval_every": TRIAL_EVAL_EVERY, **values,
                                               **fixed}))
    return SweepConfig(study, training, options, plateau=rule, **sweep)


# out: training.out, as ablate.py
SWEEP_FIELDS = ("seeds", "shard", "shard_salt", "workers", "summarize", "export_models")

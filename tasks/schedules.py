"""The learning-rate schedules, in one table: `--lr-schedule`'s choices and help (tasks/training/options.py), its
validation (tasks/config.py) and the multiplier the optimizer's LambdaLR follows (tasks/training/build.py) all read
`SCHEDULES`. Adding a schedule (say cosine) is adding one `Schedule` here and its test."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


def _linear(total_steps: int, warmup: float) -> Callable[[int], float]:
    warm = max(1, int(total_steps * warmup))

    def f(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))
    return f


def _constant(total_steps: int, warmup: float) -> Callable[[int], float]:
    return lambda step: 1.0


@dataclass(frozen=True)
class Schedule:
    name: str
    help: str                                           # for --help: what the rate does
    multiplier: Callable[[int, float], Callable]        # (total steps, warm-up fraction) -> step -> factor of --lr


SCHEDULES = {s.name: s for s in (
    Schedule("linear", "warm-up then linear decay to 0", _linear),
    Schedule("constant", "--lr throughout, no warm-up (the course's classifier.py)", _constant),
)}


def lr_lambda(total_steps: int, warmup: float, schedule: str = "linear") -> Callable[[int], float]:
    """The factor of the peak rate at each step, for `torch.optim.lr_scheduler.LambdaLR`."""
    return SCHEDULES[schedule].multiplier(total_steps, warmup)


def schedules_help() -> str:
    return "; ".join(f"{s.name}: {s.help}" for s in SCHEDULES.values())

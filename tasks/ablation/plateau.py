"""The sweeps' stopping rule: a trial stops once its score on a held-out part of its own training data has
reached a plateau, or at its step cap (--trial-steps), whichever comes first.

Why: a fixed budget measures how fast a model converges as much as where it ends (a re-drawn model
needs more steps than the pretrained one), so a verdict on a fixed budget partly measures speed.
The plateau is judged on rows of the trial's training data (after --data-fractions), never on dev:
`split_heldout` draws them with the trial's seed and removes them from the rows the trial trains on.
They are scored at every evaluation (--eval-every); after `patience` evaluations in a row without an
improvement of at least `tolerance` (and more than none) over the best held-out score so far, the run
ends with a last dev evaluation, which is the trial's result as with the fixed budget.
"""
import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from minbert import UserError

from ..evaluation import evaluate
from ..inputs import RunInputs, subsample_split
from ..metrics import CORRELATIONS
from ..registry import REGISTRY
from ..training import Callback
from .line import PlateauAccount

HELDOUT = "heldout"  # the held-out rows' split name in a trial's inputs
PATIENCE = 3
TOLERANCE = 0.005
HOLDOUT_SHARE = 0.1
HOLDOUT_MAX = 500    # rows per task: the held-out scoring stays cheap on Quora's 141k training pairs


@dataclass(frozen=True)
class PlateauRule:
    patience: int = PATIENCE        # 0: off (the fixed budget)
    tolerance: float = TOLERANCE
    holdout_share: float = HOLDOUT_SHARE
    holdout_max: int = HOLDOUT_MAX

    @property
    def on(self) -> bool:
        return self.patience > 0


def heldout_indices(rows: int, share: float, most: int, seed: int) -> list:
    """Which of a task's `rows` training rows are held out: about `share` of them (at least one, at most `most`,
    and one row always left to train on), drawn by `seed`; sorted. None of them for fewer than two rows."""
    count = heldout_count(rows, share, most)
    if not count:
        return []
    return sorted(np.random.default_rng([seed, 27]).choice(rows, size=count, replace=False).tolist())


def heldout_count(rows: int, share: float, most: int) -> int:
    """How many of a task's `rows` training rows `heldout_indices` holds out (0 for fewer than two)."""
    return min(max(1, round(rows * share)), most, rows - 1) if rows >= 2 else 0


def coarse_holdout(task: str, heldout_rows: int, tolerance: float) -> Optional[str]:
    """A one-line warning where one held-out sentence moves the task's accuracy by more than the tolerance: the
    rule then stops a trial when a few sentences flip, not when it has converged. None otherwise, and for a
    correlation metric, which no single row moves by a fixed step."""
    declared = REGISTRY.get(task)
    if not heldout_rows or declared is None or declared.metric in CORRELATIONS or 1 / heldout_rows <= tolerance:
        return None
    return (f"{task}: {heldout_rows} held-out rows, so one sentence is {1 / heldout_rows:.3f} of accuracy, over "
            f"the plateau's tolerance of {tolerance:g}: the stop is decided by a few sentences rather than by "
            f"convergence (raise --plateau-holdout, or --plateau-patience 0 for the fixed cap)")


def split_heldout(inputs: RunInputs, tasks, fraction: float, seed: int, rule: PlateauRule) -> tuple:
    """(inputs whose training rows are the trial's share (`fraction`, drawn by `seed` as training draws it) minus
    the held-out rows, which are the split HELDOUT; {task: (training rows, held-out rows)}).

    The returned inputs hold the trial's share already: train them with data_fraction 1."""
    data, record, counts = dict(inputs.data), dict(inputs.data_record), {}
    for task in tasks:
        share = subsample_split(inputs.data[task]["train"], fraction, seed)
        held = set(heldout_indices(len(share), rule.holdout_share, rule.holdout_max, seed))
        if not held:
            raise UserError(f"{task}: the trial's training share has {len(share)} row(s); the plateau needs two "
                             f"or more (one held out): raise --data-fractions or pass --plateau-patience 0")
        kept = [i for i in range(len(share)) if i not in held]
        data[task] = {**inputs.data[task], "train": share.rows(kept), HELDOUT: share.rows(sorted(held))}
        record[task] = {**record[task], "train": {**record[task]["train"], "trial_fraction": fraction,
                                                  "trial_rows": len(kept), "heldout_rows": len(held)}}
        counts[task] = (len(kept), len(held))
    return dataclasses.replace(inputs, data=data, data_record=record), counts


class Plateau(Callback):
    """Scores the held-out rows at every evaluation (logged beside dev/... as heldout/METRIC) and asks the run to
    stop on a plateau (the loop then evaluates dev at the step it stopped, if not done, and finishes). `curve`: the
    held-out scores; `stopped`: whether the plateau ended it."""

    def __init__(self, rule: PlateauRule, tasks):
        self.rule, self.tasks = rule, tuple(tasks)
        self.metric = self.tasks[0] if len(self.tasks) == 1 else "overall"
        self.curve, self.best, self.best_step, self.stale, self.stopped = [], None, None, 0, False

    def on_evaluate(self, run, metrics, seconds):
        if self.curve and self.curve[-1]["step"] == run.state.global_step:
            return
        held = evaluate(run.model, run.inputs, run.config.eval_batch_size, split=HELDOUT)
        score = held[self.metric]
        self.curve.append({"step": run.state.global_step, "score": score,
                           **{t: held[t] for t in self.tasks}})
        run.log(f"{HELDOUT}/{self.metric}", score)  # the trial's curves: beside dev/..., what the rule watches
        if self.best is None or (score > self.best and score >= self.best + self.rule.tolerance):
            self.best, self.best_step, self.stale = score, run.state.global_step, 0
            return
        self.stale += 1
        if self.stale >= self.rule.patience and run.state.global_step < run.total_steps:
            self.stopped = True
            # The run ends here; its learning-rate schedule (built over the cap) stays as it was, so a trial that
            # stops follows the same schedule as one that does not, up to here.
            run.request_stop(f"plateau: {self.stale} evaluations without an improvement of {self.rule.tolerance:g} "
                             f"in held-out {self.metric}")

    def describe(self, counts: dict, steps: int) -> PlateauAccount:
        """The results line's budget.plateau."""
        return PlateauAccount(**dataclasses.asdict(self.rule), metric=self.metric, stopped=self.stopped,
                              stop_step=steps, best=self.best, best_step=self.best_step,
                              train_rows={t: n for t, (n, _) in counts.items()},
                              holdout_rows={t: h for t, (_, h) in counts.items()})


def dev_curve(history: list) -> list:
    """The dev scores at each evaluation of a fit's history: the trial's learning curve on dev."""
    return [{"step": e["step"], **{k: v for k, v in e["dev"].items() if v is not None}} for e in history]


def plateau_fingerprint(rule: PlateauRule) -> Optional[dict]:
    """What the rule adds to a sweep's fingerprint: nothing when off, so fixed-budget sweeps keep theirs."""
    return dataclasses.asdict(rule) if rule.on else None

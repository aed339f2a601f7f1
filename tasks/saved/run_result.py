"""A training run's result, its metrics.json, as one typed record: what the training loop returns and writes,
and what the model card, the model folder, the course's provenance and the search read back.

The dev figures ("best", "final") stay mappings of task -> score plus "overall" (and "overall_raw"), since
the tasks are the run's own; a task the run did not evaluate reads None through `score`. A metrics.json
written before this record had no schema number: it reads as schema 1 with the defaults below.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError

from .run_record import known_fields, written

SCHEMA = 1
OVERALL = "overall"


@dataclass(frozen=True)
class RunResult:
    """metrics.json of a train_multitask.py or classifier.py run."""
    final: dict                          # the last evaluation's dev figures
    best: dict                           # the best evaluation's (the one the run's model/ holds)
    best_epoch: int
    best_step: int
    history: list                        # every evaluation: step, epoch, dev, ...
    steps: int                           # steps trained
    nonfinite_skipped: int = 0           # steps skipped for a non-finite loss or gradient
    scaler_skipped: Optional[int] = None  # fp16's overflow steps; None where no loss scaler ran
    stop_reason: Optional[str] = None    # why a callback ended the run before its last step
    averages: Optional[dict] = None      # --average: the copies' settings and figures (averaging.py)
    per_task_best: Optional[dict] = None  # --per-task-best: each task's chosen evaluation (task_best.py)
    schema: int = SCHEMA

    @classmethod
    def from_json(cls, data: dict) -> "RunResult":
        """The record of a metrics.json's content (or of the loop's live result, whose "model" it ignores)."""
        return cls(**known_fields(cls, data))

    @classmethod
    def read(cls, path: Path) -> "RunResult":
        """metrics.json at `path`; a file that is not one is one line naming it."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            return cls.from_json(data)
        except (OSError, ValueError, TypeError) as e:
            raise UserError(f"{path}: not a run's metrics.json ({e})") from None

    def to_json(self) -> dict:
        # an optional part the run did not have stays absent, as the loop has always left it
        return written(self)

    def scores(self, which: str = "best") -> dict:
        """The dev figures of the best evaluation ("best") or the last one ("final")."""
        return {"best": self.best, "final": self.final}[which]

    def score(self, task: str, which: str = "best") -> Optional[float]:
        """One task's dev score, or "overall"; None where the run did not evaluate it."""
        return self.scores(which).get(task)

    @property
    def dev(self) -> Optional[float]:
        """The run's dev score: its best evaluation's overall, a one-task run's (Part 1) task score, or with
        --per-task-best the overall of each task's own best evaluation (each task's files come from it)."""
        if self.per_task_best is not None:
            return self.per_task_best[OVERALL]
        if self.score(OVERALL) is None:
            return next((v for k, v in self.best.items() if k != OVERALL and v is not None), None)
        return self.best[OVERALL]

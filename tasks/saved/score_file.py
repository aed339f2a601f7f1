"""A run's score files: per task and split, the values an ensemble averages (`tasks/ensemble/`).

Beside the course's prediction files, `write_all_predictions` (tasks/evaluation.py) writes, from the same
weights and the same forward pass, `predictions/scores/<task>-<split>.json`:

    {"schema": 1, "task": "sst", "split": "dev", "head_kind": "classify",
     "holds": "each class's probability", "ids": [...], "values": [[p0, ..., p4], ...]}

`values` holds, per example in the split's order: the class probabilities (a list, classify), P(1) (a number,
binary) or the predicted score (a number, regress: the value the prediction file holds). The prediction files
stay what the course reads; these are what averaging needs and the files cannot give (a class is not its
probability).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from minbert.errors import CheckpointError

from ..fileio import atomic_write_text
from ..head_kinds import head_kind

SCHEMA = 1
SCORES_DIR = "scores"  # under a run's predictions/ folder


def score_path(predictions: str | os.PathLike, task: str, split: str) -> Path:
    """Where the scores of `task`'s `split` go in a predictions folder."""
    return Path(predictions) / SCORES_DIR / f"{task}-{split}.json"


@dataclass(frozen=True)
class ScoreFile:
    """One task's scores on one split: per example (ids in the split's order) a list of class probabilities
    (classify) or one number, P(1) (binary) or the score (regress)."""
    task: str
    split: str
    head_kind: str
    ids: tuple
    values: tuple
    schema: int = SCHEMA

    def __post_init__(self):
        if len(self.ids) != len(self.values):
            raise ValueError(f"{len(self.ids)} ids for {len(self.values)} values")
        listed = head_kind(self.head_kind).has_classes
        for value in self.values:
            numbers = value if listed else (value,)
            if isinstance(value, (list, tuple)) != listed or not all(math.isfinite(v) for v in numbers):
                raise ValueError(f"{self.task} {self.split}: {value!r} is not {head_kind(self.head_kind).holds}")

    def to_json(self) -> dict:
        return {"schema": self.schema, "task": self.task, "split": self.split, "head_kind": self.head_kind,
                "holds": head_kind(self.head_kind).holds, "ids": list(self.ids),
                "values": [list(v) if isinstance(v, tuple) else v for v in self.values]}

    @classmethod
    def from_json(cls, record: dict) -> "ScoreFile":
        if record["schema"] != SCHEMA:
            raise ValueError(f"schema {record['schema']}, this version reads {SCHEMA}")
        values = tuple(tuple(float(p) for p in v) if isinstance(v, list) else float(v) for v in record["values"])
        return cls(record["task"], record["split"], record["head_kind"], tuple(str(i) for i in record["ids"]), values)

    def write(self, predictions: str | os.PathLike) -> Path:
        """Into a predictions folder, crash-safe."""
        return atomic_write_text(score_path(predictions, self.task, self.split), json.dumps(self.to_json()) + "\n")


def read_scores(path: str | os.PathLike) -> ScoreFile:
    """A score file; one line naming it if it cannot be read."""
    try:
        return ScoreFile.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a score file ({e})") from None

"""The course's evaluation metrics and the single score used to pick a model.

Metrics always return a finite float: they are written to strict JSON logs
and compared to choose the best checkpoint, where a NaN would either crash
the write or silently never win.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

TASK_METRIC = {"sst": "accuracy", "quora": "accuracy", "sts": "pearson"}


def _pair(pred: Sequence, gold: Sequence) -> tuple[np.ndarray, np.ndarray]:
    pred, gold = np.asarray(pred).reshape(-1), np.asarray(gold).reshape(-1)
    if pred.shape != gold.shape:
        raise ValueError(f"{pred.size} predictions for {gold.size} gold labels")
    if pred.size == 0:
        raise ValueError("cannot score an empty set of predictions")
    return pred, gold


def accuracy(pred: Sequence, gold: Sequence) -> float:
    pred, gold = _pair(pred, gold)
    return float(np.mean(pred == gold))


def pearson(pred: Sequence, gold: Sequence) -> float:
    """Pearson correlation; 0.0 where it is undefined.

    A constant prediction (a collapsed regression head) or non-finite
    predictions carry no information about the ordering, so they score as
    "no correlation" rather than NaN.
    """
    pred, gold = _pair(pred, gold)
    x, y = pred.astype(np.float64), gold.astype(np.float64)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return 0.0
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(x @ x) * float(y @ y))
    if denominator == 0.0:
        return 0.0
    return float(np.clip(float(x @ y) / denominator, -1.0, 1.0))


def overall_score(sst_acc: float | None, quora_acc: float | None, sts_pearson: float | None) -> float | None:
    """The course's overall score: mean of the accuracies and (pearson + 1) / 2.

    Mapping Pearson to [0, 1] puts it on the accuracies' scale.  Tasks not
    evaluated (None) are left out of the mean; with none at all there is no
    score (None).
    """
    parts = [sst_acc, quora_acc, None if sts_pearson is None else (sts_pearson + 1.0) / 2.0]
    present = [float(p) for p in parts if p is not None]
    return sum(present) / len(present) if present else None

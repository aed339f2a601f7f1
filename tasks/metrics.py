"""The course's evaluation metrics and the single score used to pick a model.

Metrics always return a finite float: they are written to strict JSON logs
and compared to choose the best checkpoint, where a NaN would either crash
the write or silently never win.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from .registry import get_task

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


METRICS = {"accuracy": accuracy, "pearson": pearson}


def score(metric: str, pred: Sequence, gold: Sequence) -> float:
    """The registry's metric by name."""
    return METRICS[metric](pred, gold)


def unit_scale(metric: str, value: float) -> float:
    """A metric on [0, 1]: accuracies as they are, a correlation r as (r + 1) / 2."""
    return (value + 1.0) / 2.0 if metric == "pearson" else value


def overall_score(metrics: Mapping[str, float | None]) -> float | None:
    """The course's overall score: the mean of the tasks' metrics on [0, 1] (`unit_scale`).

    For SST, Quora and STS this is (acc_sst + acc_quora + (r_sts + 1) / 2) / 3.
    Tasks not evaluated (None) are left out of the mean; with none at all
    there is no score (None).
    """
    present = [unit_scale(get_task(t).metric, float(v)) for t, v in metrics.items() if v is not None]
    return sum(present) / len(present) if present else None


def raw_mean_score(metrics: Mapping[str, float | None]) -> float | None:
    """The overall score of the CS224N report "Freeze Your Layers": the plain mean of the tasks' metrics, a
    correlation counted as r itself (the course's `overall_score` counts it as (r + 1) / 2). Printed beside the
    course's so the report's table can be compared; runs keep choosing their best evaluation by the course's."""
    present = [float(v) for v in metrics.values() if v is not None]
    return sum(present) / len(present) if present else None

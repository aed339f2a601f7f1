"""The evaluation metrics a task can name, and the single score used to pick a model.

The course's tasks use accuracy and Pearson; the GLUE papers' tasks also use
Matthews correlation (CoLA), F1 of the positive class (MRPC, QQP) and
Spearman correlation (STS-B), so a user-declared task can name any of them.

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


def spearman(pred: Sequence, gold: Sequence) -> float:
    """Spearman's rank correlation: Pearson's of the ranks, tied values sharing their mean rank."""
    from scipy.stats import rankdata
    pred, gold = _pair(pred, gold)
    x, y = pred.astype(np.float64), gold.astype(np.float64)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return 0.0
    return pearson(rankdata(x), rankdata(y))


def _confusion(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Counts of (gold class, predicted class) over the classes either side uses."""
    classes, codes = np.unique(np.concatenate([gold, pred]), return_inverse=True)
    gold_codes, pred_codes = codes[:gold.size], codes[gold.size:]
    matrix = np.zeros((classes.size, classes.size), dtype=np.int64)
    np.add.at(matrix, (gold_codes, pred_codes), 1)
    return matrix


def matthews(pred: Sequence, gold: Sequence) -> float:
    """Matthews correlation coefficient (Gorodkin's K-class form; the phi coefficient for two classes).

    0.0 where it is undefined (every prediction, or every gold label, one class).
    """
    pred, gold = _pair(pred, gold)
    c = _confusion(pred, gold).astype(np.float64)
    n, correct = c.sum(), np.trace(c)
    true_counts, pred_counts = c.sum(1), c.sum(0)
    numerator = correct * n - float(true_counts @ pred_counts)
    denominator = math.sqrt((n * n - float(pred_counts @ pred_counts)) * (n * n - float(true_counts @ true_counts)))
    return 0.0 if denominator == 0.0 else float(np.clip(numerator / denominator, -1.0, 1.0))


def _f1_of(pred: np.ndarray, gold: np.ndarray, positive) -> float:
    """F1 of one class: 2 TP / (2 TP + FP + FN); 0.0 when the class is neither predicted nor gold."""
    tp = float(np.sum((pred == positive) & (gold == positive)))
    wrong = float(np.sum((pred == positive) != (gold == positive)))
    return 0.0 if tp == 0.0 else 2 * tp / (2 * tp + wrong)


def f1(pred: Sequence, gold: Sequence) -> float:
    """F1 of the positive class, label 1 (GLUE's MRPC and QQP)."""
    pred, gold = _pair(pred, gold)
    return _f1_of(pred, gold, 1)


def macro_f1(pred: Sequence, gold: Sequence) -> float:
    """The unweighted mean of every class's F1, over the classes in the gold labels or the predictions."""
    pred, gold = _pair(pred, gold)
    return float(np.mean([_f1_of(pred, gold, c) for c in np.unique(np.concatenate([gold, pred]))]))


METRICS = {"accuracy": accuracy, "pearson": pearson, "spearman": spearman, "mcc": matthews, "f1": f1,
           "macro_f1": macro_f1}
CORRELATIONS = ("pearson", "spearman", "mcc")  # on [-1, 1]; the other metrics are on [0, 1]


def compute_metric(metric: str, pred: Sequence, gold: Sequence) -> float:
    """The registry's metric by name."""
    return METRICS[metric](pred, gold)


def unit_scale(metric: str, value: float) -> float:
    """A metric on [0, 1]: accuracies and F1 as they are, a correlation r as (r + 1) / 2."""
    return (value + 1.0) / 2.0 if metric in CORRELATIONS else value


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

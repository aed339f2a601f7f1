"""The head kinds: one declarative record each, the single place a head kind's name is compared.

A task's record (`tasks/registry.py`) names its head kind ("classify", "binary" or "regress"),
and everything that depends on the kind reads the kind's `HeadKind` record below: how labels are
parsed and stored (`tasks/data.py`, `tasks/encoded.py`), the head's width, loss, prediction,
probabilities and SMART divergence (`tasks/heads.py`), which values a prediction file may hold
(`tasks/course/formats.py`), what a score file holds and how an ensemble decides from its averages
(`tasks/saved/score_file.py`, `tasks/ensemble/`), the columns `predict.py --input` prints, what `tasks.json` says a
head reads (`tasks/saved/model_folder.py`), which metrics and prediction format a declared task
may have (`tasks/task_file.py`) and which estimator a linear probe fits (the probe study). Adding
a head kind with one label per row (say ordinal) is adding one record to `HEAD_KINDS` and its tests
(tests/tasks/test_head_kinds.py registers a fourth kind and runs it through the sites). Several labels per
row (multi-label) would also change how a label column is read (`tasks/data.py`, `tasks/encoded.py`).

The names are what config.json, tasks.json and the model card record: they never change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Reading:
    """How a task's head outputs are read in one model: the task's score range [low, high], whether the output
    is a cosine of two sentence vectors (a siamese pair of a kind with `siamese_cosine`) and whether it comes
    from the report's heads ("Freeze Your Layers", --task-heads report)."""
    low: float
    high: float
    siamese: bool = False
    report: bool = False


@dataclass(frozen=True)
class HeadKind:
    """What a head kind is, from the labels in a task's files to the columns of `predict.py --input`."""
    name: str                  # as task records, config.json, tasks.json and the model card write it
    word: str                  # the kind in a sentence: "a {word} task" (a declared task's metric error)
    label_dtype: torch.dtype   # of the labels tensor a split is encoded with
    integer_labels: bool       # a label is a class number (a file's "3.0" is read as 3, "3.5" refused)
    has_classes: bool          # the task gives num_classes, and the head has one output per class
    metrics: tuple             # the metrics that fit the kind (tasks/metrics.py); the first: a declared task's default
    declared_format: str       # a declared task's prediction format (tasks/course/formats.py), classes not named
    loss: Callable             # (outputs, labels, Reading) -> scalar
    predict: Callable          # (outputs, Reading) -> the values prediction files hold
    divergence: Callable       # (outputs, other outputs) -> scalar, for SMART
    probabilities: Optional[Callable]  # outputs -> each class's probability (or P(1)); None: a score
    classes: Callable          # TaskConfig -> the classes a prediction may be (range), or None for a score
    probability_columns: Callable      # TaskConfig -> the names of `probabilities`' columns in predict.py --input
    prediction_column: str     # predict.py --input's name for the prediction
    probe: str                 # the linear probe's estimator: "logistic" (classes) or "ridge" (scores)
    siamese_cosine: bool       # a siamese pair's output is the cosine of its two sentence vectors (no parameters)
    report_pair_head: Optional[str]  # the report's head for a siamese pair: "bilinear", "projected-cosine", or None
    output_note: Callable      # TaskConfig -> what a cross-encoded head's output becomes, in tasks.json's words
    decide: Callable           # scores (as `probabilities` gives them, or the score) -> the predictions: an ensemble's
    holds: str                 # what a score file's value per example is (tasks/saved/score_file.py)

    def outputs(self, cfg) -> int:  # cfg: a tasks.registry.TaskConfig (registry imports this module)
        """The width of the head's last layer: a logit per class, or one logit or score."""
        return cfg.num_classes if self.has_classes else 1


def _sym_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(P||Q) + KL(Q||P), SMART's symmetric KL, not halved, so its weights mean what the paper's do."""
    p, q = F.log_softmax(p_logits.float(), -1), F.log_softmax(q_logits.float(), -1)
    return ((p.exp() * (p - q)).sum(-1) + (q.exp() * (q - p)).sum(-1)).mean()


def _binary_logits(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.zeros_like(x), x], -1)


def scaled_score(out: torch.Tensor, reading: Reading, cosine: bool) -> torch.Tensor:
    """A score in the task's range [low, high]: of a logit low + (high - low) * sigmoid(logit); of a cosine the
    cosine scaled onto it, negative cosines at low, as Sentence-BERT does (the course's STS: low 0, high 5)."""
    scaled = out.clamp(min=0.0) if cosine else torch.sigmoid(out.float())
    return reading.low + scaled * (reading.high - reading.low)


def _regression_loss(out: torch.Tensor, labels: torch.Tensor, reading: Reading) -> torch.Tensor:
    if reading.siamese and reading.report:  # the report's score, high * relu(cos), regressed onto the score
        return F.mse_loss(scaled_score(out.float(), reading, True), labels.float())
    if reading.siamese:  # regress the cosine onto the score mapped to [0, 1] (Sentence-BERT)
        return F.mse_loss(out.float(), (labels.float() - reading.low) / (reading.high - reading.low))
    return F.mse_loss(scaled_score(out, reading, False), labels.float())


CLASSIFY = HeadKind(
    name="classify", word="classification", label_dtype=torch.long, integer_labels=True, has_classes=True,
    metrics=("accuracy", "mcc", "f1", "macro_f1"), declared_format="label",
    loss=lambda o, y, r: F.cross_entropy(o.float(), y.long()), predict=lambda o, r: o.argmax(-1),
    divergence=_sym_kl, probabilities=lambda o: o.float().softmax(-1),
    classes=lambda cfg: range(cfg.num_classes),
    probability_columns=lambda cfg: [f"p_{c}" for c in range(cfg.num_classes)],
    prediction_column="prediction", probe="logistic", siamese_cosine=False, report_pair_head=None,
    output_note=lambda cfg: "", decide=lambda p: p.argmax(-1), holds="each class's probability")
BINARY = HeadKind(
    name="binary", word="binary classification", label_dtype=torch.float32, integer_labels=True, has_classes=False,
    metrics=("accuracy", "mcc", "f1", "macro_f1"), declared_format="label",
    loss=lambda o, y, r: F.binary_cross_entropy_with_logits(o.float(), y.float()),
    predict=lambda o, r: (o > 0).long(), divergence=lambda a, b: _sym_kl(_binary_logits(a), _binary_logits(b)),
    probabilities=lambda o: torch.sigmoid(o.float()), classes=lambda cfg: range(2),
    probability_columns=lambda cfg: ["p_1"], prediction_column="prediction", probe="logistic",
    siamese_cosine=False, report_pair_head="bilinear", output_note=lambda cfg: "", decide=lambda p: (p > 0.5).long(),
    holds="P(1)")
REGRESS = HeadKind(
    name="regress", word="regression", label_dtype=torch.float32, integer_labels=False, has_classes=False,
    metrics=("pearson", "spearman"), declared_format="float",
    loss=_regression_loss, predict=lambda o, r: scaled_score(o, r, r.siamese),
    divergence=lambda a, b: F.mse_loss(a.float(), b.float()), probabilities=None,
    classes=lambda cfg: None, probability_columns=lambda cfg: [], prediction_column="score", probe="ridge",
    siamese_cosine=True, report_pair_head="projected-cosine",
    output_note=lambda cfg: f", score {cfg.label_range[1]} * sigmoid(logit)", decide=lambda score: score,
    holds="the predicted score")

HEAD_KINDS = {kind.name: kind for kind in (CLASSIFY, BINARY, REGRESS)}


def head_kind(name: str) -> HeadKind:
    """The record of the head kind `name`."""
    try:
        return HEAD_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown head kind {name!r}; expected one of {', '.join(HEAD_KINDS)}") from None

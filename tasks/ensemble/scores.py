"""What an ensemble averages: each member's score files, read, or computed from its weights where it has none,
then averaged and turned into predictions and dev figures.

A member's scores are the ones its run wrote beside its prediction files (`predictions/scores/`,
tasks/saved/score_file.py). A run made before those files existed has them computed here from its weights,
through `predict.py`'s path (its best.pt, else its model/ folder; its own precision), on the files it read:
a file whose sha256 differs from the run's record is refused. Nothing is written into a member's folder.

The average is the plain mean over members, in float64, of each example's class probabilities (classify),
P(1) (binary) or score (regress); the prediction is the head kind's `decide` of it (the most probable class,
P(1) > 0.5, the score itself), so a one-run ensemble predicts what the run does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from minbert import UserError

from ..data import read_split, resolve_data_dir
from ..evaluation import predict_with_scores
from ..metrics import compute_metric, overall_score
from ..registry import get_task
from ..saved.saved_run import course_inputs, inference_precision, load_trained
from ..saved.score_file import ScoreFile, read_scores, score_path
from .members import AVERAGED_SPLITS, Member


def splits_of(member: Member) -> list:
    """(task, split) pairs the member has files for: its tasks' dev and test (a task may have no test file)."""
    return [(t, s) for t in member.tasks for s in AVERAGED_SPLITS if member.files[t, s] is not None]


def data_folder(member: Member, data_dir=None) -> Path:
    """Where a member's files are read: `data_dir`, else the folder it read if still there, else the default."""
    if data_dir is None and member.data_dir and Path(member.data_dir).is_dir():
        data_dir = member.data_dir
    return resolve_data_dir(data_dir)


def member_scores(member: Member, device: torch.device, data_dir=None) -> tuple:
    """({(task, split): ScoreFile}, whether any was computed) of one member."""
    predictions = member.path / "predictions"
    found = {key: read_scores(score_path(predictions, *key)) for key in splits_of(member)
             if score_path(predictions, *key).is_file()}
    missing = [key for key in splits_of(member) if key not in found]
    if missing:
        found.update(computed_scores(member, missing, device, data_dir))
    return found, bool(missing)


def computed_scores(member: Member, keys: list, device: torch.device, data_dir=None) -> dict:
    """Score files of a run that wrote none, computed from its weights on the files it read."""
    trained = load_trained(member.path, device)
    precision = inference_precision("auto", trained, device)
    splits = sorted({split for _, split in keys})
    inputs = course_inputs(trained, data_folder(member, data_dir), splits, device, precision)
    out = {}
    for task, split in keys:
        read = inputs.data_record[task][split]
        if read is None or read["sha256"] != member.files[task, split]:
            raise UserError(f"{member.path}: its {task} {split} file is not at "
                            f"{data_folder(member, data_dir)} as it was (sha256 differs or missing); "
                            f"give the folder it read with --data-dir")
        part = inputs.data[task][split]
        found = predict_with_scores(trained.model, part, trained.tokenizer, device, trained.config.eval_batch_size,
                                    precision, label=f"{member.name} {split} {task}")
        out[task, split] = ScoreFile(task, split, get_task(task).head_kind, tuple(part.ids),
                                     tuple(tuple(v) if isinstance(v, list) else v for v in found.scores))
    return out


def average(files: list) -> ScoreFile:
    """The members' mean, example by example; they must hold the same examples in the same order."""
    first = files[0]
    for other in files[1:]:
        if other.ids != first.ids or other.head_kind != first.head_kind:
            raise UserError(f"the {first.task} {first.split} scores of the runs hold different examples "
                            f"or head kinds; were the score files edited?")
    mean = torch.tensor([f.values for f in files], dtype=torch.float64).mean(0)
    values = tuple(tuple(row) for row in mean.tolist()) if mean.dim() == 2 else tuple(mean.tolist())
    return ScoreFile(first.task, first.split, first.head_kind, first.ids, values)


def decide(scores: ScoreFile) -> list:
    """The predictions of scores: the most probable class, P(1) > 0.5, or the score."""
    kind = get_task(scores.task).kind
    return kind.decide(torch.tensor(scores.values, dtype=torch.float64)).tolist()


def dev_labels(member: Member, data_dir=None) -> dict:
    """task -> {id: label} of the dev files the members read, checked against their sha256."""
    folder, labels = data_folder(member, data_dir), {}
    for task in member.tasks:
        found = read_split(folder, task, "dev")
        if found is None or found.sha256 != member.files[task, "dev"]:
            raise UserError(f"{folder}: its {task} dev file is not the one the runs read (sha256 differs or "
                            f"missing); give the folder they read with --data-dir")
        labels[task] = {e.id: e.label for e in found.examples}
    return labels


def dev_figures(scores: dict, labels: dict) -> dict:
    """{task: metric, "overall": the course's mean} of dev scores {(task, "dev"): ScoreFile}."""
    figures = {}
    for (task, split), found in scores.items():
        if split == "dev":
            gold = [labels[task][i] for i in found.ids]
            figures[task] = compute_metric(get_task(task).metric, decide(found), gold)
    figures["overall"] = overall_score(figures)
    return figures


def mean_figures(figures: list) -> Optional[dict]:
    """The members' mean of each figure."""
    return {k: sum(f[k] for f in figures) / len(figures) for k in figures[0]} if figures else None

"""Predictions and dev metrics of a multitask model, and the course's prediction files of every task.

Used by the training loop (dev evaluations, the finished run's files), by `predict.py` and the
studies, none of which needs the training loop for it.
"""
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import nn

from .config import TrainConfig
from .course.formats import write_predictions
from .distributed import SINGLE, World, gather_objects
from .encoded import EncodedSplit, make_batch
from .heads import MultitaskModel, task_spec
from .inputs import RunInputs
from .machine import LOW_PRECISION, autocast
from .metrics import compute_metric, overall_score, raw_mean_score
from .registry import get_task
from .saved.score_file import ScoreFile


def predict(model: MultitaskModel, split: EncodedSplit, tokenizer, device, batch_size: int,
            precision: str, world: World = SINGLE, label: Optional[str] = None,
            values: Optional[Callable] = None) -> list:
    """Predictions in the split's order; batches sorted by length so little is padding.

    Under torchrun the batches are dealt out to the ranks and the predictions gathered:
    every rank returns the whole list, the same as one process would. With a `label`, a
    terminal shows a bar (a CFIMDB evaluation at 512 tokens takes minutes on a CPU).
    `values` turns the head's outputs into what is returned per example (default: the task's
    predictions, as its prediction files hold them).

    The host never waits for the device batch by batch: each batch's values stay on the device and
    are read once, all together, at the split's end; the weights are cast once for the whole split
    (`linear_weights_cast`). Both give the values the per-batch reading and casting gave, bit for bit
    (tests/tasks/test_evaluation.py).
    """
    model.eval()
    values = values or task_spec(split.task, model.pair_mode, model.task_heads).predict
    order = sorted(range(len(split)), key=split.lengths.__getitem__)
    starts = range(0, len(order), batch_size)
    bar = progress_bar(label is not None and world.main and sys.stdout.isatty(), len(starts), 0, label or "")
    rows, found = [], []
    with torch.inference_mode(), linear_weights_cast(model, precision):
        for b, start in enumerate(starts):
            if bar is not None:
                bar.update(1)
            if b % world.size != world.rank:
                continue
            idx = order[start:start + batch_size]
            batch = make_batch(split, idx, tokenizer, device)
            batch.pop("labels", None)
            with autocast(device, precision):
                found.append(values(model(split.task, batch)).float())    # on the device until the end
            rows.extend(idx)
        mine = dict(zip(rows, torch.cat(found).cpu().tolist())) if found else {}  # the one read
    if bar is not None:
        bar.close()
    out = [None] * len(split)
    for part in gather_objects(mine, world):
        for i, v in part.items():
            out[i] = v
    return out


@contextmanager
def linear_weights_cast(model: nn.Module, precision: str):
    """Under a 16-bit autocast, every plain `nn.Linear` of `model` evaluates with its weight and bias cast to
    that precision once, here, instead of autocast casting them again in every batch: the same values autocast
    makes, so the outputs are bit for bit the same. The modules' parameters are set aside, never written, and
    put back in their places on the way out, whatever happens inside; the fast path's linears
    (`CastOnceLinear`, not plain) keep their own cache. Nothing is swapped for a compiled module, whose
    guards would see new tensors and compile again.

    Use only without autograd (under `torch.inference_mode()`): the cast tensors are not parameters.
    """
    dtype = LOW_PRECISION.get(precision)
    compiled = any(getattr(m, "_compiled_call_impl", None) is not None for m in model.modules())
    if dtype is None or compiled:
        yield
        return
    kept = []
    try:
        for module in model.modules():
            if type(module) is not nn.Linear:
                continue
            for name, param in module._parameters.items():
                if param is not None and param.is_floating_point() and param.dtype == torch.float32:
                    kept.append((module, name, param))
        for module, name, param in kept:
            # In the module's own dict, so the order of its parameters (and of the state dict) is untouched.
            module._parameters[name] = param.detach().to(dtype)
        yield
    finally:
        for module, name, param in kept:
            module._parameters[name] = param


@dataclass(frozen=True)
class Predicted:
    """One task's split as one forward pass gives it: the predictions (what its prediction file holds) and, per
    example, the values an ensemble averages (a score file's `values`: tasks/saved/score_file.py)."""
    predictions: list
    scores: list


def with_scores(spec) -> Callable:
    """`predict`'s `values` for a head of `spec` (tasks.heads.task_spec): per example its prediction, then its
    class probabilities (or P(1)); a score is its own prediction. The prediction is the head's own, as
    `predict` gives it by default, so a prediction file's bytes do not depend on the scores beside it."""
    if spec.probabilities is None:
        return lambda outputs: spec.predict(outputs)[:, None]
    return lambda outputs: torch.cat([spec.predict(outputs)[:, None].float(),
                                      spec.probabilities(outputs).reshape(len(outputs), -1).float()], -1)


def predict_with_scores(model: MultitaskModel, split: EncodedSplit, tokenizer, device, batch_size: int,
                        precision: str, world: World = SINGLE, label: Optional[str] = None) -> Predicted:
    """`predict` of the split, with each example's scores from the same pass."""
    rows = predict(model, split, tokenizer, device, batch_size, precision, world, label,
                   values=with_scores(task_spec(split.task, model.pair_mode, model.task_heads)))
    cfg = get_task(split.task)
    if cfg.kind.probabilities is None:
        return Predicted([row[0] for row in rows], [row[0] for row in rows])
    listed = cfg.kind.has_classes  # a list of the classes' probabilities, or P(1)
    return Predicted([row[0] for row in rows], [row[1:] if listed else row[1] for row in rows])


def evaluate(model, inputs: RunInputs, batch_size: int, split: str = "dev", show: bool = False,
             predictions: Optional[dict] = None) -> dict:
    """The split's metrics per task and overall; each task's `Predicted` also goes into `predictions` if given."""
    metrics = {}
    for task in inputs.tasks:
        part = inputs.data[task][split]
        label = f"{split} {task}" if show else None
        if predictions is not None:
            found = predict_with_scores(model, part, inputs.tokenizer, inputs.device, batch_size, inputs.precision,
                                        inputs.world, label)
            predictions[task, split] = found
            preds = found.predictions
        else:
            preds = predict(model, part, inputs.tokenizer, inputs.device, batch_size, inputs.precision, inputs.world,
                            label=label)
        metrics[task] = compute_metric(get_task(task).metric, preds, part.labels.tolist())
    by_task = dict(metrics)
    metrics["overall"] = overall_score(by_task)        # the course's, which picks the best evaluation
    metrics["overall_raw"] = raw_mean_score(by_task)   # the report "Freeze Your Layers"'s, to compare with its table
    return metrics


def write_all_predictions(model, inputs: RunInputs, folder: Path, config: TrainConfig, show: bool = False,
                          splits=("dev", "test"), known: Optional[dict] = None, tasks=None) -> dict:
    """Dev and test predictions of every task (of `tasks` only, when given), under the course's names (Part 1's
    when `config.prediction_mode` names a Part-1 mode), and beside them each one's score file
    (`scores/<task>-<split>.json`, tasks/saved/score_file.py) from the same pass; returns
    {(task, split): predictions}. `known`: what this model already predicted, {(task, split): Predicted},
    written as it is."""
    written = {}
    for task in inputs.tasks if tasks is None else tasks:
        for split in splits:
            part = inputs.data[task].get(split)
            if part is None:
                continue  # the reader already said, in one line, that the file is missing
            found = None if known is None else known.get((task, split))
            if found is None:
                found = predict_with_scores(model, part, inputs.tokenizer, inputs.device, config.eval_batch_size,
                                            inputs.precision, inputs.world,
                                            label=f"{split} predictions {task}" if show else None)
            if inputs.world.main:
                write_predictions(folder, task, split, part.ids, found.predictions, config.prediction_mode)
                ScoreFile(task, split, get_task(task).head_kind, tuple(part.ids), tuple(
                    tuple(v) if isinstance(v, list) else v for v in found.scores)).write(folder)
            written[task, split] = found.predictions
    return written


def progress_bar(show: bool, total: int, initial: int, desc: str):
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True, leave=False)

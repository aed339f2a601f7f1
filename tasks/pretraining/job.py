"""Masked-language-model pretraining as a job of the training loop (tasks.training's `Job`): `fit` drives it
with the same epochs, steps, checkpoints, resume, signals, precision, schedule and callbacks as fine-tuning.

The job's data is one "task", `mlm`: the packed training sequences. An epoch is one pass over them in
shuffled, length-bucketed batches (the training loop's sampler), and each plan index carries the pass it
belongs to (`index + pass x sequences`), so that a batch, masks included, is a function of its indices
alone (masking.py). Evaluation is the held-out sequences' masked-token loss and accuracy under fixed masks;
the run's result is its final weights (outputs.py), the best evaluation is only recorded.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

import minbert

from ..distributed import SINGLE, World, all_reduce_mean_
from ..machine import autocast
from ..training import Job, build_sampler
from .masking import Masking, masked_batch
from .prepared import PreparedCorpus

MLM = "mlm"                # the job's one task name: in the plan, the logged curves, the progress lines
HELD_OUT_STREAM = 2**32 - 1  # the held-out masks' stream: apart from every training pass's


class PassTagged:
    """The training loop's sampler over the training sequences, each index tagged with its pass (epoch)."""

    def __init__(self, sampler, n: int):
        self.sampler, self.n = sampler, n

    def steps_per_epoch(self) -> int:
        return self.sampler.steps_per_epoch()

    def plan(self, epoch: int) -> list:
        return [{MLM: [i + epoch * self.n for i in step[MLM]]} for step in self.sampler.plan(epoch)]


def training_sampler(corpus: PreparedCorpus, batch_size: int, seed: int, epochs: int) -> PassTagged:
    sampler = build_sampler("proportional", {MLM: corpus.train.lengths}, batch_size, seed, num_epochs=epochs)
    return PassTagged(sampler, len(corpus.train))


def step_tokens(plan: list, lengths: list, n: int) -> np.ndarray:
    """The tokens (padding not counted) each step of an epoch's plan trains on."""
    return np.array([sum(lengths[i % n] for i in step[MLM]) for step in plan], dtype=np.int64)


def steps_for_tokens(tokens: int, sampler: PassTagged, lengths: list) -> int:
    """The first step after which the run has trained on at least `tokens` tokens."""
    per_pass = sum(lengths)
    passes, rest = divmod(tokens, per_pass)
    if rest == 0:
        return passes * sampler.steps_per_epoch()
    reached = np.cumsum(step_tokens(sampler.plan(passes), lengths, sampler.n))
    return passes * sampler.steps_per_epoch() + int(np.searchsorted(reached, rest) + 1)


class MaskedLMLoss(nn.Module):
    """One batch's MLM loss and the values logged with it: the forward DistributedDataParallel wraps.

    Under torchrun each rank's mean is weighted by its share of the global batch's masked tokens (one all-reduce
    of the counts), not of its sequences, so that the gradients DDP averages are those of one process's mean over
    every masked token of the batch. The loop's `weight` (the sequence share) only says whether the rank has
    examples at all (0: it runs one for the all-reduce and adds nothing)."""

    def __init__(self, model: minbert.BertForMaskedLM, precision: str, world: World = SINGLE):
        super().__init__()
        self.model, self.precision, self.world = model, precision, world

    def forward(self, task: str, batch: dict, weight: float = 1.0):
        labels = batch.pop("labels")
        with autocast(labels.device, self.precision):
            out = self.model.compute_loss(batch["input_ids"], batch["attention_mask"], labels,
                                          batch["token_type_ids"])
        accuracy = out.correct.float() / max(out.count, 1)
        if not self.world.active:
            return out.loss, {f"train/loss/{task}": out.loss.detach(), f"train/accuracy/{task}": accuracy}
        mine = float(out.count) if weight > 0 else 0.0
        mean = all_reduce_mean_(torch.tensor([mine], device=labels.device), self.world)[0]
        share = mine / mean.clamp(min=1e-9)
        return out.loss * share, {f"train/loss/{task}": out.loss.detach() * share,
                                  f"train/accuracy/{task}": accuracy * share}


class MaskedLMJob(Job):
    """Pretraining `model` (a minbert.BertForMaskedLM, trained in place: one job, one run) on `corpus`."""
    score = "masked_accuracy"

    def __init__(self, model, corpus: PreparedCorpus, masking: Masking, pad_id: int, outputs=None):
        self.model, self.corpus, self.masking, self.pad_id = model, corpus, masking, pad_id
        self.outputs = outputs  # (folder, command_options) -> the run folder's callbacks (outputs.py)

    def build_model(self, config, inputs, encoder=None):
        if config.dropout is not None:
            minbert.set_dropout(self.model, config.dropout)
        return self.model.to(inputs.device)

    def encoder_of(self, model):
        return model  # BertForMaskedLM passes the optimizer hook and DDP's preparation to its encoder

    def plan(self, config, inputs):
        return {MLM: self.corpus.train}, "proportional", training_sampler(self.corpus, config.batch_size,
                                                                        config.seed, config.epochs)

    def loss(self, model, config, inputs, smart=None):
        return MaskedLMLoss(model, inputs.precision, inputs.world)

    def make_batch(self, run, task, indices):
        n = len(self.corpus.train)
        return masked_batch(self.corpus.train, [(i % n, i // n) for i in indices], self.masking, self.pad_id,
                            run.inputs.device)

    @torch.no_grad()
    def evaluate(self, run, show):
        """The held-out sequences' masked-token loss and accuracy, the same masks every time; under torchrun
        the batches are dealt out to the ranks and the sums gathered."""
        model, world, held = run.model, run.inputs.world, self.corpus.held_out
        model.eval()
        size = run.config.eval_batch_size
        sums = torch.zeros(3, dtype=torch.float64)  # loss x count, correct, count
        for b, start in enumerate(range(0, len(held), size)):
            if b % world.size != world.rank:
                continue
            items = [(i, HELD_OUT_STREAM) for i in range(start, min(start + size, len(held)))]
            batch = masked_batch(held, items, self.masking, self.pad_id, run.inputs.device)
            with autocast(run.inputs.device, run.inputs.precision):
                out = model.compute_loss(batch["input_ids"], batch["attention_mask"], batch["labels"],
                                         batch["token_type_ids"])
            sums += torch.tensor([float(out.loss) * out.count, float(out.correct), out.count], dtype=torch.float64)
        if world.active:
            sums = all_reduce_mean_(sums.to(run.inputs.device), world).cpu()
        loss, correct, count = (float(v) for v in sums)
        metrics = {"masked_loss": loss / count, "masked_accuracy": correct / count,
                   "perplexity": math.exp(min(loss / count, 50.0))}
        return metrics, None

    def folder_callbacks(self, folder, command_options=None):
        return self.outputs(folder, command_options)

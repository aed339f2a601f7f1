"""SMART regularisation (Jiang et al., 2020) for multitask fine-tuning.

Two terms are added to each task loss:

* smoothness: the divergence between the model's outputs on a batch and on the
  same batch with its word embeddings nudged, within a tiny L-inf ball, in the
  direction that changes the outputs most. It penalises sharp decision surfaces
  around the training points, which is where fine-tuning on small data overfits.
* proximal: the divergence between the model's outputs and those of a slowly
  moving (EMA) copy of it, a Bregman proximal-point / trust-region term that
  keeps each update from straying far from what the model already predicts.

Both are measured with the task's own `divergence` (the paper's symmetric KL,
KL(P||Q) + KL(Q||P), for classification; MSE for regression), which computes in
float32, so the terms also work under bfloat16 autocast. The EMA anchor is
evaluated without dropout: it stands for the previous iterate's predictions, a
fixed target, not a random one.
"""
from __future__ import annotations

import copy
from typing import Optional

import torch
from torch import Tensor

from ..config import SmartConfig
from ..heads import MultitaskModel, sequences, task_spec

_TINY = 1e-12  # keeps the gradient normalisation finite when a gradient is exactly zero


class Smart:
    """Computes the two SMART terms for a `MultitaskModel` and owns its EMA copy."""

    def __init__(self, model: MultitaskModel, config: SmartConfig, pair_mode: str):
        self.model = model
        self.config = config
        self.pair_mode = pair_mode
        # No copy when the proximal term is off: the EMA doubles the model's memory.
        self.ema: Optional[MultitaskModel] = None
        if config.mu > 0:
            self.ema = copy.deepcopy(model)
            self.ema.requires_grad_(False)

    def regularisers(self, task: str, batch: dict, outputs: Tensor) -> dict[str, Tensor]:
        """`outputs` must be `model(task, batch)` from this step's graph, so both terms
        send gradient into the model through it as well as through their own forward passes."""
        divergence = task_spec(task, self.pair_mode).divergence
        zero = torch.zeros((), device=outputs.device)
        smooth = zero
        if self.config.lambda_s > 0:
            smooth = self.config.lambda_s * self._smoothness(task, batch, outputs, divergence)
        prox = zero
        if self.ema is not None:
            prox = self.config.mu * self._proximal(task, batch, outputs, divergence)
        return {"smoothness": smooth, "proximal": prox}

    def _smoothness(self, task: str, batch: dict, outputs: Tensor, divergence) -> Tensor:
        cfg = self.config
        # Padding must stay untouched: perturbing it would change nothing useful but
        # would eat into the per-example budget the L-inf normalisation hands out.
        masks = [seq["attention_mask"][..., None].float() for seq in sequences(batch)]
        with torch.no_grad():
            clean = [e.float() for e in self.model.embed_inputs(batch)]
        deltas = [torch.randn_like(e) * cfg.sigma * m for e, m in zip(clean, masks)]
        target = outputs.detach()
        for _ in range(cfg.steps):
            for d in deltas:
                d.requires_grad_(True)
            adv = self.model(task, batch, inputs_embeds=[e + d for e, d in zip(clean, deltas)])
            grads = torch.autograd.grad(divergence(adv, target), deltas, allow_unused=True)
            stepped = []
            for d, g, m in zip(deltas, grads, masks):
                d = d.detach()
                if g is not None:
                    g = g.float()
                    # Per-example L-inf normalisation makes the step size independent of
                    # how flat the loss is, as in the paper's Algorithm 1.
                    scale = g.abs().amax(dim=tuple(range(1, g.dim())), keepdim=True) + _TINY
                    d = d + cfg.eta * g / scale
                stepped.append(d.clamp(-cfg.eps, cfg.eps) * m)
            deltas = stepped
        # Fresh embeddings with grad, so the word-embedding table is regularised too.
        embeds = self.model.embed_inputs(batch)
        adv = self.model(task, batch, inputs_embeds=[e + d.to(e.dtype) for e, d in zip(embeds, deltas)])
        return divergence(adv, outputs)

    def _proximal(self, task: str, batch: dict, outputs: Tensor, divergence) -> Tensor:
        self.ema.eval()
        with torch.no_grad():
            anchor = self.ema(task, batch)
        return divergence(outputs, anchor.detach())

    @torch.no_grad()
    def update_ema(self, update: int, total_updates: int):
        """Move the EMA copy toward the model; call after optimizer update `update` (1-based) of
        `total_updates`, which decide the momentum under the paper's schedule."""
        if self.ema is None:
            return
        beta = self.config.momentum(update, total_updates)
        current = dict(self.model.named_parameters())
        for name, p in self.ema.named_parameters():
            src = current[name].detach()
            if p.is_floating_point():
                p.mul_(beta).add_(src.to(p.dtype), alpha=1.0 - beta)
            else:
                p.copy_(src)
        buffers = dict(self.model.named_buffers())
        for name, b in self.ema.named_buffers():
            b.copy_(buffers[name])

    def state_dict(self) -> dict:
        return {"ema": None if self.ema is None else self.ema.state_dict()}

    def load_state_dict(self, state: dict):
        if (state.get("ema") is None) != (self.ema is None):
            raise ValueError("SMART state and config disagree on whether the proximal term is on")
        if self.ema is not None:
            self.ema.load_state_dict(state["ema"])

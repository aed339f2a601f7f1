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
_ASCENT_SCALE = 2.0 ** 16  # the inner step's loss scale (see ascent_directions); a power of two, exact


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
        probe = self.probe_scale(outputs.device)
        for _ in range(cfg.steps):
            directions = self.ascent_directions(task, batch, clean, deltas, target, divergence, probe)
            deltas = [(d + cfg.eta * g).clamp(-cfg.eps, cfg.eps) * m for d, g, m in zip(deltas, directions, masks)]
        # Fresh embeddings with grad, so the word-embedding table is regularised too.
        embeds = self.model.embed_inputs(batch)
        adv = self.model(task, batch, inputs_embeds=[e + probe * d.to(e.dtype) for e, d in zip(embeds, deltas)])
        # D(f(x + c d), f(x)) ~ c^2 D(f(x + d), f(x)) near d = 0, where D is at its minimum: the second-order
        # term the paper's smoothness measures, read at a size 16-bit arithmetic resolves.
        return divergence(adv, outputs) / probe ** 2

    def probe_scale(self, device: torch.device) -> float:
        """How much the perturbation is magnified where the forward computes in 16 bits (1 in fp32).

        The paper's perturbations (1e-5) are far below 16-bit resolution (fp16's relative step is 1e-3,
        bf16's 8e-3): added to activations of order 0.05-1, they are rounded away and what the divergence
        then sees is rounding. Magnified so the random start's size reaches the format's resolution, the
        outputs move measurably, and near its minimum the divergence changes quadratically: the ascent's
        direction is the same (its normalisation cancels the factor) and the smoothness term is divided
        by the factor's square."""
        if not torch.is_autocast_enabled(device.type):
            return 1.0
        sigma = self.config.sigma or self.config.eps
        if sigma <= 0:
            return 1.0
        return max(1.0, torch.finfo(torch.get_autocast_dtype(device.type)).eps / sigma)

    def ascent_directions(self, task: str, batch: dict, clean: list, deltas: list, target: Tensor, divergence,
                          probe: float = 1.0) -> list:
        """Each sequence's ascent direction at perturbation `deltas`: the divergence's gradient with respect
        to them, normalised per example (L-inf), so a step's size is independent of how flat the loss is
        (the paper's Algorithm 1). `probe` magnifies the perturbation in the forward (`probe_scale`)."""
        leaves = [(probe * d).requires_grad_(True) for d in deltas]
        adv = self.model(task, batch, inputs_embeds=[e + d for e, d in zip(clean, leaves)])
        # A batch mean's per-element gradients are ~1e-8: in fp16 they would flush to zero. A constant
        # factor keeps them representable; the normalisation below cancels it.
        grads = torch.autograd.grad(divergence(adv, target) * _ASCENT_SCALE, leaves, allow_unused=True)
        directions = []
        for d, g in zip(deltas, grads):
            if g is None:
                directions.append(torch.zeros_like(d))
                continue
            g = g.float()
            scale = g.abs().amax(dim=tuple(range(1, g.dim())), keepdim=True) + _TINY
            directions.append(g / scale)
        return directions

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

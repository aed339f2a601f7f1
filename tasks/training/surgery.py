"""Combining per-task gradients on the shared encoder when they disagree.

Summing task gradients lets a task whose gradient points against another's
undo its progress.  Both methods here remove, from a gradient, the part that
conflicts (has a negative dot product) with another task's gradient before
summing.  They work on flat 1-D vectors, one per task, over the shared
parameters; `flatten_grads` and `assign_flat_grad` move between those and
the parameters' `.grad`.

Vectors are handled in float32 and dot products are accumulated in float64
chunk by chunk, so bf16 gradients of a 100M-parameter encoder neither lose
the sign of a small dot product nor need a float64 copy of every gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import torch
from torch import Tensor

_CHUNK = 1 << 20


@dataclass
class SurgeryStats:
    """What surgery did on one step, for the training log."""

    conflicts: int  # unordered task pairs whose original gradients conflict
    pairs: int  # unordered task pairs considered
    cosines: dict[tuple[str, str], float] = field(default_factory=dict)


def _dot(a: Tensor, b: Tensor) -> float:
    total = 0.0
    for start in range(0, a.numel(), _CHUNK):
        total += torch.dot(a[start:start + _CHUNK].double(), b[start:start + _CHUNK].double()).item()
    return total


def _prepare(grads: dict[str, Tensor]) -> dict[str, Tensor]:
    if not grads:
        raise ValueError("gradient surgery needs at least one task gradient")
    shapes = {tuple(g.shape) for g in grads.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"task gradients must be 1-D vectors of one length, got shapes {sorted(shapes)}")
    return {task: g.detach().float() for task, g in grads.items()}


def _pair_stats(grads: dict[str, Tensor], squares: dict[str, float]) -> tuple[SurgeryStats, dict]:
    """Pairwise dot products of the original gradients, and the stats built on them."""
    tasks = list(grads)
    dots = {}
    stats = SurgeryStats(conflicts=0, pairs=0, cosines={})
    for i, a in enumerate(tasks):
        for b in tasks[i + 1:]:
            d = _dot(grads[a], grads[b])
            dots[a, b] = dots[b, a] = d
            stats.pairs += 1
            stats.conflicts += int(d < 0)
            denominator = (squares[a] * squares[b]) ** 0.5
            stats.cosines[a, b] = d / denominator if denominator > 0 else 0.0
    return stats, dots


def _remove_conflict(g: Tensor, g_dot_other: float, other: Tensor, other_square: float) -> None:
    """Project `g` in place onto the plane normal to `other` if they conflict."""
    if g_dot_other < 0 and other_square > 0:
        g.add_(other, alpha=-g_dot_other / other_square)


def pcgrad(grads: dict[str, Tensor], rng: np.random.Generator) -> tuple[Tensor, SurgeryStats]:
    """Projecting conflicting gradients (Yu et al., 2020).

    Each task's gradient is projected, one other task at a time in random
    order, away from every other task's original gradient it still conflicts
    with; the projected gradients are summed.  The random order matters
    because each projection can create or remove later conflicts.
    """
    grads = _prepare(grads)
    squares = {task: _dot(g, g) for task, g in grads.items()}
    stats, _ = _pair_stats(grads, squares)
    tasks = list(grads)
    total = torch.zeros_like(next(iter(grads.values())))
    for task in tasks:
        g = grads[task].clone()
        others = [other for other in tasks if other != task]
        for k in rng.permutation(len(others)).tolist():
            other = others[k]
            _remove_conflict(g, _dot(g, grads[other]), grads[other], squares[other])
        total += g
    return total, stats


def dominant(grads: dict[str, Tensor]) -> tuple[Tensor, SurgeryStats]:
    """Keep the largest gradient whole; strip from the others what opposes it.

    Cheaper than PCGrad (one projection per task) and deterministic: the
    task currently making the biggest update is never slowed down by the
    others, which may only help or stay out of its way.
    """
    grads = _prepare(grads)
    squares = {task: _dot(g, g) for task, g in grads.items()}
    stats, dots = _pair_stats(grads, squares)
    lead = max(grads, key=lambda task: squares[task])  # first one on ties
    total = grads[lead].clone()
    for task, g in grads.items():
        if task == lead:
            continue
        g = g.clone()
        _remove_conflict(g, dots[task, lead], grads[lead], squares[lead])
        total += g
    return total, stats


def flatten_grads(params: Iterable[torch.nn.Parameter]) -> Tensor:
    """All parameters' gradients as one float32 vector; a missing gradient is zeros."""
    pieces = []
    for p in params:
        if p.grad is None:
            pieces.append(torch.zeros(p.numel(), dtype=torch.float32, device=p.device))
        else:
            pieces.append(p.grad.detach().reshape(-1).float())
    if not pieces:
        return torch.zeros(0)
    return torch.cat(pieces)


def assign_flat_grad(params: Iterable[torch.nn.Parameter], flat: Tensor) -> None:
    """Write a flat vector back into every parameter's `.grad` (in its dtype)."""
    params = list(params)
    expected = sum(p.numel() for p in params)
    if flat.dim() != 1 or flat.numel() != expected:
        raise ValueError(f"flat gradient has shape {tuple(flat.shape)}, parameters need ({expected},)")
    offset = 0
    for p in params:
        piece = flat[offset:offset + p.numel()].reshape(p.shape)
        offset += p.numel()
        if p.grad is None:
            p.grad = piece.to(device=p.device, dtype=p.dtype).clone()
        else:
            p.grad.copy_(piece)

"""Combining per-task gradients on the shared encoder when they disagree.

Summing task gradients lets a task whose gradient points against another's
undo its progress.  Both methods here remove, from a gradient, the part that
conflicts (has a negative dot product) with another task's gradient before
summing.

The task gradients are the rows of one float32 matrix G (tasks x parameters,
`TaskGradients`), filled in place from the parameters' `.grad` after each
task's backward pass.  Every projection only ever adds multiples of original
task gradients, so each projected gradient is a combination of G's rows:
the methods work on the small Gram matrix G G^T (accumulated in float64 on
the device, chunk by chunk, so bf16 gradients of a 100M-parameter encoder
lose neither the sign of a small dot product nor need a float64 copy of G)
and on coefficients, on the host, and the merged gradient is one product
c^T G on the device.  One transfer a step: the Gram matrix, to the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import torch
from torch import Tensor

_CHUNK = 1 << 22  # columns of G per float64 product: 3 tasks x 4M x 8 bytes = 100 MB at a time


@dataclass
class SurgeryStats:
    """What surgery did on one step, for the training log."""

    conflicts: int  # unordered task pairs whose original gradients conflict
    pairs: int  # unordered task pairs considered
    cosines: dict[tuple[str, str], float] = field(default_factory=dict)


class TaskGradients:
    """One step's per-task gradients of `params`, as the rows of one float32 matrix on their device."""

    def __init__(self, params: list, tasks: list, device: torch.device):
        self.params, self.tasks = params, list(tasks)
        self.matrix = torch.empty(len(self.tasks), sum(p.numel() for p in params), device=device)

    def store(self, task: str) -> Tensor:
        """Copy the parameters' current gradients into `task`'s row (a missing gradient is zeros)."""
        row = self.matrix[self.tasks.index(task)]
        if self.params:
            torch.cat([p.grad.detach().reshape(-1) if p.grad is not None else
                       torch.zeros(p.numel(), device=row.device) for p in self.params], out=row)
        return row


def gram(matrix: Tensor) -> np.ndarray:
    """G G^T in float64, accumulated on G's device a chunk of columns at a time; read to the host once."""
    total = torch.zeros(matrix.shape[0], matrix.shape[0], dtype=torch.float64, device=matrix.device)
    for start in range(0, matrix.shape[1], _CHUNK):
        chunk = matrix[:, start:start + _CHUNK].double()
        total.addmm_(chunk, chunk.T)
    return total.cpu().numpy()


def _stats(tasks: list, products: np.ndarray) -> SurgeryStats:
    stats = SurgeryStats(conflicts=0, pairs=0, cosines={})
    for i, a in enumerate(tasks):
        for j in range(i + 1, len(tasks)):
            d = float(products[i, j])
            stats.pairs += 1
            stats.conflicts += int(d < 0)
            denominator = (float(products[i, i]) * float(products[j, j])) ** 0.5
            stats.cosines[a, tasks[j]] = d / denominator if denominator > 0 else 0.0
    return stats


def _remove_conflict(a: np.ndarray, products: np.ndarray, other: int) -> None:
    """Project the combination `a` (in place) onto the plane normal to row `other` if they conflict."""
    dot, square = float(a @ products[:, other]), float(products[other, other])
    if dot < 0 and square > 0:
        a[other] -= dot / square


def pcgrad_coefficients(products: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Projecting conflicting gradients (Yu et al., 2020), on the Gram matrix: the coefficients of the sum.

    Each task's gradient is projected, one other task at a time in random
    order, away from every other task's original gradient it still conflicts
    with; the projected gradients are summed.  The random order matters
    because each projection can create or remove later conflicts.
    """
    n = products.shape[0]
    total = np.zeros(n)
    for task in range(n):
        a = np.eye(n)[task]
        others = [other for other in range(n) if other != task]
        for k in rng.permutation(len(others)).tolist():
            _remove_conflict(a, products, others[k])
        total += a
    return total


def dominant_coefficients(products: np.ndarray) -> np.ndarray:
    """Keep the largest gradient whole; strip from the others what opposes it.

    Cheaper than PCGrad (one projection per task) and deterministic: the
    task currently making the biggest update is never slowed down by the
    others, which may only help or stay out of its way.
    """
    n = products.shape[0]
    lead = int(np.argmax(np.diag(products)))  # first one on ties
    total = np.eye(n)[lead]
    for task in range(n):
        if task != lead:
            a = np.eye(n)[task]
            _remove_conflict(a, products, lead)
            total = total + a
    return total


def combine(matrix: Tensor, tasks: list, method: str, rng: np.random.Generator) -> tuple[Tensor, SurgeryStats]:
    """The merged gradient of G's rows (`method`: "pcgrad" or "dominant") and the step's stats."""
    if matrix.dim() != 2 or matrix.shape[0] != len(tasks) or not tasks:
        raise ValueError(f"gradient surgery needs one row per task, got shape {tuple(matrix.shape)}")
    products = gram(matrix)
    stats = _stats(tasks, products)
    if method == "pcgrad":
        coefficients = pcgrad_coefficients(products, rng)
    elif method == "dominant":
        coefficients = dominant_coefficients(products)
    else:
        raise ValueError(f"unknown gradient surgery {method!r}")
    weights = torch.as_tensor(coefficients, dtype=torch.float64).to(matrix.device, non_blocking=True)
    return weights.to(matrix.dtype) @ matrix, stats


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

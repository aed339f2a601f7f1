"""Gradient-norm clipping as torch.nn.utils.clip_grad_norm_ does it, with a faster CPU path.

On CPU, torch computes each gradient's norm with `linalg_vector_norm`, which runs on one thread
(1.7 ms for MiniLM's 47 MB word-embedding gradient, with two threads as with one), and always
multiplies every gradient by the clamped coefficient, a read and a write of every gradient even
in the steps whose norm is already within bounds. Here the squared norms are BLAS dot products,
which use every thread, and the gradients are scaled only when the coefficient is below 1 (on
CPU the comparison costs no device synchronisation). Elsewhere, and for gradients that are not
dense float32 on CPU, torch's own function runs. tests/minbert/test_clip.py holds the two to each other.
"""
import math

import torch


def _cpu_fast_path(grads: list) -> bool:
    return bool(grads) and all(g.device.type == "cpu" and g.dtype == torch.float32
                               and g.layout == torch.strided and g.is_contiguous() for g in grads)


@torch.no_grad()
def clip_grad_norm_(parameters, max_norm: float) -> torch.Tensor:
    """Scale the gradients of `parameters` (a tensor or an iterable of them) so that their joint L2
    norm is at most `max_norm`; returns the norm before clipping, as torch's function does.

    The clipped gradients equal torch's to rounding (the coefficient is computed in double here).
    With a non-finite norm torch's function runs: it scales the gradients by 0 or nan, which the
    trainer reports as a failed step.
    """
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    parameters = [p for p in parameters if p.grad is not None]
    grads = [p.grad for p in parameters]
    if not _cpu_fast_path(grads):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    total = torch.stack([torch.dot(g.view(-1), g.view(-1)) for g in grads]).sum().sqrt()
    norm = total.item()
    if not math.isfinite(norm):
        # A nan or inf gradient, or squares beyond float32's range: torch's own treatment.
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    coefficient = max_norm / (norm + 1e-6)
    if coefficient < 1.0:
        torch._foreach_mul_(grads, coefficient)
    return total

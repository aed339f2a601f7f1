"""One optimizer step: each task's loss (with SMART's terms), the backward passes, gradient surgery's merge,
clipping, and what a non-finite loss or gradient does.

In fp16 the losses are scaled before each backward (`Run.scaler`, torch.amp.GradScaler) so that small
gradients do not flush to zero; the gradients are unscaled before clipping. A step whose scaled gradients
overflowed is skipped by the scaler, which lowers its scale: fp16's ordinary bookkeeping, counted in
`TrainState.scaler_skipped`, not a non-finite failure. In bf16 and fp32 the scaler is disabled and does nothing.
"""
from contextlib import nullcontext
from typing import Optional

import torch
from torch import nn

import minbert
from minbert import RunFailure

from ..distributed import World, all_reduce_mean_, local_batch_indices
from ..heads import MultitaskModel
from ..machine import autocast
from .smart import Smart
from .state import Run
from .surgery import assign_flat_grad, dominant, flatten_grads, pcgrad


class TaskLoss(nn.Module):
    """One task's loss on one batch, plus SMART's terms: the forward that DDP wraps.

    `weight` scales the batch's mean loss by the rank's share of the global batch
    (1 in a single process), and the logged values with it, so that their mean
    over ranks is the global batch's mean.
    """

    def __init__(self, model: MultitaskModel, specs: dict, smart: Optional[Smart], precision: str):
        super().__init__()
        self.model = model
        self.specs, self.smart, self.precision = specs, smart, precision

    def forward(self, task: str, batch: dict, weight: float = 1.0):
        labels = batch.pop("labels")
        device = labels.device
        with autocast(device, self.precision):
            outputs = self.model(task, batch)
            loss = self.specs[task].loss(outputs, labels)
            logs = {f"train/loss/{task}": loss.detach()}
            if self.smart is not None:
                for name, value in self.smart.regularisers(task, batch, outputs).items():
                    logs[f"smart/{name}/{task}"] = value.detach()
                    loss = loss + value
        if weight != 1.0:
            loss = loss * weight
            logs = {k: v * weight for k, v in logs.items()}
        return loss, logs


def train_step(run: Run, step: dict) -> Optional[dict]:
    """One optimizer step; returns the values to log, or None if the step was skipped (non-finite).

    Each task's batch runs forward and backward in turn (one graph in memory at a time). Under
    DDP, gradients are all-reduced once per step: the backward of the step's last task syncs,
    the others run under `no_sync` and accumulate. With gradient surgery every backward runs
    under `no_sync`, and each task's flattened encoder gradient is all-reduced (averaged over
    ranks) on its own before the projection, so PCGrad sees the global per-task gradients;
    the heads' gradients are all-reduced once at the end.
    """
    run.optimizer.zero_grad(set_to_none=True)
    surgery = run.config.surgery != "none"
    logs, task_grads = {}, {}
    for n, task in enumerate(step):
        task_logs = _task_backward(run, task, step[task], accumulate=surgery or n < len(step) - 1)
        bad = [v for v in task_logs.values() if not torch.isfinite(v)]
        if bad:
            return _nonfinite(run, f"loss ({bad[0].item()})", task)
        logs.update(task_logs)
        if surgery:
            task_grads[task] = all_reduce_mean_(flatten_grads(run.shared), run.inputs.world)
    if surgery:
        logs.update(_merge_task_gradients(run, task_grads))
    run.scaler.unscale_(run.optimizer)  # fp16: the true gradients, before clipping
    norm = minbert.clip_grad_norm_([p for p in run.model.parameters() if p.requires_grad], run.config.max_grad_norm)
    finite = bool(torch.isfinite(norm))
    if not finite and not run.scaler.is_enabled():  # a finite loss can still overflow in the backward pass
        return _nonfinite(run, f"gradient norm ({norm.item()})", ",".join(step))
    if finite:
        logs["train/grad_norm"] = norm
    else:  # fp16: the scaler skips this step and lowers its scale
        run.state.scaler_skipped += 1
    run.scaler.step(run.optimizer)
    if run.scaler.is_enabled():
        logs["train/loss_scale"] = run.scaler.get_scale()
    run.scaler.update()
    return {k: float(v) for k, v in logs.items()}


def _task_backward(run: Run, task: str, indices: list, accumulate: bool) -> dict:
    """One task's forward and backward on this rank's share of its batch; the values to log, averaged over ranks."""
    world = run.inputs.world
    local, weight = local_batch_indices(indices, world)
    batch = run.job.make_batch(run, task, local)
    with run.loss_fn.no_sync() if world.active and accumulate else nullcontext():
        loss, logs = run.loss_fn(task, batch, weight)
        if run.config.surgery != "none":
            for p in run.shared:
                p.grad = None
        run.scaler.scale(loss).backward()  # even of a non-finite loss: DDP's all-reduce, once begun, must complete
    return _mean_over_ranks(logs, world)  # so every rank sees the same non-finite loss


def _merge_task_gradients(run: Run, task_grads: dict) -> dict:
    """Gradient surgery: the per-task encoder gradients combined into one (PCGrad or dominant), the heads'
    averaged over ranks; returns the values to log."""
    world, logs = run.inputs.world, {}
    if world.active:
        in_shared = {id(p) for p in run.shared}
        heads = [p for p in run.model.parameters() if p.grad is not None and id(p) not in in_shared]
        assign_flat_grad(heads, all_reduce_mean_(flatten_grads(heads), world))
    combine = pcgrad if run.config.surgery == "pcgrad" else (lambda g, rng: dominant(g))
    if len(task_grads) > 1:
        merged, stats = combine(task_grads, run.surgery_rng)
        logs["surgery/conflicts"] = stats.conflicts
        for (a, b), cos in stats.cosines.items():
            logs[f"surgery/cos/{a}-{b}"] = cos
    else:
        merged = next(iter(task_grads.values()))
    assign_flat_grad(run.shared, merged)
    return logs


def _mean_over_ranks(logs: dict, world: World) -> dict:
    """The loss values of all ranks' shares, as the global batch's means (one all-reduce)."""
    if not world.active:
        return logs
    values = all_reduce_mean_(torch.stack([v.float() for v in logs.values()]), world)
    return dict(zip(logs, values))


def _nonfinite(run: Run, what: str, task: str) -> None:
    """With --skip-nonfinite the step is dropped (None); otherwise the run stops, before any checkpoint
    could store the damage."""
    if not run.config.skip_nonfinite:
        raise RunFailure(f"non-finite {what} at step {run.state.global_step + 1} on task {task}; the last good "
                         f"checkpoint is kept (use --skip-nonfinite to skip such batches)")
    run.optimizer.zero_grad(set_to_none=True)
    return None

"""One optimizer step: each task's loss (with SMART's terms), the backward passes, gradient surgery's merge,
clipping, and what a non-finite loss or gradient does.

In fp16 the losses are scaled before each backward (`Run.scaler`, torch.amp.GradScaler) so that small
gradients do not flush to zero; the gradients are unscaled before clipping. A step whose scaled gradients
overflowed is skipped by the scaler, which lowers its scale: fp16's ordinary bookkeeping, counted in
`TrainState.scaler_skipped` from the scaler's own finding, not a non-finite failure. In bf16 and fp32 the
scaler is disabled and does nothing.

The step leaves its logged values on the device; when the host reads them is reads.py's concern.
"""
from contextlib import nullcontext
from typing import Optional

import torch
from torch import nn

import minbert

from ..distributed import World, all_reduce_mean_, local_batch_indices
from ..heads import MultitaskModel
from ..machine import autocast
from .reads import decides_now, nonfinite_failure, nonfinite_problem, read_values
from .smart import Smart
from .state import Run
from .surgery import TaskGradients, assign_flat_grad, combine, flatten_grads


class TaskLoss(nn.Module):
    """One task's loss on one batch, plus SMART's terms: the forward that DDP wraps.

    `weight` scales the batch's mean loss by its share of the global batch (the rank's share under
    torchrun, the micro-batch's under --grad-accum; 1 otherwise), and the logged values with it, so that
    their sum over micro-batches and mean over ranks is the global batch's mean.
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
    """One optimizer step; returns the values to log (device scalars, or numbers where the host read them),
    or None if the step was skipped (non-finite, --skip-nonfinite). A step the fp16 scaler skipped has
    "train/scaler_skipped" set to 1.0; the caller advances the schedule only for an applied step.

    Each task's batch runs forward and backward in turn (one graph in memory at a time), in --grad-accum
    micro-batches. Under DDP, gradients are all-reduced once per step: the last backward of the step syncs,
    the others run under `no_sync` and accumulate. With gradient surgery every backward runs under
    `no_sync`, and the per-task encoder gradients (one matrix) are all-reduced before the projection, so
    PCGrad sees the global per-task gradients; the heads' gradients are all-reduced once at the end.
    """
    if run.graphs.graphed:  # a new iteration: the graphs' output buffers of the last step may be reused
        torch.compiler.cudagraph_mark_step_begin()
    run.optimizer.zero_grad(set_to_none=True)
    surgery = run.config.surgery != "none"
    logs = {}
    grads = TaskGradients(run.shared, list(step), run.inputs.device) if surgery else None
    ready = run.prefetched
    batches = ready[1] if ready is not None and ready[0] is step else step_batches(run, step)
    run.prefetched = None
    for n, task in enumerate(step):
        logs.update(_task_backward(run, task, batches[task], last=not surgery and n == len(step) - 1))
        if surgery:
            grads.store(task)
    if surgery:
        logs.update(_merge_task_gradients(run, grads))
    run.scaler.unscale_(run.optimizer)  # fp16: the true gradients, before clipping
    logs["train/grad_norm"] = minbert.clip_grad_norm_(
        [p for p in run.model.parameters() if p.requires_grad], run.config.max_grad_norm)
    skipped = _scaler_found_inf(run)
    if decides_now(run):
        logs, skipped = _decide(run, step, logs, skipped)
        if logs is None:
            return None
    else:  # a non-finite value stops the run at the next read (reads.py); this update is skipped on the device
        checked = torch.stack([v.float() for v in logs.values() if isinstance(v, torch.Tensor)])
        run.optimizer.found_inf = (~torch.isfinite(checked).all()).float()  # one stacked check
    try:
        run.scaler.step(run.optimizer)
    finally:
        run.optimizer.__dict__.pop("found_inf", None)
    run.scaler.update()
    if skipped:
        logs["train/scaler_skipped"] = 1.0
    return logs


def _scaler_found_inf(run: Run) -> Optional[torch.Tensor]:
    """The scaler's own finding, on the device, that this step's gradients overflowed (None if it is disabled)."""
    if not run.scaler.is_enabled():
        return None
    return sum(run.scaler._found_inf_per_device(run.optimizer).values())  # what scaler.step will skip on


def _decide(run: Run, step: dict, logs: dict, found_inf) -> tuple:
    """Read the step's values now (one host read): (the values, whether the scaler skips the step), or
    (None, False) for a non-finite step dropped under --skip-nonfinite; a non-finite step otherwise stops."""
    names = list(logs)
    values = read_values([logs[k] for k in names] + ([found_inf, run.scaler._scale] if found_inf is not None else []))
    read = dict(zip(names, values))
    skipped = found_inf is not None and values[len(names)] > 0
    if skipped:  # an overflow is the scaler's routine; its norm is not a failure
        del read["train/grad_norm"]
    problem = nonfinite_problem(read, step)
    if problem is not None:
        if not run.config.skip_nonfinite:
            raise nonfinite_failure(run.state.global_step + 1, problem)
        run.optimizer.zero_grad(set_to_none=True)
        if found_inf is not None:
            run.scaler.update()  # the scaler's step ends here too (the NaN has lowered its scale once)
        return None, False
    if found_inf is not None:
        read["train/loss_scale"] = values[-1]
    return read, skipped


def _task_backward(run: Run, task: str, batches: list, last: bool) -> dict:
    """One task's forward and backward on this rank's share of its batch, in --grad-accum micro-batches
    (`batches`: (loss weight, tensors) each); the values to log, summed over micro-batches and averaged over ranks."""
    world = run.inputs.world
    if run.config.surgery != "none":
        for p in run.shared:
            p.grad = None
    logs = {}
    for k, (share, batch) in enumerate(batches):
        with run.loss_fn.no_sync() if world.active and not (last and k == len(batches) - 1) else nullcontext():
            loss, part_logs = run.loss_fn(task, batch, share)
            if run.graphs.graphed:  # kept past the step (read every --log-every), out of the graph's reused buffers
                part_logs = {name: v.clone() for name, v in part_logs.items()}
            run.scaler.scale(loss).backward()  # even of a non-finite loss: DDP's all-reduce, once begun, must complete
        logs = part_logs if not logs else {name: logs[name] + v for name, v in part_logs.items()}
    return _mean_over_ranks(logs, world)  # so every rank sees the same non-finite loss


def step_batches(run: Run, step: dict) -> dict:
    """task -> [(loss weight, tensors on the device)], one per micro-batch of this rank's share of the step."""
    out = {}
    for task, indices in step.items():
        local, weight = local_batch_indices(indices, run.inputs.world)
        parts = micro_batches(local, run.config.grad_accum)
        out[task] = [(weight if len(parts) == 1 else weight * len(part) / len(local),
                      run.job.make_batch(run, task, part)) for part in parts]
    return out


def prefetch(run: Run, step: Optional[dict]) -> None:
    """On CUDA, build and start copying `step`'s batches while the GPU still works on the step before, whose
    kernels the host has only queued; elsewhere batches are built when their step runs."""
    run.prefetched = None
    if step is not None and run.inputs.device.type == "cuda":
        run.prefetched = (step, step_batches(run, step))


def micro_batches(indices: list, count: int) -> list:
    """`indices` cut into at most `count` consecutive parts of near-equal size (none empty)."""
    count = max(1, min(count, len(indices)))
    size, extra = divmod(len(indices), count)
    bounds = [k * size + min(k, extra) for k in range(count + 1)]
    return [indices[bounds[k]:bounds[k + 1]] for k in range(count)]


def _merge_task_gradients(run: Run, grads: TaskGradients) -> dict:
    """Gradient surgery: the per-task encoder gradients combined into one (PCGrad or dominant), the heads'
    averaged over ranks; returns the values to log."""
    world, logs = run.inputs.world, {}
    if world.active:
        in_shared = {id(p) for p in run.shared}
        heads = [p for p in run.model.parameters() if p.grad is not None and id(p) not in in_shared]
        assign_flat_grad(heads, all_reduce_mean_(flatten_grads(heads), world))
        all_reduce_mean_(grads.matrix, world)
    if len(grads.tasks) > 1:
        merged, stats = combine(grads.matrix, grads.tasks, run.config.surgery, run.surgery_rng)
        logs["surgery/conflicts"] = stats.conflicts
        for (a, b), cos in stats.cosines.items():
            logs[f"surgery/cos/{a}-{b}"] = cos
    else:
        merged = grads.matrix[0]
    assign_flat_grad(run.shared, merged)
    return logs


def _mean_over_ranks(logs: dict, world: World) -> dict:
    """The loss values of all ranks' shares, as the global batch's means (one all-reduce)."""
    if not world.active:
        return logs
    values = all_reduce_mean_(torch.stack([v.float() for v in logs.values()]), world)
    return dict(zip(logs, values))

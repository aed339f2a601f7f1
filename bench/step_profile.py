"""Where a trainer step's time goes, per step: the host's time, the device's busy time, kernel launches and
operators, from torch.profiler over the trainer's own steps. `bench.gpu`'s profile stage and
`python -m bench.profile --count-ops` use it.

- host_ms: the host's time to issue a step (`trainer_steps` returning, no synchronisation), without the
  profiler; wall_ms: the same steps ended by `torch.cuda.synchronize()`. On a CPU the two are the same work.
- device_busy_ms: the union of the device's kernel and copy intervals the profiler recorded (CUDA only).
- kernels: the device's kernels (and copies, sets) per step; launches: the host's kernel-launch calls
  (`cudaLaunchKernel` and kin) per step, graph_launches: `cudaGraphLaunch` calls (CUDA only).
- ops: aten operators per step, every one the profiler saw (nested ones included); leaf_ops: those that call
  no other aten operator; compute_ops: those that do work themselves, neither a view nor an allocation
  (`NO_KERNEL`) and calling no operator that is not one (`aten::addmm` calling only `aten::resolve_conj`
  counts, `aten::linear` calling `aten::addmm` does not): on a GPU each is about one kernel. Approximate: a
  few launch more than one, and a CPU's kernels (fused AdamW, autocast's cast lists) are not CUDA's.
"""
import time

LAUNCH_CALLS = ("LaunchKernel",)  # cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx
GRAPH_LAUNCH = "GraphLaunch"      # cudaGraphLaunch
# Operators that only make a view, allocate or return their input (a `to` that converts calls `_to_copy`): no kernel.
NO_KERNEL = frozenset(f"aten::{name}" for name in (
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "reshape", "t", "transpose", "permute", "expand",
    "select", "slice", "unsqueeze", "squeeze", "detach", "alias", "lift_fresh", "unbind", "split", "chunk",
    "narrow", "resolve_conj", "resolve_neg", "empty", "empty_like", "empty_strided", "new_empty",
    "new_empty_strided", "set_", "is_nonzero", "_has_compatible_shallow_copy_type", "split_with_sizes",
    "numpy_T", "view_as", "expand_as", "result_type", "size", "stride", "to", "detach_", "resize_"))


def trainer_steps(run, steps: list) -> None:
    """`steps` as the trainer's loop runs them (tasks/training/loop.py's run_epoch): a whole
    `tasks.training.train_step` each, the next step's batches built ahead (on CUDA, while the device works),
    then the schedule's step. Nothing is read back."""
    from tasks.training import train_step
    from tasks.training.step import prefetch
    run.model.train()
    for k, step in enumerate(steps):
        train_step(run, step)
        prefetch(run, steps[k + 1] if k + 1 < len(steps) else None)
        run.scheduler.step()


def busy_ms(intervals: list) -> float:
    """The length of the union of (start, end) intervals in microseconds, in milliseconds."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total / 1000


def count_events(events) -> dict:
    """Operators, device kernels, their busy time and the host's launch calls among the profiler's `events`."""
    from torch.autograd import DeviceType
    ops = [e for e in events if e.name.startswith("aten::")]
    leaves = [e for e in ops if not any(c.name.startswith("aten::") for c in e.cpu_children)]
    device = [e for e in events if e.device_type == DeviceType.CUDA]
    host = [e for e in events if e.device_type == DeviceType.CPU]
    working = [e for e in ops if e.name not in NO_KERNEL
               and all(c.name in NO_KERNEL for c in e.cpu_children if c.name.startswith("aten::"))]
    return {"ops": len(ops), "leaf_ops": len(leaves), "compute_ops": len(working),
            "kernels": len(device),
            "device_busy_ms": busy_ms([(e.time_range.start, e.time_range.end) for e in device]),
            "launches": sum(any(c in e.name for c in LAUNCH_CALLS) for e in host),
            "graph_launches": sum(GRAPH_LAUNCH in e.name for e in host)}


def profile_steps(torch, run, steps: list, warmup: list, timed: bool = True) -> dict:
    """Per-step figures (the module's docstring) over `steps`, after `warmup` steps run unprofiled; `timed`: the
    steps also run once unprofiled first, for host_ms and wall_ms (else the counts alone)."""
    from torch.profiler import ProfilerActivity, profile
    device = run.inputs.device
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    n = len(steps)
    out = {"steps": n, "examples_per_step": sum(len(ix) for step in steps for ix in step.values()) / n}
    trainer_steps(run, warmup)
    sync()
    if timed:
        start = time.perf_counter()
        trainer_steps(run, steps)
        issued = time.perf_counter()
        sync()
        out.update(host_ms=1000 * (issued - start) / n, wall_ms=1000 * (time.perf_counter() - start) / n)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        trainer_steps(run, steps)
        sync()
    counts = count_events(prof.events())
    out.update({k: counts[k] / n for k in ("ops", "leaf_ops", "compute_ops")})
    if cuda:
        out.update({k: counts[k] / n for k in ("kernels", "device_busy_ms", "launches", "graph_launches")})
    return out

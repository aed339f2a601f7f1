"""The trainer's own steps on this machine: where a step's time goes, and what a step launches.

    python -m bench trainer [--model embedded] [--precision auto|bf16|fp32] [--steps 12] [--top 25] [-- options]
    python -m bench trainer --count-ops [--models embedded,bert-base] [--implementations reference,fast]

Both modes run the steps of the run `train_multitask.py` builds (every option at its default unless given
after --) as its loop runs them. The default, profile: `--steps` whole optimizer steps of the epoch-0 plan
under torch.profiler, after `--warmup`: the top operators by self CPU time, the same time by kind, and the
wall time without the profiler. `--count-ops`: what a GPU would launch, counted on the CPU: the aten
operators of one step of each task (all, the leaves, and the compute ones, about one kernel each on a GPU)
per model, implementation and precision; the count depends on neither the weights nor the machine's speed.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import sys
import time
from collections import defaultdict

from bench.common import arguments, model_folder, parse, trainer_run, write_json
from tasks.machine import busy_time

# Operator name -> kind. The first pattern contained in the name decides; anything else is "other".
KINDS = (
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "mkldnn", "_mkl")),
    ("attention", ("scaled_dot_product", "flash_attention", "_softmax", "softmax")),
    ("optimizer", ("_fused_adamw", "_foreach", "adamw", "aten::_fused_adam", "lerp", "addcdiv", "addcmul")),
    ("dropout", ("random_", "bernoulli", "clamp_", "native_dropout")),
    ("dtype copies", ("aten::copy_", "aten::_to_copy", "aten::to")),
    ("gather/scatter", ("index_select", "index_copy", "index_add", "scatter", "gather", "embedding",
                        "nonzero", "cumsum", "masked")),
    ("norm/activation", ("layer_norm", "gelu", "tanh", "sigmoid", "norm")),
    ("fill/alloc", ("fill_", "zero_", "empty", "zeros", "ones", "full")),
    ("cat/split/views", ("aten::cat", "split", "unbind", "view", "reshape", "permute", "transpose",
                         "as_strided", "contiguous", "clone", "select", "slice", "expand", "stack")),
    ("element-wise", ("aten::add", "aten::mul", "aten::sub", "aten::div", "aten::sum", "aten::mean",
                      "aten::where", "aten::pow", "aten::sqrt", "aten::neg", "aten::exp")),
)
LAUNCH_CALLS = ("LaunchKernel",)  # cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx
GRAPH_LAUNCH = "GraphLaunch"      # cudaGraphLaunch
# Operators that only make a view, allocate or return their input (a `to` that converts calls `_to_copy`): no kernel.
NO_KERNEL = frozenset(f"aten::{name}" for name in (
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "reshape", "t", "transpose", "permute", "expand",
    "select", "slice", "unsqueeze", "squeeze", "detach", "alias", "lift_fresh", "unbind", "split", "chunk",
    "narrow", "resolve_conj", "resolve_neg", "empty", "empty_like", "empty_strided", "new_empty",
    "new_empty_strided", "set_", "is_nonzero", "_has_compatible_shallow_copy_type", "split_with_sizes",
    "numpy_T", "view_as", "expand_as", "result_type", "size", "stride", "to", "detach_", "resize_"))


def kind_of(name: str) -> str:
    return next((kind for kind, patterns in KINDS if any(p in name for p in patterns)), "other")


def parse_args(argv=None):
    p = arguments("trainer", __doc__, "model", "data-dir", "json", "train-options")
    p.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    profile = p.add_argument_group("profile (the default)")
    profile.add_argument("--steps", type=int, default=12, help="profiled optimizer steps")
    profile.add_argument("--warmup", type=int, default=4, help="untimed steps first")
    profile.add_argument("--top", type=int, default=25, help="operators listed")
    count = p.add_argument_group("--count-ops: operators per training step, no timing")
    count.add_argument("--count-ops", action="store_true", help="count the operators of a step")
    count.add_argument("--models", default="embedded,bert-base", help="comma-separated")
    count.add_argument("--implementations", default="reference,fast", help="comma-separated")
    count.add_argument("--precisions", default="fp32,bf16", help="comma-separated")
    args = parse(p, argv)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be positive, --warmup non-negative")
    return args


def trainer_steps(run, steps: list) -> float:
    """`steps` as the trainer's loop runs them (tasks/training/loop.py's run_epoch): a whole
    `tasks.training.train_step` each, the next step's batches built ahead (on CUDA, while the device works),
    then the schedule's step. Nothing is read back; the host's seconds to issue them."""
    from tasks.training import prefetch, train_step
    started = time.perf_counter()
    run.model.train()
    for k, step in enumerate(steps):
        train_step(run, step)
        prefetch(run, steps[k + 1] if k + 1 < len(steps) else None)
        run.scheduler.step()
    return time.perf_counter() - started


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
            "device_busy_ms": busy_time([(e.time_range.start, e.time_range.end) for e in device]) / 1000,
            "launches": sum(any(c in e.name for c in LAUNCH_CALLS) for e in host),
            "graph_launches": sum(GRAPH_LAUNCH in e.name for e in host)}


def profile_steps(run, steps: list) -> dict:
    """Per step of `steps` under torch.profiler, ended by a synchronize:

    - ops: aten operators, nested ones included; leaf_ops: those that call no other aten operator; compute_ops:
      those that do work themselves, neither a view nor an allocation (`NO_KERNEL`) and calling no operator that
      is not one: on a GPU each is about one kernel. Approximate: a few launch more than one, and a CPU's
      kernels (fused AdamW, autocast's cast lists) are not CUDA's.
    - CUDA only: kernels (and copies, sets) the device ran; device_busy_ms, the union of their intervals;
      launches, the host's kernel-launch calls; graph_launches, its `cudaGraphLaunch` calls.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile
    cuda = run.inputs.device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        trainer_steps(run, steps)
        if cuda:
            torch.cuda.synchronize(run.inputs.device)
    counts = count_events(prof.events())
    kept = ("ops", "leaf_ops", "compute_ops") + (("kernels", "device_busy_ms", "launches", "graph_launches")
                                                 if cuda else ())
    return {k: counts[k] / len(steps) for k in kept}


def profile_main(args) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tasks.machine import cpu_model
    _, inputs, run = trainer_run(["--model", model_folder(args.model), "--precision", args.precision,
                                  *args.train_options], args.data_dir)
    plan = run.sampler.plan(0)
    if args.warmup + args.steps > len(plan):
        sys.exit(f"bench: the epoch has only {len(plan)} steps")
    steps = plan[args.warmup:args.warmup + args.steps]
    trainer_steps(run, plan[:args.warmup])
    plain = trainer_steps(run, steps)  # without the profiler: its own overhead stays out of the wall time
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled = trainer_steps(run, steps)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    mix = defaultdict(int)
    for step in steps:
        for task in step:
            mix[task] += 1
    print(f"model {args.model}  precision {inputs.precision}  device {inputs.device}  CPU {cpu_model()}  "
          f"threads {torch.get_num_threads()}  torch {torch.__version__}")
    print(f"{args.steps} optimizer steps of the default plan (" + ", ".join(f"{t} {n}" for t, n in mix.items())
          + f"): {1000 * plain / args.steps:.0f} ms/step unprofiled, {1000 * profiled / args.steps:.0f} profiled")
    kinds = defaultdict(float)
    for e in events:
        kinds[kind_of(e.key)] += e.self_cpu_time_total
    print("\nself CPU time by kind")
    for kind, us in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:20s}{100 * us / total:6.1f}%  {us / 1000 / args.steps:8.1f} ms/step")
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.top]
    print(f"\ntop {args.top} operators by self CPU time\n  {'operator':44s}{'self %':>8s}{'ms/step':>9s}"
          f"{'calls/step':>12s}")
    for e in top:
        print(f"  {e.key[:44]:44s}{100 * e.self_cpu_time_total / total:8.1f}"
              f"{e.self_cpu_time_total / 1000 / args.steps:9.2f}{e.count / args.steps:12.1f}")
    return {"cpu": cpu_model(), "precision": inputs.precision, "ms_per_step": 1000 * plain / args.steps,
            "kinds": {k: v / total for k, v in kinds.items()},
            "top": [{"op": e.key, "share": e.self_cpu_time_total / total, "calls": e.count} for e in top]}


def count_ops(folder: str, implementation: str, precision: str, data_dir=None, batch_size: int = 32) -> dict:
    """Operators per step of the default run on `folder` on the CPU (`profile_steps`): the plan's first step of
    each task, after the plan's first step as a warm-up."""
    _, _, run = trainer_run(["--model", folder, "--implementation", implementation, "--precision", precision,
                             "--device", "cpu", "--batch-size", str(batch_size)], data_dir)
    plan = run.sampler.plan(0)
    firsts = {}
    for step in plan[1:]:
        firsts.setdefault(tuple(step), step)  # a step's tasks, e.g. ("sst",)
    trainer_steps(run, plan[:1])
    counted = profile_steps(run, list(firsts.values()))
    encoder = run.model.encoder.config
    return {**counted, "tasks": ["+".join(key) for key in firsts], "implementation": implementation,
            "precision": run.inputs.precision, "layers": encoder.num_hidden_layers, "hidden": encoder.hidden_size}


def count_main(args) -> dict:
    import torch

    from tasks.machine import cpu_model
    rows = []
    print(f"aten operators per training step of the default run (batch 32), CPU {cpu_model()}, torch "
          f"{torch.__version__}\n  {'model':12s}{'shape':>10s}  {'implementation':15s}{'precision':10s}"
          f"{'ops/step':>10s}{'leaf ops/step':>15s}{'compute ops/step':>18s}")
    for name in args.models.split(","):
        for implementation in args.implementations.split(","):
            for precision in args.precisions.split(","):
                row = {"model": name, **count_ops(model_folder(name), implementation, precision, args.data_dir)}
                rows.append(row)
                print(f"  {name:12s}{row['layers']:>4d} x {row['hidden']:<4d}  {implementation:15s}"
                      f"{row['precision']:10s}{row['ops']:10.0f}{row['leaf_ops']:15.0f}{row['compute_ops']:18.0f}",
                      flush=True)
    print(f"(the mean over one step of each task: {', '.join(rows[0]['tasks'])}; after one warm-up step)")
    return {"cpu": cpu_model(), "torch": torch.__version__, "rows": rows}


def main(argv=None) -> int:
    args = parse_args(argv)
    write_json(args.json, (count_main if args.count_ops else profile_main)(args))
    return 0


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.trainer")

"""Where a training step's time goes: torch.profiler over the real trainer's own steps.

    python -m bench.profile [--model minilm] [--precision auto|bf16|fp32] [--steps 12] [--top 25]
    python -m bench.profile --count-ops [--models embedded,bert-base] [--implementations reference,fast]

Builds the default `train_multitask.py` run (every option at its default unless given here),
takes the first steps of its epoch-0 plan (the proportional sampler's mix of SST, Quora and STS
batches, length-bucketed), runs `--warmup` of them untimed, then profiles `--steps` whole
optimizer steps (`tasks.training.train_step`: batch making, forward, backward, clipping, AdamW)
and the scheduler step. Prints the top operators by self CPU time, the same time grouped into
kinds (matmul, copies, dropout, optimizer, ...), and the steps' wall time without the profiler.

`--count-ops` counts instead of timing, on the CPU, what a GPU would launch: the aten operators of one
training step of the default run (`bench.step_profile`: all of them, the leaf ones that call no other, and
the ones that do work themselves, neither views nor allocations, about one kernel each on a GPU), per implementation
(the reference, which the trainer runs on CUDA, and the fast path) and precision (--precisions: fp32, and
bf16 autocast, whose casts are operators too), for the embedded model and bert-base's shape (12 x 768,
random weights, `bench.sizes`). The counted steps are the plan's first step of each task after one warm-up
step, the same steps for every model; the count does not depend on the weights, and a change to the step's
operators shows in it without a GPU.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import sys
import time
from collections import defaultdict

from bench.common import add_trainer_setting

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


def kind_of(name: str) -> str:
    for kind, patterns in KINDS:
        if any(p in name for p in patterns):
            return kind
    return "other"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    add_trainer_setting(p)
    count = p.add_argument_group("--count-ops: operators per training step, no timing")
    count.add_argument("--count-ops", action="store_true", help="count the operators of a step (see above)")
    count.add_argument("--models", default="embedded,bert-base",
                       help="embedded, bert-base (its shape, random weights) or folders (default: %(default)s)")
    count.add_argument("--implementations", default="reference,fast", help="(default: %(default)s)")
    count.add_argument("--precisions", default="fp32,bf16", help="(default: %(default)s)")
    p.add_argument("--steps", type=int, default=12, help="profiled optimizer steps (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=4, help="untimed steps first (default: %(default)s)")
    p.add_argument("--top", type=int, default=25, help="operators listed (default: %(default)s)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("train_options", nargs=argparse.REMAINDER,
                   help="after --: train_multitask.py options for the profiled run (e.g. -- --max-length 64)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be positive, --warmup non-negative")
    return args


def run_for(options: list, data_dir=None):
    """The run train_multitask.py would build with these options (and --data-dir), nothing written."""
    from tasks.inputs import prepare
    from tasks.training import build_run, parse_train_command
    config = parse_train_command(options + (["--data-dir", data_dir] if data_dir else [])).config
    return build_run(config, prepare(config, warn=lambda message: None))


def build_run(args):
    """The run of the profiled options."""
    extra = [a for a in args.train_options if a != "--"]
    return run_for(["--model", args.model, "--precision", args.precision, *extra], args.data_dir)


def count_ops(folder: str, implementation: str, precision: str, data_dir=None, batch_size: int = 32) -> dict:
    """Operators per step of the default run on `folder` on the CPU (bench.step_profile's ops and leaf_ops):
    the plan's first step of each task, after the plan's first step as a warm-up."""
    import torch

    from bench.step_profile import profile_steps
    run = run_for(["--model", folder, "--implementation", implementation, "--precision", precision, "--device", "cpu",
                   "--batch-size", str(batch_size)], data_dir)
    plan = run.sampler.plan(0)
    firsts = {}
    for step in plan[1:]:
        firsts.setdefault(tuple(step), step)  # a step's tasks, e.g. ("sst",)
    steps = list(firsts.values())
    counted = profile_steps(torch, run, steps, plan[:1], timed=False)
    return {**counted, "tasks": ["+".join(key) for key in firsts], "implementation": implementation,
            "precision": run.inputs.precision, "layers": run.model.encoder.config.num_hidden_layers,
            "hidden": run.model.encoder.config.hidden_size}


def count_main(args) -> int:
    import torch

    from bench import sizes
    from tasks.machine import cpu_model
    rows = []
    print(f"aten operators per training step of the default run (batch 32), CPU {cpu_model()}, torch "
          f"{torch.__version__}")
    print(f"  {'model':12s}{'shape':>10s}  {'implementation':15s}{'precision':10s}{'ops/step':>10s}"
          f"{'leaf ops/step':>15s}{'compute ops/step':>18s}")
    for name in args.models.split(","):
        folder = {"embedded": "minilm", "bert-base": None}.get(name, name)
        folder = folder or str(sizes.bert_base_shaped(sizes.default_cache()))
        for implementation in args.implementations.split(","):
            for precision in args.precisions.split(","):
                row = {"model": name, **count_ops(folder, implementation, precision, args.data_dir)}
                rows.append(row)
                print(f"  {name:12s}{row['layers']:>4d} x {row['hidden']:<4d}  {implementation:15s}"
                      f"{row['precision']:10s}{row['ops']:10.0f}{row['leaf_ops']:15.0f}{row['compute_ops']:18.0f}",
                      flush=True)
    print(f"(the mean over one step of each task: {', '.join(rows[0]['tasks'])}; after one warm-up step)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"cpu": cpu_model(), "torch": torch.__version__, "rows": rows}, f, indent=2)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.count_ops:
        return count_main(args)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tasks.machine import cpu_model
    from tasks.training import train_step

    run = build_run(args)
    plan = run.sampler.plan(0)
    if args.warmup + args.steps > len(plan):
        sys.exit(f"bench: the epoch has only {len(plan)} steps")
    steps = plan[args.warmup:args.warmup + args.steps]
    run.model.train()
    for step in plan[:args.warmup]:
        train_step(run, step)

    def timed(steps):
        start = time.perf_counter()
        for step in steps:
            train_step(run, step)
            run.scheduler.step()
        return time.perf_counter() - start

    # The same steps without the profiler: its own overhead stays out of the wall time.
    plain = timed(steps)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled = timed(steps)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    examples = sum(len(ix) for step in steps for ix in step.values())
    tasks = defaultdict(int)
    for step in steps:
        for task in step:
            tasks[task] += 1

    print(f"model {args.model}  precision {run.inputs.precision}  device {run.inputs.device}  "
          f"CPU {cpu_model()}  threads {torch.get_num_threads()}  torch {torch.__version__}")
    print(f"{args.steps} optimizer steps of the default plan (" + ", ".join(f"{t} {n}" for t, n in tasks.items())
          + f"; {examples} examples): {1000 * plain / args.steps:.0f} ms/step unprofiled, "
          f"{1000 * profiled / args.steps:.0f} ms/step profiled")
    kinds = defaultdict(float)
    for e in events:
        kinds[kind_of(e.key)] += e.self_cpu_time_total
    print("\nself CPU time by kind")
    for kind, us in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:20s}{100 * us / total:6.1f}%  {us / 1000 / args.steps:8.1f} ms/step")
    print(f"\ntop {args.top} operators by self CPU time")
    print(f"  {'operator':44s}{'self %':>8s}{'ms/step':>9s}{'calls/step':>12s}")
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.top]
    for e in top:
        print(f"  {e.key[:44]:44s}{100 * e.self_cpu_time_total / total:8.1f}"
              f"{e.self_cpu_time_total / 1000 / args.steps:9.2f}{e.count / args.steps:12.1f}")
    if args.json:
        figures = {"args": vars(args), "cpu": cpu_model(), "precision": run.inputs.precision,
                   "ms_per_step": 1000 * plain / args.steps, "kinds": {k: v / total for k, v in kinds.items()},
                   "top": [{"op": e.key, "share": e.self_cpu_time_total / total, "calls": e.count} for e in top]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

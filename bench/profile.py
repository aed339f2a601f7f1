"""Where a training step's time goes: torch.profiler over the real trainer's own steps.

    python -m bench.profile [--model minilm] [--precision auto|bf16|fp32] [--steps 12] [--top 25]

Builds the default `train_multitask.py` run (every option at its default unless given here),
takes the first steps of its epoch-0 plan (the proportional sampler's mix of SST, Quora and STS
batches, length-bucketed), runs `--warmup` of them untimed, then profiles `--steps` whole
optimizer steps (`tasks.training.train_step`: batch making, forward, backward, clipping, AdamW)
and the scheduler step. Prints the top operators by self CPU time, the same time grouped into
kinds (matmul, copies, dropout, optimizer, ...), and the steps' wall time without the profiler.
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


def build_run(args):
    """The run train_multitask.py would build with these options, nothing written."""
    from tasks.inputs import prepare
    from tasks.training import build_run, parse_train_command
    extra = [a for a in args.train_options if a != "--"]
    options = ["--model", args.model, "--precision", args.precision, *extra]
    if args.data_dir:
        options += ["--data-dir", args.data_dir]
    config = parse_train_command(options).config
    inputs = prepare(config, warn=lambda message: None)
    return build_run(config, inputs)


def main(argv=None):
    args = parse_args(argv)
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

"""minbert.AdamW (the from-scratch optimizer) against torch's fused AdamW, in the trainer's own steps.

    python -m bench.optimizer [--model minilm] [--precision auto|bf16|fp32] [--steps 10] [--rounds 3]

Builds the default `train_multitask.py` run twice, `--optimizer torch` and `--optimizer minbert`
(the same model, data and plan), and times, alternating the two within each round so that a
neighbour's load falls on both alike:

- the optimizer step alone: `optimizer.step()` over the same gradients, `--steps` times;
- whole optimizer steps (`tasks.training.train_step`: batches, forward, backward, clipping, AdamW)
  over the same `--steps` steps of epoch 0's plan.

Prints the median ms per step of each and the ratio minbert / torch measured in this one run.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import statistics
import sys
import time

from bench.common import add_trainer_setting

OPTIMIZERS = ("torch", "minbert")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.optimizer", description=__doc__.split("\n\n")[0])
    add_trainer_setting(p)
    p.add_argument("--steps", type=int, default=10, help="steps timed per round (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default: %(default)s)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        p.error("--steps and --rounds must be positive")
    return args


def build_runs(args) -> dict:
    """The run train_multitask.py would build, once per optimizer, nothing written."""
    from tasks.inputs import prepare
    from tasks.training import build_run, parse_train_command
    options = ["--model", args.model, "--precision", args.precision]
    if args.data_dir:
        options += ["--data-dir", args.data_dir]
    inputs = None
    runs = {}
    for name in OPTIMIZERS:
        config = parse_train_command(options + ["--optimizer", name]).config
        inputs = inputs or prepare(config, warn=lambda message: None)
        runs[name] = build_run(config, inputs)
    return runs


def main(argv=None):
    args = parse_args(argv)
    import torch

    from tasks.machine import cpu_model
    from tasks.training import train_step

    runs = build_runs(args)
    plan = runs["torch"].sampler.plan(0)
    if 1 + args.steps > len(plan):
        sys.exit(f"bench: the epoch has only {len(plan)} steps")
    for run in runs.values():
        run.model.train()
        train_step(run, plan[0])  # warm-up: the optimizer's state exists, every kernel has run once

    def optimizer_only(run) -> float:
        start = time.perf_counter()
        for _ in range(args.steps):
            run.optimizer.step()
        return (time.perf_counter() - start) / args.steps

    def whole_steps(run) -> float:
        start = time.perf_counter()
        for step in plan[1:1 + args.steps]:
            train_step(run, step)
        return (time.perf_counter() - start) / args.steps

    times = {(what, name): [] for what in ("optimizer", "train step") for name in OPTIMIZERS}
    for round_number in range(args.rounds):
        order = OPTIMIZERS if round_number % 2 == 0 else OPTIMIZERS[::-1]
        for name in order:
            times[("optimizer", name)].append(optimizer_only(runs[name]))
        for name in order:
            times[("train step", name)].append(whole_steps(runs[name]))

    run = runs["torch"]
    params = sum(p.numel() for p in run.model.parameters() if p.requires_grad)
    print(f"model {args.model} ({params / 1e6:.1f}M trainable)  precision {run.inputs.precision}  "
          f"CPU {cpu_model()}  threads {torch.get_num_threads()}  torch {torch.__version__}")
    print(f"{args.rounds} rounds of {args.steps} steps, the two optimizers alternating; median ms per step")
    for what in ("optimizer", "train step"):
        median = {name: 1000 * statistics.median(times[(what, name)]) for name in OPTIMIZERS}
        print(f"  {what:11s} torch fused AdamW {median['torch']:8.1f}   minbert.AdamW {median['minbert']:8.1f}   "
              f"ratio minbert/torch {median['minbert'] / median['torch']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

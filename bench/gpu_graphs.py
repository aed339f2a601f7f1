"""`bench gpu`'s graphs stage: the trainer's graphed step against its eager step and transformers', one process.

    python -m bench gpu-graphs --model PATH [--precision bf16] [--steps 24] [--shapes 4] [--rounds 4] [--dry-run]

Runs, from one checkpoint and one prepared data set (bench/common.py's trainer_run): the trainer's eager step
(`--cuda-graphs off`); its graphed step (`--cuda-graphs on`: each task's forward and backward compiled by
Inductor, mode reduce-overhead, batches padded to a few widths); the same graphed step compiled with
`backend="cudagraphs"` (CUDA graphs without Inductor: a cheaper compile); and the eager step with transformers'
BertModel as its encoder (bench/gpu_compare.py). The timed steps are the first --steps of the default plan whose
shapes (each task's batch size and padded width) are among its first --shapes: every variant runs them twice
before the clock starts (a compile, then a capture), so no compile or capture lands in the timed window.
Rounds alternate the variants (A B C D, D C B A, ...), each ended by a synchronize.

Per variant: ms per step, its warm-up seconds (the compile and capture, less two plain passes), and, under
torch.profiler over one round, CUDA graph launches and kernel launches per step, with Inductor's count of
skipped captures (`cudagraph_skips`): a graphed row with no graph launches, or any skip, did not run as graphs.
Then whether a default run repays the compile: the compile per shape times the shapes of a default run's first
epoch, against the milliseconds saved per step times its steps. `--dry-run` (the CPU): the graphed variants are
the eager step on the padded widths, labelled so. One RESULT line per variant as soon as measured.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import time

from bench.common import report_result, trainer_run
from bench.gpu_compare import compared_encoders, sync
from bench.gpu_report import Row
from bench.step_profile import count_events, trainer_steps


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench gpu-graphs", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint name or folder")
    p.add_argument("--precision", default="bf16", help="(default: %(default)s)")
    p.add_argument("--steps", type=int, default=24, help="timed steps per variant (default: %(default)s)")
    p.add_argument("--shapes", type=int, default=4, help="distinct step shapes timed (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=4, help="(default: %(default)s)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tf32", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="on the CPU: the graphed variants run eagerly")
    return p.parse_args(argv)


def step_shape(run, step: dict) -> tuple:
    """A step's shapes as a graphed run sees them: per task, the batch size and the padded width."""
    def width(task, indices):
        longest = max(run.train[task].lengths[i] for i in indices)
        return next((w for w in run.graphs.widths or () if w >= longest), longest)
    return tuple((task, len(ix), width(task, ix)) for task, ix in step.items())


def chosen_steps(run, count: int, shapes: int) -> tuple:
    """The first `count` steps of epoch 0's plan whose shapes are among its first `shapes`; and the distinct
    shapes and the steps of the whole epoch (what a default run compiles, and what it repays it over)."""
    plan = run.sampler.plan(0)
    keys = [step_shape(run, step) for step in plan]
    kept = list(dict.fromkeys(keys))[:shapes]
    steps = [step for step, key in zip(plan, keys) if key in kept][:count]
    return steps, len(set(keys)), len(plan)


def build_variants(config, inputs, dry_run: bool) -> dict:
    import torch

    from tasks.training import build_run
    graphed = dataclasses.replace(config, cuda_graphs="off" if dry_run else "on")
    runs = {"eager": build_run(config, inputs), "graphed": build_run(graphed, inputs),
            "cudagraphs": build_run(graphed, inputs),
            "transformers": build_run(config, inputs, encoder=compared_encoders(config, inputs.device)
                                      ["transformers"])}
    if dry_run:  # the graphed step's batches, not its kernels
        from tasks.training.graphs import StepGraphs, widths_up_to
        for name in ("graphed", "cudagraphs"):
            runs[name].graphs = StepGraphs(False, widths_up_to(inputs.tokenizer.max_length), "dry run: eager")
    else:
        runs["cudagraphs"].loss_fn = torch.compile(runs["cudagraphs"].loss_fn._orig_mod, backend="cudagraphs",
                                                   dynamic=False)
    return runs


def skips() -> int:
    from torch._dynamo.utils import counters
    return counters["inductor"]["cudagraph_skips"]


def launches(torch, run, steps: list) -> dict:
    from torch.profiler import ProfilerActivity, profile
    cuda = run.inputs.device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        trainer_steps(run, steps)
        sync(run.inputs.device)
    counts = count_events(prof.events())
    return {k: counts[k] / len(steps) for k in ("graph_launches", "launches")} if cuda else {}


def measure(args) -> list:
    import torch

    config, inputs, _ = trainer_run(["--model", args.model, "--device", args.device, "--precision", args.precision,
                                     "--seed", str(args.seed), *(["--no-tf32"] if args.no_tf32 else [])],
                                    args.data_dir, build=False)
    runs = build_variants(config, inputs, args.dry_run)
    steps, default_shapes, epoch_steps = chosen_steps(runs["graphed"], args.steps, args.shapes)
    per_round = max(1, len(steps) // args.rounds)
    rounds = [steps[r * per_round:(r + 1) * per_round] for r in range(min(args.rounds, len(steps)))]
    rows = {}
    for name, run in runs.items():
        before, started = skips(), time.perf_counter()
        trainer_steps(run, steps)
        trainer_steps(run, steps)  # the first pass compiles each shape, the second captures it
        sync(inputs.device)
        rows[name] = {"warm_s": time.perf_counter() - started, "skips": skips() - before,
                      "graphs": run.graphs.to_dict()}
    seconds = {name: 0.0 for name in runs}
    for r, part in enumerate(rounds):
        for name in (list(runs) if r % 2 == 0 else list(reversed(runs))):
            sync(inputs.device)
            started = time.perf_counter()
            trainer_steps(runs[name], part)
            sync(inputs.device)
            seconds[name] += time.perf_counter() - started
    timed = sum(len(part) for part in rounds)
    for name, run in runs.items():
        before = skips()
        rows[name].update(ms_per_step=1000 * seconds[name] / timed, timed_steps=timed,
                          shapes=len({step_shape(run, s) for s in steps}),
                          compile_s=max(0.0, rows[name]["warm_s"] - 2 * seconds[name] / timed * len(steps)),
                          **launches(torch, run, rounds[0]))
        rows[name]["skips"] += skips() - before
        if name in ("graphed", "cudagraphs"):
            rows[name].update(repaid(rows[name], rows["eager"]["ms_per_step"], default_shapes,
                                     epoch_steps * config.epochs))
        report_result({"rows": [Row.measured(args.model, name, args.precision, figures=rows[name]).to_json()]})
    return rows


def repaid(row: dict, eager_ms: float, shapes: int, steps: int) -> dict:
    """Whether a default run's compile (per shape, times its shapes) is repaid by the time saved over its steps."""
    cost = row["compile_s"] / max(row["shapes"], 1) * shapes
    saved = (eager_ms - row["ms_per_step"]) / 1000 * steps
    return {"default_run": {"shapes": shapes, "steps": steps, "compile_s": cost, "saved_s": saved,
                            "repays": saved > cost}}


def main(argv=None) -> int:
    measure(parse_args(argv))
    return 0

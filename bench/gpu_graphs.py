"""`bench gpu`'s graphs stage: the trainer's graphed step against its eager step and transformers', one process.

    python -m bench gpu-graphs [--steps 24] [--shapes 4] [--rounds 4] [--dry-run] -- TRAIN_OPTIONS

Four variants of the run `train_multitask.py TRAIN_OPTIONS` builds, on one prepared data set: the eager step,
the graphed step (`--cuda-graphs on`: Inductor, reduce-overhead), the same compiled with backend="cudagraphs"
(no Inductor: a cheaper compile), and the eager step on transformers' encoder. The timed steps are the default
plan's first --steps among its first --shapes shapes, each run twice by every variant before the clock starts
(a compile, then a capture); rounds alternate the variants (bench/paired.py). Per variant: ms per step, the
warm-up and compile seconds, per step under torch.profiler the operators and on CUDA the kernels, the device's
busy time, kernel and graph launches, Inductor's skipped captures; for a graphed variant, whether a default
run repays its compile. --dry-run (the CPU): the graphed variants are the eager step on the padded widths.
One RESULT line per variant as soon as measured.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import dataclasses
import time

from bench import paired
from bench.common import arguments, parse, report_result, trainer_run
from bench.gpu_compare import compared_encoders, step_worker, sync
from bench.gpu_report import GraphedStep
from bench.trainer import profile_steps, trainer_steps


def parse_args(argv=None):
    p = arguments("gpu-graphs", __doc__, "train-options")
    p.add_argument("--steps", type=int, default=24, help="timed steps per variant")
    p.add_argument("--shapes", type=int, default=4, help="distinct step shapes timed")
    p.add_argument("--rounds", type=int, default=4, help="rounds alternating the variants")
    p.add_argument("--dry-run", action="store_true", help="on the CPU: the graphed variants run eagerly")
    return parse(p, argv)


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
        from tasks.training import StepGraphs, widths_up_to
        for name in ("graphed", "cudagraphs"):
            runs[name].graphs = StepGraphs(False, widths_up_to(inputs.tokenizer.max_length), "dry run: eager")
    else:
        runs["cudagraphs"].loss_fn = torch.compile(runs["cudagraphs"].loss_fn._orig_mod, backend="cudagraphs",
                                                   dynamic=False)
    return runs


def skips() -> int:
    from torch._dynamo.utils import counters
    return counters["inductor"]["cudagraph_skips"]


def warmed(run, steps: list) -> dict:
    """Every shape of `steps` run twice (the first pass compiles each shape, the second captures it)."""
    before, started = skips(), time.perf_counter()
    trainer_steps(run, steps)
    trainer_steps(run, steps)
    sync(run.inputs.device)
    return {"warm_s": time.perf_counter() - started, "skips": skips() - before}


def repaid(compile_s: float, shapes: int, ms_per_step: float, eager_ms: float, default_shapes: int,
           default_steps: int) -> dict:
    """A default run's compile (per shape, times its shapes) and the time saved over its steps."""
    return {"default_shapes": default_shapes, "default_compile_s": compile_s / max(shapes, 1) * default_shapes,
            "default_saved_s": (eager_ms - ms_per_step) / 1000 * default_steps}


def main(argv=None) -> int:
    args = parse_args(argv)
    config, inputs, _ = trainer_run(args.train_options, build=False)
    runs = build_variants(config, inputs, args.dry_run)
    steps, default_shapes, epoch_steps = chosen_steps(runs["graphed"], args.steps, args.shapes)
    warm = {name: warmed(run, steps) for name, run in runs.items()}
    workers = {name: step_worker(run, steps) for name, run in runs.items()}
    timed = paired.alternate(workers, "train", len(steps), args.rounds)
    for name, run in runs.items():
        ms = 1000 * timed.total(name) / len(steps)
        before = skips()
        counted = profile_steps(run, steps[:timed.steps[0]])
        shapes = len({step_shape(run, s) for s in steps})
        compile_s = max(0.0, warm[name]["warm_s"] - 2 * ms / 1000 * len(steps))
        default = repaid(compile_s, shapes, ms, 1000 * timed.total("eager") / len(steps), default_shapes,
                         epoch_steps * config.epochs) if name in ("graphed", "cudagraphs") else {}
        row = GraphedStep(model=config.model, setting=name, precision=config.precision, ms_per_step=ms,
                          warm_s=warm[name]["warm_s"], compile_s=compile_s, shapes=shapes,
                          skips=warm[name]["skips"] + skips() - before, timed_steps=len(steps),
                          graphs=run.graphs.why, **counted, **default)
        report_result(row.to_json())
    return 0


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.gpu_graphs")

"""python -m bench NAME [options]: the project's benchmarks, one way in (`python -m bench NAME --help` for each)."""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import importlib
import sys

BENCHMARKS = {
    "throughput": ("bench.throughput", "a training step and evaluation, minBERT against transformers (CPU)"),
    "trainer": ("bench.trainer", "the trainer's own steps: where the time goes, operator counts"),
    "pretrain": ("bench.pretrain", "an MLM pretraining step, minBERT against transformers' BertForMaskedLM"),
    "gpu": ("bench.gpu", "on a CUDA GPU in one run: graphed step (profiled), gpu tests, trainer, transformers"),
    "gpu-kit": ("bench.gpu_kit", "build .gpu/, what a lent GPU machine lacks; there: bash .gpu/run.sh"),
    "part1": ("bench.part1", "the course's Part 1 (classifier.py) against its budgets"),
    "e2e": ("bench.e2e", "README command 1 in a fresh clone, timed in its parts"),
}
WORKERS = {  # started by the benchmarks above, each in its own process
    "gpu-graphs": ("bench.gpu_graphs", "bench gpu's graphs stage: graphed, eager and transformers' steps"),
    "gpu-trainer": ("bench.gpu_trainer", "bench gpu's trainer stage: one model's steps in a process"),
}


def usage() -> str:
    lines = [__doc__.strip(), "", "benchmarks:"]
    lines += [f"  {name:16s}{line}" for name, (_, line) in BENCHMARKS.items()]
    lines += ["", "workers (each benchmark starts its own; runnable alone):"]
    lines += [f"  {name:16s}{line}" for name, (_, line) in WORKERS.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    known = {**BENCHMARKS, **WORKERS}
    if name not in known:
        print(f"python -m bench: no benchmark {name!r}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    from tasks.cli import run_command  # a user's mistake (a missing file, a bad checkpoint): one line, exit 2
    return run_command(rest, lambda argv: argv, importlib.import_module(known[name][0]).main)


if __name__ == "__main__":
    sys.exit(main())

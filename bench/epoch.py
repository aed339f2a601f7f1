"""End to end: one default `train_multitask.py` epoch, with and without length bucketing, bf16 and fp32.

    python -m bench.epoch --data-dir ../shared/data/cs224n [--seeds 0,1] [--configs bucketed,plain,fp32,bf16]

Each configuration runs one full epoch of the real trainer (all defaults but the
one changed, `--epochs 1`) in its own process, once per seed, one after the
other. For each it prints the padding fraction of the epoch's batches (padded
token slots / all token slots, from the trainer's own plan), the training wall
time (the epoch without its evaluation), the evaluation time, peak RSS and the
dev metrics. The spread between seeds of one configuration is the seed noise
that the differences between configurations are compared with.

The default precision is `auto` (bf16 where the device computes it natively, else
fp32), so one of `fp32` and `bf16` repeats `bucketed` on any machine: that one is
not run again. 5-8 minutes per fp32 or native-bf16 run on a quiet 2-core CPU;
emulated bf16 (no AVX512-BF16 or AMX) takes 2-3 times as long.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench.common import report_result, run_worker

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {
    "bucketed": [],                                  # the default: --precision auto, length-bucketed batches
    "plain": ["--no-bucketing"],                     # --precision auto, plain shuffled batches
    "fp32": ["--precision", "fp32"],                 # fp32, length-bucketed batches
    "bf16": ["--precision", "bf16"],                 # bf16 autocast, length-bucketed batches
}
METRICS = ("sst", "quora", "sts", "overall")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.epoch", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR)")
    p.add_argument("--model", default=None, help="passed to train_multitask.py (default: its default)")
    p.add_argument("--seeds", default="0,1", help="comma-separated (default: %(default)s)")
    p.add_argument("--configs", default=",".join(CONFIGS), help="subset of %(default)s")
    p.add_argument("--max-steps", type=int, default=None, help="cut the epoch short (a smoke test)")
    p.add_argument("--out", default=None, help="keep the run folders here (default: a temporary folder)")
    p.add_argument("--worker", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(argv: list) -> None:
    """Run train_multitask.py's command (tasks.training.train_command) on argv with a callback that times the
    evaluations and reads the epoch's plan."""
    import resource

    from tasks.training import Callback, padding_fraction, train_command

    seen = {}

    class Probe(Callback):
        def on_plan(self, run, plan):
            if "padding" not in seen:  # the first epoch's
                seen["padding"] = padding_fraction(plan, {t: s.lengths for t, s in run.train.items()})

        def on_evaluate(self, run, metrics, seconds):
            seen["eval_s"] = seen.get("eval_s", 0.0) + seconds

    code = train_command(argv, callbacks=[Probe()])
    if code != 0:
        sys.exit(code)
    out = Path(argv[argv.index("--out") + 1])
    metrics = json.loads((out / "metrics.json").read_text())
    used = json.loads((out / "config.json").read_text())["precision"]["used"]
    seen.update(final=metrics["final"], steps=metrics["steps"], fit_s=metrics["history"][-1]["elapsed_s"],
                precision=used, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    report_result(seen)


def run_one(config: str, seed: int, folder: Path, args) -> dict:
    argv = ["--epochs", "1", "--seed", str(seed), "--out", str(folder / f"{config}-seed{seed}"), *CONFIGS[config]]
    if args.data_dir:
        argv += ["--data-dir", args.data_dir]
    if args.model:
        argv += ["--model", args.model]
    if args.max_steps:
        argv += ["--max-steps", str(args.max_steps)]
    result = run_worker([sys.executable, "-m", "bench.epoch", "--worker", *argv], f"{config} seed {seed}", cwd=REPO)
    result["train_s"] = result["fit_s"] - result["eval_s"]
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args.worker)
        return 0
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        print(f"error: unknown configuration {unknown[0]!r}; choose from {', '.join(CONFIGS)}", file=sys.stderr)
        return 2
    seeds = [int(s) for s in args.seeds.split(",")]
    configs = distinct(configs)
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-epoch-"))
    results = {}
    print(f"{'config':<9} {'seed':>4} {'prec':>5} {'steps':>5} {'padding':>8} {'train s':>8} {'eval s':>7} "
          f"{'RSS MB':>7}  "
          + " ".join(f"{m:>7}" for m in METRICS), flush=True)
    for config in configs:
        for seed in seeds:
            r = results[config, seed] = run_one(config, seed, folder, args)
            print(f"{config:<9} {seed:>4} {r['precision']:>5} {r['steps']:>5} {r['padding']:>8.3f} "
                  f"{r['train_s']:>8.1f} {r['eval_s']:>7.1f} {r['peak_rss_mb']:>7.0f}  "
                  + " ".join(f"{r['final'][m]:>7.4f}" for m in METRICS), flush=True)
    print("\nmeans over seeds (+- half the seed range):")
    for config in configs:
        rows = [results[config, s] for s in seeds]
        cells = []
        for m in METRICS:
            values = [r["final"][m] for r in rows]
            cells.append(f"{m} {statistics.mean(values):.4f}+-{(max(values) - min(values)) / 2:.4f}")
        print(f"  {config:<9} train {statistics.mean(r['train_s'] for r in rows):7.1f} s  "
              f"padding {statistics.mean(r['padding'] for r in rows):.3f}  " + "  ".join(cells))
    if "bucketed" in configs and "plain" in configs:
        b = statistics.mean(results["bucketed", s]["train_s"] for s in seeds)
        p = statistics.mean(results["plain", s]["train_s"] for s in seeds)
        print(f"bucketing: epoch training time x{p / b:.2f} faster than plain batches")
    by_precision = {results[c, seeds[0]]["precision"]: c for c in configs if c != "plain"}
    if {"bf16", "fp32"} <= set(by_precision):
        b = statistics.mean(results[by_precision["bf16"], s]["train_s"] for s in seeds)
        f = statistics.mean(results[by_precision["fp32"], s]["train_s"] for s in seeds)
        print(f"bf16: epoch training time x{f / b:.2f} the speed of fp32 (bucketed batches)")
    return 0


def distinct(configs: list) -> list:
    """Drop `fp32` or `bf16` where the default precision (auto) already is that one on this machine."""
    import minbert
    from tasks.machine import resolve_device
    auto = minbert.resolve_precision("auto", resolve_device("auto"))
    if "bucketed" in configs and auto in configs:
        print(f"note: --precision auto is {auto} on this machine: '{auto}' = 'bucketed', not run twice", flush=True)
        configs = [c for c in configs if c != auto]
    return configs


if __name__ == "__main__":
    sys.exit(main())

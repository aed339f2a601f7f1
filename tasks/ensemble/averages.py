"""What a weight average gains over the trained weights, over paired seeds:
`python -m tasks.ensemble.averages RUN [RUN ...] [--json FILE]`.

Each RUN is one seed of `train_multitask.py --average none,ema,swa` (any order, "none" among them): its
metrics.json records every copy's final dev figures, evaluated on one training trajectory, so a copy and the
trained weights share the seed's data order, initialisation and dropout. Per task and overall, each average's
final figure minus the trained weights' is taken seed by seed, and the interval is the paired t-interval over
the seeds (tasks.ablation.statistics): the seed is the unit that varies independently. The dev rows are the
same for every seed and copy, so the dev set's own sampling noise is not in the interval: it says whether the
average helps on these dev rows, across trainings.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from minbert import UserError

from ..ablation.statistics import paired_interval
from ..cli import run_command
from ..saved.run_record import read_run_record
from ..saved.run_result import RunResult
from .gain import show

REFERENCE = "none"


def final_figures(run: Path) -> tuple:
    """(seed, {copy: {figure: final dev value}}) of one run with averaged copies."""
    metrics_path, config_path = run / "metrics.json", run / "config.json"
    if not metrics_path.is_file() or not config_path.is_file():
        raise UserError(f"{run}: no metrics.json and config.json (not a finished run folder)")
    averages = RunResult.read(metrics_path).averages
    if averages is None:
        raise UserError(f"{metrics_path}: no averaged copies (train with --average none,ema,swa)")
    copies = {kind: copy["final"] for kind, copy in averages["copies"].items()}
    if REFERENCE not in copies or len(copies) < 2:
        raise UserError(f"{metrics_path}: copies {sorted(copies)}; it needs 'none' and an average beside it")
    return read_run_record(config_path).seed, copies


def gains(runs: list) -> dict:
    """{copy: {figure: paired interval over seeds of copy - none}} for every average the runs share."""
    by_seed = dict(final_figures(Path(run)) for run in runs)
    if len(by_seed) < len(runs):
        raise UserError("two runs share a seed: each seed once, so the seeds are independent units")
    kinds = set.intersection(*(set(copies) for copies in by_seed.values())) - {REFERENCE}
    first = next(iter(by_seed.values()))[REFERENCE]   # the run's own order: the tasks, then overall
    figures = [f for f in first if all(f in copies[REFERENCE] for copies in by_seed.values())]
    out = {}
    for kind in sorted(kinds):
        for figure in (f for f in figures if _numbers(by_seed, kind, f)):
            values = {seed: copies[kind][figure] for seed, copies in by_seed.items()}
            reference = {seed: copies[REFERENCE][figure] for seed, copies in by_seed.items()}
            out.setdefault(kind, {})[figure] = {**paired_interval(values, reference), "per_seed": {
                seed: values[seed] - reference[seed] for seed in sorted(values)}}
    return out


def _numbers(by_seed: dict, kind: str, figure: str) -> bool:
    return all(isinstance(c[k][figure], (int, float)) for c in by_seed.values() for k in (kind, REFERENCE))


def lines(report: dict) -> list:
    out = []
    for kind, figures in report.items():
        for figure, e in figures.items():
            seeds = ", ".join(f"{seed}: {d:+.4f}" for seed, d in e["per_seed"].items())
            span = "" if e["ci95_low"] is None else f" [{e['ci95_low']:+.4f}, {e['ci95_high']:+.4f}]"
            out.append(f"{kind} - {REFERENCE}, {figure}: {e['mean']:+.4f}{span} "
                       f"over {e['n']} seeds ({seeds})")
    return out


def parse(argv: Optional[list]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks.ensemble.averages",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="run folders trained with --average, one per seed")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the figures there")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    return show(gains(args.runs), lines, args.json)


def main(argv=None) -> int:
    return run_command(argv, parse, run)


if __name__ == "__main__":
    raise SystemExit(main())

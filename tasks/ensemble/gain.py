"""What an ensemble gains over its members on dev, with an interval:
`python -m tasks.ensemble.gain ENSEMBLE_DIR [--resamples N] [--seed S]`.

For each task and the course's overall score: the ensemble's dev figure minus its members' mean, and minus its
best member's (the member best on dev overall, chosen on the same dev rows, which flatters it), each with a 95%
percentile interval from resampling the dev rows: the same resampled rows for the ensemble and every member
(paired), each task's rows on their own. That interval carries the noise of the dev set's sample. It cannot
carry seed-to-seed noise: one ensemble is one draw of its members' seeds, so whether another three seeds would
gain as much is not in it (say so beside any figure).

The predictions are read from the dev prediction files of the ensemble and of each member, so a run older than
score files costs nothing here.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from minbert import UserError

from ..cli import run_command
from ..metrics import compute_metric, overall_score
from ..registry import get_task
from .members import read_member
from .scores import dev_labels

LEVEL = 0.95


def dev_values(path: Path) -> dict:
    """{id: value} of a course prediction file (`id \\t <Header>`, then `<id> , <value>` rows; a TSV for a
    declared task), the values as numbers."""
    if not path.is_file():
        raise UserError(f"{path}: no such prediction file")
    rows = path.read_text(encoding="utf-8").splitlines()[1:]
    separator = "\t" if path.suffix == ".tsv" else ","
    return {i.strip(): float(v) for i, v in (row.split(separator) for row in rows if row.strip())}


def dev_columns(ensemble_dir: Path, data_dir=None) -> dict:
    """task -> (gold, ensemble's predictions, [each member's predictions]), all in the ensemble's row order,
    read from the dev prediction files of the ensemble and of each member."""
    manifest = json.loads((ensemble_dir / "ensemble.json").read_text(encoding="utf-8"))
    members = [read_member(m["run"]) for m in manifest["members"]]
    labels = dev_labels(members[0], data_dir)
    columns = {}
    for task in manifest["tasks"]:
        name = get_task(task).prediction_file("dev", None)
        ensemble = dev_values(ensemble_dir / "predictions" / name)
        ids = list(ensemble)
        by_member = [[found[i] for i in ids] for found in (dev_values(m.path / "predictions" / name)
                                                           for m in members)]
        columns[task] = ([labels[task][i] for i in ids], [ensemble[i] for i in ids], by_member)
    return columns


def figures_on(columns: dict, picks: dict) -> tuple:
    """(the ensemble's figures, [each member's figures]) on the rows `picks` (task -> row indices)."""
    def metric(task, values):
        gold = [columns[task][0][k] for k in picks[task]]
        return compute_metric(get_task(task).metric, [values[k] for k in picks[task]], gold)
    ensemble = {task: metric(task, c[1]) for task, c in columns.items()}
    members = [{task: metric(task, c[2][m]) for task, c in columns.items()}
               for m in range(len(next(iter(columns.values()))[2]))]
    for figures in (ensemble, *members):
        figures["overall"] = overall_score(figures)
    return ensemble, members


def gains(ensemble: dict, members: list, best: int) -> dict:
    """{figure: (ensemble - members' mean, ensemble - the best member)}."""
    return {k: (ensemble[k] - float(np.mean([m[k] for m in members])), ensemble[k] - members[best][k])
            for k in ensemble}


def gain_report(columns: dict, resamples: int = 2000, seed: int = 0) -> dict:
    """Each figure's point gains over the members' mean and the best member, with their percentile intervals."""
    everything = {task: list(range(len(c[0]))) for task, c in columns.items()}
    ensemble, members = figures_on(columns, everything)
    best = max(range(len(members)), key=lambda m: members[m]["overall"])
    point = gains(ensemble, members, best)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        picks = {task: rng.integers(0, len(rows), len(rows)).tolist() for task, rows in everything.items()}
        draws.append(gains(*figures_on(columns, picks), best))
    tail = (1 - LEVEL) / 2 * 100
    report = {"ensemble": ensemble, "members": members, "best_member": best, "resamples": resamples, "seed": seed,
              "level": LEVEL, "unit": "dev rows, resampled per task, paired across ensemble and members"}
    for k in ensemble:
        for side, name in enumerate(("over_mean", "over_best")):
            low, high = np.percentile([d[k][side] for d in draws], [tail, 100 - tail])
            report.setdefault(name, {})[k] = {"gain": point[k][side], "low": float(low), "high": float(high)}
    return report


def lines(report: dict) -> list:
    out = [f"{len(report['members'])} members; best on dev overall: member {report['best_member']}; "
           f"{report['level']:.0%} intervals from {report['resamples']} resamples of {report['unit']}"]
    for k, e in report["ensemble"].items():
        mean, best = report["over_mean"][k], report["over_best"][k]
        out.append(f"{k}: ensemble {e:.4f}; over the members' mean {mean['gain']:+.4f} "
                   f"[{mean['low']:+.4f}, {mean['high']:+.4f}]; over the best member {best['gain']:+.4f} "
                   f"[{best['low']:+.4f}, {best['high']:+.4f}]")
    return out


def parse(argv: Optional[list]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks.ensemble.gain", description=__doc__.split("\n\n")[0])
    parser.add_argument("ensemble", help="an ensemble.py folder (its ensemble.json names the members)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the resampling's seed (default: %(default)s)")
    parser.add_argument("--data-dir", default=None, help="the dev files the runs read (default: as ensemble.py)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the figures there")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    folder = Path(args.ensemble)
    if not (folder / "ensemble.json").is_file():
        raise UserError(f"{folder}: no ensemble.json (not an ensemble.py folder)")
    if args.resamples < 100:
        raise UserError(f"--resamples {args.resamples}: at least 100 for a 95% interval")
    return show(gain_report(dev_columns(folder, args.data_dir), args.resamples, args.seed), lines, args.json)


def show(report: dict, lines_of, json_path: Optional[str]) -> int:
    """Print a report's lines and, with --json, write its figures; the command's exit status."""
    for line in lines_of(report):
        print(line)
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


def main(argv=None) -> int:
    return run_command(argv, parse, run)


if __name__ == "__main__":
    sys.exit(main())

"""Another model's own pilot: the per-seed sds its lines' power reads (power.py), measured on a short run of its
own before any declared run and written to RESULTS/pilot.json at its results folder's root, in the shape of the
embedded model's 2026-11-24 pilot (3 seeds, trials of at most 120 steps, the experiments whose findings declare a
pilot key):

    python reproduce.py --model M --only reinit-small,reinit-large,permute,freeze,transfer --seeds 3 \\
        --max-steps 120 --results runs/pilot-M --report runs/pilot-M/report.md
    python -m tasks.reproduction.pilot --pilot-results runs/pilot-M --results RESULTS

A key's sd (`power.PILOT_SD`'s keys) is the largest per-unit sd among the rows of the findings that declare that key
alone, so a line is called underpowered rather than flattered where rows sharing a key differ in spread; a key no
row measured is left out, and its lines get no power label. The report reads pilot.json's "sd"; it also keeps each
key's rows and the command. The pilot's raw trials are kept beside it in RESULTS/pilot-run/ (one level deeper than
a kept run, so no report reads them as one), their run.json files with each sitting's commit and machine.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

from minbert import UserError

from ..cli import run_command
from ..fileio import atomic_write_text
from . import experiments, judging, kept
from .findings import FINDINGS
from .follow_ups import FIRST
from .power import PILOT_FILE, PILOT_MODEL, PILOT_SD

RAW_DIR = "pilot-run"    # RESULTS/pilot-run/EXPERIMENT/RUN/: the pilot's own kept trials
PILOT_EXPERIMENTS = ("reinit-small", "reinit-large", "permute", "freeze", "transfer")


def measure(runs: dict, ctx) -> dict:
    """{key: [{finding, row, n, sd}]} from the pilot run's first-run verdicts: the rows with a per-unit sd of the
    findings that declare the key alone."""
    by_id = judging.verdicts(runs, ctx, None, None).get(FIRST, {})
    out = {}
    for key in PILOT_SD:
        rows = [{"finding": f.id, "row": r.label, "n": r.estimate["n"], "sd": r.estimate["std"]}
                for f in FINDINGS if tuple(f.pilot) == (key,) and f.id in by_id for r in by_id[f.id].rows
                if r.estimate and r.estimate.get("std") is not None and (r.estimate.get("n") or 0) >= 2]
        if rows:
            out[key] = rows
    return out


def pilot_record(runs: dict, recorded, pilot_root: Path, results: Path) -> dict:
    """pilot.json's content from the pilot run kept in `pilot_root` (`runs`; `recorded` one of its KeptRuns: its
    scale, tasks, depth and model), for the results folder `results`."""
    kept.check_one_setting(runs, recorded.scale, recorded.model, recorded.weights)
    ctx = experiments.Context(recorded.layers, experiments.SCALES[recorded.scale], recorded.tasks,
                              model=recorded.model)
    rows = measure(runs, ctx)
    if not rows:
        raise UserError(f"--pilot-results {pilot_root}: its runs measure no row of a finding with a pilot key "
                        f"(ran: {', '.join(sorted(runs[FIRST]))})")
    return {"sd": {key: max(r["sd"] for r in found_rows) for key, found_rows in rows.items()}, "rows": rows,
            "source": (f"the largest per-unit sd among each key's rows in the pilot run kept in {pilot_root} "
                       f"(python -m tasks.reproduction.pilot --pilot-results {pilot_root} --results {results})")}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_argument_group("where the pilot is and where it goes")
    where.add_argument("--pilot-results", required=True, type=Path,
                       help="the pilot run's --results folder (kept away from the report's)")
    where.add_argument("--results", required=True, type=Path,
                       help="the model's results folder: pilot.json and pilot-run/ go to its root")
    return p


def run(args) -> int:
    runs = kept.load(args.pilot_results)
    if FIRST not in runs:
        raise UserError(f"--pilot-results {args.pilot_results}: no kept run in it (run the pilot first: python "
                        f"reproduce.py --model M --only {','.join(PILOT_EXPERIMENTS)} --seeds 3 --max-steps 120 "
                        f"--results {args.pilot_results} --report {args.pilot_results}/report.md)")
    recorded = next(iter(runs[FIRST].values()))[0]
    if recorded.model == PILOT_MODEL:
        raise UserError(f"--pilot-results {args.pilot_results}: a pilot of {PILOT_MODEL}, whose pilot is "
                        f"power.PILOT_SD")
    kept.check_one_setting(kept.load(args.results), recorded.scale, recorded.model, recorded.weights)
    record = pilot_record(runs, recorded, args.pilot_results, args.results)
    shutil.rmtree(args.results / RAW_DIR, ignore_errors=True)   # the pilot's own trials, replacing an older pilot's
    for experiment in sorted({e for by_experiment in runs.values() for e in by_experiment}):
        shutil.copytree(args.pilot_results / experiment, args.results / RAW_DIR / experiment,
                        ignore=shutil.ignore_patterns(".lock"))
    path = args.results / PILOT_FILE
    atomic_write_text(path, json.dumps({**record, "raw": f"{RAW_DIR}/"}, indent=1, sort_keys=True) + "\n")
    print(f"pilot: {path}: " + ", ".join(f"{k} {v:.4g}" for k, v in record["sd"].items()))
    return 0


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


if __name__ == "__main__":
    sys.exit(main())

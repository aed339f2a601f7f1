"""Another model's own pilot: the per-seed sds its lines' power reads (power.py), measured on a short run of its
own before any declared run, in the shape of the embedded model's 2026-11-24 pilot (3 seeds, trials of at most
120 steps, the experiments whose findings declare a pilot key):

    python reproduce.py --model M --only reinit-small,reinit-large,permute,freeze,transfer --seeds 3 \\
        --max-steps 120 --results runs/pilot-M --report runs/pilot-M/report.md
    python -m tasks.reproduction.pilot --pilot-results runs/pilot-M --results RESULTS

A key's sd (`power.PILOT_SD`'s keys) is the largest per-unit sd among the rows of the findings that declare that key
alone, so a line is called underpowered rather than flattered where rows sharing a key differ in spread; a key no
row measured is left out, and its lines get no power label. RESULTS/pilot.json keeps the sds, each key's rows and
the command; the pilot's kept trials go beside it in RESULTS/pilot-run/ (one level deeper than a kept run, so no
report reads them as one).
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


def measure(runs: dict, run) -> dict:
    """{key: [{finding, row, n, sd}]} of the pilot's first run (`run` one of its KeptRuns)."""
    ctx = experiments.Context(run.layers, experiments.SCALES[run.scale], run.tasks, model=run.model)
    by_id = judging.verdicts(runs, ctx, None, None)[FIRST]
    rows = {key: [{"finding": f.id, "row": r.label, "n": r.estimate["n"], "sd": r.estimate["std"]}
                  for f in FINDINGS if tuple(f.pilot) == (key,) and f.id in by_id for r in by_id[f.id].rows
                  if r.estimate and r.estimate.get("std") is not None and (r.estimate.get("n") or 0) >= 2]
            for key in PILOT_SD}
    return {key: found for key, found in rows.items() if found}


def run(args) -> int:
    runs, where = kept.load(args.pilot_results), f"--pilot-results {args.pilot_results}"
    if FIRST not in runs:
        raise UserError(f"{where}: no kept run in it (run the pilot first: python -m tasks.reproduction.pilot --help)")
    recorded = next(iter(runs[FIRST].values()))[0]
    if recorded.model == PILOT_MODEL:
        raise UserError(f"{where}: a pilot of {PILOT_MODEL}, whose pilot is power.PILOT_SD")
    for folder in (runs, kept.load(args.results)):
        kept.check_one_setting(folder, recorded.scale, recorded.model, recorded.weights)
    rows = measure(runs, recorded)
    if not rows:
        raise UserError(f"{where}: its runs measure no row of a finding with a pilot key "
                        f"(ran: {', '.join(sorted(runs[FIRST]))})")
    record = {"sd": {key: max(r["sd"] for r in found) for key, found in rows.items()}, "rows": rows,
              "raw": f"{RAW_DIR}/",
              "source": (f"the largest per-unit sd among each key's rows in the pilot run kept in "
                         f"{args.pilot_results} (python -m tasks.reproduction.pilot {where} --results {args.results})")}
    shutil.rmtree(args.results / RAW_DIR, ignore_errors=True)   # the pilot's own trials, replacing an older pilot's
    for experiment in sorted({e for by_experiment in runs.values() for e in by_experiment}):
        shutil.copytree(args.pilot_results / experiment, args.results / RAW_DIR / experiment,
                        ignore=shutil.ignore_patterns(".lock"))
    path = args.results / PILOT_FILE
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"pilot: {path}: " + ", ".join(f"{k} {v:.4g}" for k, v in record["sd"].items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_argument_group("where the pilot is and where it goes")
    where.add_argument("--pilot-results", required=True, type=Path,
                       help="the pilot run's --results folder (kept away from the report's)")
    where.add_argument("--results", required=True, type=Path,
                       help="the model's results folder: pilot.json and pilot-run/ go to its root")
    return p


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


if __name__ == "__main__":
    sys.exit(main())

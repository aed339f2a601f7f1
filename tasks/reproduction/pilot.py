"""A second model's own pilot: the per-seed sds its lines' power reads (power.py), measured on a short run of its
own before any declared run and written to RESULTS/models/SLUG/pilot.json, in the shape of the first model's
2026-11-24 pilot (3 seeds, trials of at most 120 steps, the experiments whose findings declare a pilot key):

    python reproduce.py --model M --only reinit-small,reinit-large,permute,freeze,transfer --seeds 3 \\
        --max-steps 120 --results runs/pilot-M --report runs/pilot-M/report.md
    python -m tasks.reproduction.pilot --model M --pilot-results runs/pilot-M

A key's sd (`power.PILOT_SD`'s keys) is the largest per-unit sd among the rows of the findings that declare that key
alone, so a line is called underpowered rather than flattered where rows sharing a key differ in spread; a key no
row measured is left out, and its lines get no power label. The report reads pilot.json's "sd"; it also keeps each
key's rows and the command. The pilot's raw trials are kept beside it in RESULTS/models/SLUG/pilot-run/ (one level
deeper than a kept run, so no report reads them as one), their run.json files with each sitting's commit and machine.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

from minbert import UserError

from ..cli import run_command
from ..fileio import atomic_write_text
from . import experiments, judging, kept, models
from .findings import FINDINGS
from .follow_ups import FIRST
from .power import PILOT_SD

RESULTS = Path("docs/reproduction/results")
DEFAULT_FIRST = "minilm"
RAW_DIR = "pilot-run"    # RESULTS/models/SLUG/pilot-run/EXPERIMENT/RUN/: the pilot's own kept trials
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


def pilot_record(model: str, found: models.Model, pilot_root: Path) -> dict:
    """pilot.json's content for `model` from its pilot run, kept under `pilot_root` as `found` (models.for_run)."""
    folder = found.results(pilot_root)
    runs = kept.load(folder)
    if FIRST not in runs:
        raise UserError(f"--pilot-results {pilot_root}: no kept run of {model} in {folder} (run the pilot first: "
                        f"python reproduce.py --model {model} --only {','.join(PILOT_EXPERIMENTS)} --seeds 3 "
                        f"--max-steps 120 --results {pilot_root} --report {pilot_root}/report.md)")
    recorded = next(iter(runs[FIRST].values()))[0]   # the pilot's scale, tasks and depth, as its runs record them
    kept.check_one_setting(runs, recorded.scale, recorded.model, found.identity)
    ctx = experiments.Context(recorded.layers, experiments.SCALES[recorded.scale], recorded.tasks,
                              heads=models.config_of(model)["num_attention_heads"], model=model)
    rows = measure(runs, ctx)
    if not rows:
        raise UserError(f"--pilot-results {pilot_root}: its runs measure no row of a finding with a pilot key "
                        f"(ran: {', '.join(sorted(runs[FIRST]))})")
    return {"sd": {key: max(r["sd"] for r in found_rows) for key, found_rows in rows.items()}, "rows": rows,
            "source": (f"the largest per-unit sd among each key's rows in the pilot run kept in {folder} "
                       f"(python -m tasks.reproduction.pilot --model {model} --pilot-results {pilot_root})")}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the model the pilot ran (as reproduce.py's --model)")
    p.add_argument("--pilot-results", required=True, type=Path,
                   help="the pilot run's --results folder (kept away from the report's)")
    p.add_argument("--results", type=Path, default=RESULTS,
                   help=f"the report's results folder; pilot.json goes to RESULTS/models/SLUG/ (default: {RESULTS})")
    return p


def run(args) -> int:
    target = models.for_run(args.model, args.results, DEFAULT_FIRST)
    if target.first:
        raise UserError(f"--model {args.model}: the first model of {args.results}; its pilot is power.PILOT_SD")
    found = models.for_run(args.model, args.pilot_results, DEFAULT_FIRST)
    record = pilot_record(args.model, found, args.pilot_results)
    folder = target.results(args.results)
    shutil.rmtree(folder / RAW_DIR, ignore_errors=True)   # the pilot's own trials, replacing an older pilot's
    shutil.copytree(found.results(args.pilot_results), folder / RAW_DIR, ignore=shutil.ignore_patterns(".lock"))
    path = folder / models.PILOT_FILE
    atomic_write_text(path, json.dumps({**record, "raw": f"{RAW_DIR}/"}, indent=1, sort_keys=True) + "\n")
    print(f"pilot: {path}: " + ", ".join(f"{k} {v:.4g}" for k, v in record["sd"].items()))
    return 0


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


if __name__ == "__main__":
    sys.exit(main())

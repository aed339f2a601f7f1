"""The seconds a step the reproduction's cost planner multiplies by (tasks/reproduction/plan.py's SECONDS_PER_STEP).

For every kept run whose trials all record when they finished and how long they took: the run's span, from its
first trial's start to its last trial's end, over its trials' fine-tuning steps (both stages of a transfer trial;
probes train none), so a trial's fixed costs and the workers or shards that ran at once are in it; then the median
over the runs, per kind of device the trials trained on. Reads the trials' own records (SWEEP.jsonl), nothing else.

    python tools/seconds_per_step.py docs/reproduction/results
"""
import argparse
import statistics
import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minbert import UserError  # noqa: E402
from tasks.ablation.summary import Trial  # noqa: E402
from tasks.cli import run_command  # noqa: E402
from tasks.fileio import read_jsonl  # noqa: E402
from tasks.reproduction.kept import device_kind  # noqa: E402


def run_rate(records: list):
    """(kind of device, steps, span in seconds) of one run's trials; None where a trial lacks its times."""
    if not records or any("finished_at" not in r or "wall_time_s" not in r for r in records):
        return None
    ends = [datetime.strptime(r["finished_at"], "%Y-%m-%dT%H:%M:%SZ") for r in records]
    starts = [end - timedelta(seconds=r["wall_time_s"]) for end, r in zip(ends, records)]
    steps = sum(Trial.of(r).total_steps or 0 for r in records)
    kinds = {device_kind(r) or "?" for r in records}
    return (kinds.pop(), steps, (max(ends) - min(starts)).total_seconds()) if steps and len(kinds) == 1 else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_argument_group("what to read")
    where.add_argument("results", type=Path, help="a results folder: its EXPERIMENT/RUN/*.jsonl")
    return parser


def run(args) -> int:
    folders = sorted({p.parent for p in Path(args.results).glob("*/*/*.jsonl")})
    if not folders:
        raise UserError(f"{args.results}: no kept runs (EXPERIMENT/RUN/SWEEP.jsonl)")
    rates = {}
    for folder in folders:
        records = [r for p in sorted(folder.glob("*.jsonl")) for r in read_jsonl(p)]
        found = run_rate(records)
        if found:
            kind, steps, span = found
            rates.setdefault(kind, []).append(span / steps)
            print(f"{kind:5} {folder.parent.name + '/' + folder.name:42} {len(records):4} trials {steps:6} steps "
                  f"{span / 60:6.1f} min  {span / steps:.3f} s/step")
    for kind, values in sorted(rates.items()):
        print(f"{kind}: median {statistics.median(values):.3f} s/step over {len(values)} runs")
    return 0


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


if __name__ == "__main__":
    sys.exit(main())

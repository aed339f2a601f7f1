"""Convert kept runs' run.json files to the current schema (tasks/reproduction/kept.py's KeptRun), once.

Schema 1 (no "schema" field) kept every sitting's CPU, threads, workers, shard, device, weights and when its trials
trained. Schema 2 keeps per run the one kind of device its trials trained on (read from the trials' own records)
and the weights they started from (the sittings', or a second model's identity), and per sitting only when, from
which commit, on which machine, how long and how many trials it added; sittings that added no trial are dropped.
Schema 3 drops schema 2's `model_identity` (a second model's slug, path and hashes, from when a second model's runs
were kept inside the first's folder): a results folder keeps one model, named by `model` and its `weights`.
Schema 4 names the model by what it is, never by the path it was loaded from (`kept.upgrade`, which reading a
schema-3 record applies by itself): `model` a short name, and the model's pretrain.py `recipe`, `masked_accuracy`
and `heads` where recorded (an upgraded record leaves them unrecorded).

    python tools/convert_kept_runs.py docs/reproduction/results
"""
import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minbert import UserError  # noqa: E402
from tasks.cli import run_command  # noqa: E402
from tasks.fileio import read_jsonl  # noqa: E402
from tasks.reproduction import kept  # noqa: E402
from tasks.reproduction.kept import SCHEMA, KeptRun, Sitting, device_kind, write_run  # noqa: E402


def converted(path: Path, data: dict, records: list) -> KeptRun:
    """The schema-1 record `data` of the run whose trials are `records`, as a KeptRun."""
    kinds = {device_kind(r) for r in records} - {""}
    identity = data.get("model_identity")
    weights = {s["weights"] for s in data["sittings"] if s.get("weights")}
    weights |= {identity["weights_sha256"][:12]} if identity else set()
    if len(kinds) > 1 or len(weights) > 1:
        raise UserError(f"{path}: its trials trained on {sorted(kinds)} from weights {sorted(weights)}: a run keeps "
                        f"one of each; split it by hand")
    sittings = [Sitting(s["date"], s["commit"], s["cpu"] + (f" with {s['device']}" if s.get("device", "cpu") != "cpu"
                                                            else ""), s["wall_time_s"], s["trials_added"])
                for s in data["sittings"] if s["trials_added"]]
    fields = {k: data[k] for k in ("experiment", "run", "protocol", "scale", "model", "tasks", "seeds", "layers",
                                   "sweeps")}
    return KeptRun(**fields, device=kinds.pop() if kinds else "", weights=weights.pop() if weights else "",
                   sittings=sittings)


def upgraded(path: Path, data: dict) -> KeptRun:
    """The schema-2 record `data` as a KeptRun: its fields less `model_identity`, whose weights it records."""
    identity = data.pop("model_identity")
    if identity and data["weights"] != identity["weights_sha256"][:12]:
        raise UserError(f"{path}: its weights {data['weights']!r} are not its model_identity's; convert it by hand")
    data.pop("schema")
    return KeptRun(**{**data, "sittings": [Sitting(**s) for s in data["sittings"]]})


def convert(root: Path) -> int:
    """Convert every run.json of schema 1, 2 or 3 under `root` in place; the number converted."""
    done = 0
    for path in sorted(Path(root).glob("**/run.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") == SCHEMA:
            continue
        if data.get("schema", 1) not in (1, 2, 3):
            raise UserError(f"{path}: schema {data['schema']}, which this script does not know")
        if data.get("schema") == 3:
            write_run(path, kept.read_run(path))
            done += 1
            continue
        records = [r for p in sorted(path.parent.glob("*.jsonl")) for r in read_jsonl(p)]
        try:
            run = upgraded(path, data) if "schema" in data else converted(path, data, records)
            write_run(path, dataclasses.replace(run, model=kept.name_from_path(run.model)))
        except (KeyError, TypeError) as e:
            raise UserError(f"{path}: not a kept run of schema {data.get('schema', 1)} ({e})") from None
        done += 1
    return done


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_argument_group("what to convert")
    where.add_argument("results", type=Path, help="a results folder: every run.json below it is converted")
    return parser


def run(args) -> int:
    if not args.results.is_dir():
        raise UserError(f"{args.results}: no such folder")
    print(f"convert_kept_runs: {convert(args.results)} run.json files converted to schema {SCHEMA}")
    return 0


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


if __name__ == "__main__":
    sys.exit(main())

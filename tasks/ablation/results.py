"""A sweep's results files: one results line (line.py's `TrialLine`) per finished or failed trial, appended as
each ends.

results.jsonl, or results.shard-I-of-N.jsonl for a shard; every such file in the folder counts as done
and is merged for the summary, whatever shard count it was run with. A sweep resumed under --precision auto
trains in the precision its finished trials used (`keep_the_sweeps_precision`).
"""
import json
import re
from pathlib import Path
from typing import Optional

import minbert

from ..fileio import atomic_write_text
from .line import read_lines

RESULTS = "results.jsonl"
SHARD_RESULTS = re.compile(r"results\.shard-\d+-of-\d+\.jsonl")


def results_name(shard) -> str:
    return RESULTS if shard is None else f"results.shard-{shard[0]}-of-{shard[1]}.jsonl"


def results_files(folder: Path) -> list:
    """results.jsonl and every shard's file, whatever shard count they were run with."""
    return sorted(p for p in folder.glob("results*.jsonl") if p.name == RESULTS or SHARD_RESULTS.fullmatch(p.name))


def load_results(path: Path) -> list:
    """The trials recorded in this process's own results file; a torn last line (a killed write) is dropped from
    the file too."""
    records = read_lines(path)
    if path.exists():
        data = path.read_bytes()
        lines = [line for line in data.split(b"\n") if line.strip()]
        if data and (not data.endswith(b"\n") or len(lines) != len(records)):
            atomic_write_text(path, "".join(json.dumps(r.to_json(), allow_nan=False) + "\n" for r in records))
    return records


def merged_results(folder: Path, own: Optional[Path] = None) -> list:
    """Every record of every results file in the folder. Only `own` is repaired: the other files are other
    shards', possibly being appended to right now, and rewriting one could drop the line being appended."""
    return [r for path in results_files(folder) for r in (load_results(path) if path == own else read_lines(path))]


def keep_the_sweeps_precision(sweep, records: list, beside: frozenset = frozenset()) -> None:
    """Under --precision auto (each machine's fast one, and so the fingerprint's), a sweep resumed on a
    machine whose fast precision is another trains in the one its finished trials used (`records`), or the
    one its experiment's other sweeps used (`beside`, the reproduction's): its arms, paired by seed, never
    differ by bf16's rounding against fp32's. fp16 off a CUDA GPU cannot be kept (nor, says kept.refuse, can
    a run mix devices)."""
    used = ({r.precision for r in records} | beside) - {""}
    here = sweep.inputs.precision
    if sweep.config.training.precision != "auto" or len(used) != 1 or used == {here}:
        return
    (had,) = used
    if had == "fp16" and sweep.inputs.device.type != "cuda":
        return
    native = "" if minbert.native(had, sweep.inputs.device) else f"; {had} is emulated here, 2-3x slower"
    which = "the experiment's other trials"
    if records:
        which = f"the {len(records)} finished trials in {sweep.out}"
    print(f"note: {which} trained in {had}: --precision auto keeps {had} for the rest (this machine's own "
          f"would be {here}{native})", flush=True)
    sweep.inputs.precision = had

"""An ensemble's folder, from finished runs: every check first, then the files.

    DIR/predictions/*.csv            the course's dev and test files (its writers: tasks/course/formats.py)
    DIR/predictions/scores/*.json    the averaged scores (tasks/saved/score_file.py)
    DIR/predictions/sources.json     each file's provenance, the ensemble's (prepare_submit.py --predictions-dir DIR)
    DIR/metrics.json                 each member's and the ensemble's dev figures, per task and overall
    DIR/ensemble.json                the manifest: the members (path, config.json's sha256, seed, model, status)

A member the course would not accept (a smoke or partial run, the embedded fallback model, ...) is averaged
with a warning, as such a run is trained; prepare_submit.py refuses the ensemble as it refuses the run. A
complete ensemble copies its files into the course-level folder as a complete run does.
"""
from __future__ import annotations

import datetime
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from minbert import UserError

from ..course.formats import write_predictions
from ..course.provenance import ENSEMBLE_MANIFEST, run_provenance
from ..course.submission import publish_predictions, record_sources
from ..fileio import atomic_write_json
from .members import check_members, read_member
from .scores import average, decide, dev_figures, dev_labels, mean_figures, member_scores

SCHEMA = 1
PREDICTIONS = "predictions"


@dataclass(frozen=True)
class Ensembled:
    """What `build_ensemble` made: its folder, the dev figures and the lines it has to say."""
    folder: Path
    figures: dict        # the ensemble's dev figures
    members: dict        # run path -> its dev figures
    lines: list          # what to print: computed scores, where the files are, publication


def build_ensemble(runs, out, data_dir=None, device: Optional[torch.device] = None,
                   course_dir: Optional[str] = None, publish_always: bool = False, command=None) -> Ensembled:
    """Average the finished runs `runs` into the folder `out`; refuse (UserError, nothing written) runs that
    cannot be averaged, and an `out` that holds anything but this same ensemble. `course_dir`: the course-level
    folder its files are copied to (as a run's); `publish_always`: even an incomplete ensemble's."""
    device = device or torch.device("cpu")
    command = list(sys.argv if command is None else command)
    members = [read_member(run) for run in runs]
    check_members(members)
    out = Path(out)
    check_out(out, members)
    for member in members:
        for _, text in member.problems:
            print(f"warning: member {member.path}: {text}; prepare_submit.py refuses this ensemble as it "
                  f"refuses such a run", file=sys.stderr)
    scores, lines = [], []
    for member in members:
        found, computed = member_scores(member, device, data_dir)
        scores.append(found)
        if computed:
            lines.append(f"{member.path}: no score files (a run older than them): computed from its weights")
    labels = dev_labels(members[0], data_dir)
    averaged = {key: average([found[key] for found in scores]) for key in scores[0]}
    figures = {str(m.path): dev_figures(found, labels) for m, found in zip(members, scores)}
    ensemble = dev_figures(averaged, labels)
    write_folder(out, members, averaged, figures, ensemble, command)
    lines.append("dev " + " ".join(f"{k}={v:.4f}" for k, v in ensemble.items() if v is not None)
                 + f" (members' mean overall {mean_figures(list(figures.values()))['overall']:.4f})")
    lines.append(f"ensemble of {len(members)} runs in {out}; predictions in {out / PREDICTIONS}")
    if course_dir:
        files = sorted((out / PREDICTIONS).glob("*.csv"))
        lines += publish_predictions({str(out): files}, course_dir, command, publish_always)
    return Ensembled(out, ensemble, figures, lines)


def check_out(out: Path, members: list) -> None:
    """`out` is new, empty, or this same ensemble (the same members, by path and config.json's sha256), which
    is written again; anything else would be lost, and is refused."""
    if out.is_file():
        raise UserError(f"--out {out}: a file, not a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if (out / "config.json").exists():
        raise UserError(f"--out {out}: holds a run; choose another folder")
    try:
        kept = json.loads((out / ENSEMBLE_MANIFEST).read_text(encoding="utf-8"))["members"]
        same = [(m["run"], m["config_sha256"]) for m in kept] == [(str(m.path), m.config_sha256) for m in members]
    except (OSError, ValueError, KeyError, TypeError):
        same = False
    if not same:
        raise UserError(f"--out {out}: already holds files other than this ensemble's; choose another folder")


def write_folder(out: Path, members: list, averaged: dict, figures: dict, ensemble: dict, command: list) -> None:
    """The prediction and score files, metrics.json, the manifest, and last the files' provenance."""
    predictions = out / PREDICTIONS
    for (task, split), found in averaged.items():
        write_predictions(predictions, task, split, found.ids, decide(found))
        found.write(predictions)
    best = max(figures, key=lambda run: figures[run]["overall"])
    atomic_write_json(out / "metrics.json", {
        "schema": SCHEMA, "ensemble": ensemble, "members": figures,
        "members_mean": mean_figures(list(figures.values())), "best_member": best,
        "rule": "the mean of the members' class probabilities, P(1) or scores; then the most probable class, "
                "P(1) > 0.5, or the mean score"})
    atomic_write_json(out / ENSEMBLE_MANIFEST, {
        "schema": SCHEMA, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command, "tasks": list(members[0].tasks),
        "members": [{**m.describe(), "provenance": m.provenance} for m in members]})
    files = sorted(p for p in predictions.iterdir() if p.is_file() and p.suffix in (".csv", ".tsv"))
    record_sources(predictions, files, run_provenance(out), command)


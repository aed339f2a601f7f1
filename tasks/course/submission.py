"""The course-level `predictions/` folder and the submission zip, as the course's `prepare_submit.py` makes it.

Every run writes its own `RUN_DIR/predictions/`. A successful `classifier.py`
or `train_multitask.py` run then copies its files into one course-level folder
(`predictions/` by default) and records, in that folder's `sources.json`, which
run each file came from and when. The zip takes every top-level `.py` file,
the packages the code imports (`minbert/`, `tasks/`: the course's grader must
be able to read the code) and every prediction file, named as the course's
`zz.write(file, os.path.join(".", file))` names them, plus a manifest listing
the runs behind the predictions, so files of different runs are never mixed
without saying so.
"""
from __future__ import annotations

import datetime
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Iterable, Optional

from minbert.errors import UserError
from minbert.loading import sha256_of
from tasks.fileio import atomic_write_bytes, atomic_write_json, atomic_write_text
from tasks.registry import CLASSIFIER_TASKS, MULTITASK_TASKS, get_task

PREDICTIONS_DIR_ENV = "MINBERT_PREDICTIONS_DIR"
SUBMISSION_ZIP = "cs224n_default_final_project_submission.zip"
SOURCES = "sources.json"          # provenance of the course-level folder's files; not zipped as such
MANIFEST = "submission_manifest.json"
PART1_MODES = {"pretrain": "last-linear-layer", "finetune": "full-model"}  # the course's two spellings
_PACKAGES = ("minbert", "tasks")


def course_predictions_dir(value: Optional[str] = None) -> str:
    """The course-level folder: `value` if given ('' = none), else $MINBERT_PREDICTIONS_DIR, else predictions/."""
    if value is not None:
        return value
    return os.environ.get(PREDICTIONS_DIR_ENV) or "predictions"


def _load_sources(folder: Path) -> dict:
    try:
        return json.loads((folder / SOURCES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def publish_predictions(files: Iterable[Path], folder: str | os.PathLike, run_dir: str | os.PathLike,
                        command: list) -> list:
    """Copy a finished run's prediction files into the course-level folder, recording their origin."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sources = _load_sources(folder)
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    copied = []
    for path in sorted(Path(p) for p in files):
        target = atomic_write_text(folder / path.name, path.read_text(encoding="utf-8"))
        sources[path.name] = {"run": str(Path(run_dir).resolve()), "date": when, "command": list(command),
                              "sha256": sha256_of(target)}
        copied.append(target)
    atomic_write_json(folder / SOURCES, sources)
    return copied


def expected_files() -> dict:
    """Group name -> the course's prediction files of that group (14 in all)."""
    groups = {}
    for mode in PART1_MODES:
        groups[f"Part 1 {mode}"] = [get_task(t).prediction_file(s, mode) for t in CLASSIFIER_TASKS
                                    for s in ("dev", "test")]
    groups["Part 2"] = [get_task(t).prediction_file(s) for t in MULTITASK_TASKS for s in ("dev", "test")]
    return groups


def _present(name: str, names: set) -> Optional[str]:
    """The file standing for an expected Part-1 name: itself or its newer-spelling twin."""
    if name in names:
        return name
    for old, new in PART1_MODES.items():
        if name.startswith(old + "-") and new + name[len(old):] in names:
            return new + name[len(old):]
    return None


def _code_files(code_root: Path) -> list:
    """Top-level *.py and every *.py of the packages, as paths relative to the code root."""
    files = sorted(p.name for p in code_root.glob("*.py") if p.is_file())
    for package in _PACKAGES:
        for path in sorted((code_root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files.append(path.relative_to(code_root).as_posix())
    return files


def check_predictions(folder: Path) -> tuple:
    """(manifest dict, lines to print): what is there, from which runs, what is missing."""
    names = {p.name for p in folder.iterdir() if p.is_file() and p.name != SOURCES} if folder.is_dir() else set()
    sources = _load_sources(folder)
    lines, groups, missing = [], {}, []
    for group, expected in expected_files().items():
        found = [f for f in (_present(n, names) for n in expected) if f]
        missing += [n for n in expected if not _present(n, names)]
        runs = sorted({sources[f]["run"] for f in found if f in sources})
        groups[group] = {"files": found, "runs": runs}
        if len(runs) > 1:
            lines.append(f"warning: {group} predictions come from {len(runs)} different runs: " +
                         "; ".join(f"{r} ({', '.join(f for f in found if sources.get(f, {}).get('run') == r)})"
                                   for r in runs))
    files = {}
    for name in sorted(names):
        record = sources.get(name)
        if record is None or record.get("sha256") != sha256_of(folder / name):
            lines.append(f"warning: predictions/{name} was not written by a run of this project or changed "
                         f"since: its origin is unknown")
            record = {"run": None, "date": None}
        files[name] = {"run": record["run"], "date": record["date"]}
    if missing:
        lines.append(f"missing {len(missing)} of {sum(len(v) for v in expected_files().values())} expected "
                     f"prediction files: {', '.join(missing)}")
    runs = {}
    for name, record in files.items():
        if record["run"]:
            runs.setdefault(record["run"], {"date": record["date"], "files": []})["files"].append(name)
    manifest = {"created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "runs": runs, "files": files, "groups": groups, "missing": missing}
    return manifest, lines


def make_submission(zip_path: str | os.PathLike, code_root: str | os.PathLike,
                    predictions_dir: str | os.PathLike) -> tuple:
    """Write the course's submission zip; returns (path, entry names, lines to print).

    Entries are stored uncompressed under the names the course's script gives
    them: `os.path.join(".", file)`, which zipfile normalises to `file`.
    """
    code_root, predictions_dir = Path(code_root), Path(predictions_dir)
    if not code_root.is_dir():
        raise UserError(f"code folder {code_root} does not exist")
    predictions = sorted(p for p in predictions_dir.iterdir() if p.is_file() and p.name != SOURCES) \
        if predictions_dir.is_dir() else []
    if not predictions:
        raise UserError(f"no prediction files in {predictions_dir}: run classifier.py and train_multitask.py "
                        f"first (they copy their predictions there)")
    manifest, lines = check_predictions(predictions_dir)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in _code_files(code_root):
            archive.write(code_root / name, os.path.join(".", name))
        for path in predictions:
            archive.write(path, os.path.join(".", "predictions", path.name))
        archive.writestr(MANIFEST, json.dumps(manifest, indent=2) + "\n")
        names = archive.namelist()
    return atomic_write_bytes(zip_path, buffer.getvalue()), names, lines

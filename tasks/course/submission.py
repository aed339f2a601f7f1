"""The course-level `predictions/` folder and the submission zip, as the course's `prepare_submit.py` makes it.

Every run writes its own `RUN_DIR/predictions/`. A complete `classifier.py`
or `train_multitask.py` run (no --max-steps, all the data) then copies its
files into one course-level folder (`predictions/` by default) and records, in
that folder's `sources.json`, each file's provenance (tasks/course/provenance.py);
a smoke or partial run does so only into a folder the user names. A file that a
publication replaces moves to `replaced/<date-time>/` with its record. The zip
takes every top-level `.py` file, the packages the code imports (`minbert/`,
`tasks/`: the course's grader must be able to read the code) and every
prediction file, named as the course's `zz.write(file, os.path.join(".", file))`
names them, plus a manifest of each file's run, model, steps and dev score. It
refuses files the course would not accept unless told to take them (`allow`).
"""
from __future__ import annotations

import datetime
import io
import json
import os
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Optional

from minbert.errors import UserError
from minbert.loading import sha256_of
from tasks.course.provenance import (
    ENSEMBLE_MANIFEST,
    Provenance,
    incomplete_reason,
    lineage_text,
    run_problems,
    run_provenance,
)
from tasks.fileio import atomic_write_bytes, atomic_write_json
from tasks.registry import CLASSIFIER_TASKS, MULTITASK_TASKS, get_task

PREDICTIONS_DIR_ENV = "MINBERT_PREDICTIONS_DIR"
SUBMISSION_ZIP = "cs224n_default_final_project_submission.zip"
SOURCES = "sources.json"          # provenance of the course-level folder's files; not zipped as such
MANIFEST = "submission_manifest.json"
REPLACED = "replaced"            # files a later run replaced, under replaced/<date-time>/
PART1_MODES = {"pretrain": "last-linear-layer", "finetune": "full-model"}  # the course's two spellings
_PACKAGES = ("minbert", "tasks")


def course_predictions_dir(value: Optional[str] = None) -> str:
    """The course-level folder: `value` if given ('' = none), else $MINBERT_PREDICTIONS_DIR, else predictions/."""
    if value is not None:
        return value
    return os.environ.get(PREDICTIONS_DIR_ENV) or "predictions"


SOURCES_SCHEMA = 1  # each entry of a sources.json says it; entries written before it do not
_SOURCE_KEYS = ("command", "published", "sha256", "schema")  # an entry's own keys; the rest is its provenance


@dataclass(frozen=True)
class Source:
    """A prediction file's entry in its folder's sources.json: the provenance of the run that wrote it
    (tasks/course/provenance.py, which `run_problems` judges), the command, when, and the bytes' sha256."""
    provenance: dict
    command: tuple
    published: str
    sha256: str

    @property
    def run(self) -> Optional[str]:
        return self.provenance["run"]

    @classmethod
    def from_json(cls, entry: dict) -> "Source":
        if "schema" not in entry:
            entry = upgrade_0(entry)
        if entry["schema"] != SOURCES_SCHEMA:
            raise ValueError(f"schema {entry['schema']!r}; this version reads {SOURCES_SCHEMA}")
        provenance = {key: value for key, value in entry.items() if key not in _SOURCE_KEYS}
        return cls(provenance, tuple(entry["command"]), entry["published"], entry["sha256"])

    def to_json(self) -> dict:
        return {**self.provenance, "command": list(self.command), "published": self.published,
                "sha256": self.sha256, "schema": SOURCES_SCHEMA}


def upgrade_0(entry: dict) -> dict:
    """An entry written before sources.json said its schema, as schema 1. The oldest (before provenance was
    recorded, 2026-11-25) hold only "run", "date" (when it was published), "command" and "sha256": their run's
    provenance comes from the run's folder while it is still there. Later ones hold schema 1's keys."""
    if "model" not in entry and entry["run"] and Path(entry["run"], "config.json").exists():
        entry = {**run_provenance(entry["run"]), **entry}
    if "published" not in entry:
        entry = {**entry, "published": entry["date"]}
    return {**entry, "schema": SOURCES_SCHEMA}


def _load_sources(folder: Path) -> dict:
    """`folder`'s sources.json: file name -> its Source (None for a file archived without one); {} when there
    is none or it is not JSON. An entry that is not a Source is one line naming the file and the entry."""
    try:
        entries = json.loads((folder / SOURCES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {name: None if entry is None else _read_source(folder / SOURCES, name, entry)
            for name, entry in entries.items()}


def _read_source(path: Path, name: str, entry) -> Source:
    try:
        return Source.from_json(entry)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UserError(f"{path}: the entry of {name!r} is not a prediction file's record ({error!r}); "
                        f"remove it, and that file counts as of unknown origin") from None


def _write_sources(folder: Path, sources: dict) -> None:
    atomic_write_json(folder / SOURCES, {name: None if source is None else source.to_json()
                                         for name, source in sources.items()})


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def publish_predictions(runs: dict, folder: str | os.PathLike, command: list, always: bool = False) -> list:
    """Copy runs' prediction files into the course-level folder with their provenance; returns lines to print.

    `runs`: run folder -> its prediction files. Only complete runs publish unless `always` (the user named
    the folder): a smoke or partial run never replaces what a real run put there. A file replaced by
    different bytes is moved to `replaced/<date-time>/` with its provenance: nothing trained for is lost.
    """
    folder = Path(folder)
    records = {run: run_provenance(run) for run in runs}
    if not always:
        reasons = [f"{Path(run).name}: {reason}" for run, record in records.items()
                   if (reason := incomplete_reason(record))]
        if reasons:
            return [f"did not publish to {folder}/ ({'; '.join(reasons)}); to publish anyway, add "
                    f"--predictions-dir {folder} (prepare_submit.py still refuses such files)"]
    placed = [(Path(path), folder / Path(path).name, records[run]) for run, files in runs.items() for path in files]
    count, lines = _place(placed, command)
    return [f"copied {count} prediction files to {folder}/ (prepare_submit.py zips them)"] + lines


def write_outputs(run_dir: str | os.PathLike, predictions: Path, outputs, command: list) -> list:
    """Copy a run's prediction files where the course's --*_out flags say, each named file to its path, with
    their provenance in a sources.json beside them (whatever the run was: prepare_submit.py judges it)."""
    if not outputs:
        return []
    record = run_provenance(run_dir)
    missing = [(name, target) for name, target in outputs if not (Path(predictions) / name).is_file()]
    present = [(name, target) for name, target in outputs if (name, target) not in missing]
    lines = [f"not written: {target} (this run wrote no {name}: the task was not trained or has no test file)"
             for name, target in missing]
    if not present:
        return lines
    count, replaced = _place([(Path(predictions) / name, Path(target), record) for name, target in present], command)
    return [f"wrote {count} prediction files where --*_out said: " + ", ".join(str(t) for _, t in present)] + \
        lines + replaced


def record_sources(folder: Path, files: list, record: dict, command: list) -> None:
    """Record, in `folder`'s sources.json, that the run of `record` wrote `files` there (an ensemble's own
    folder, which prepare_submit.py then takes as it is)."""
    when, sources = _now(), _load_sources(folder)
    for path in files:
        sources[Path(path).name] = _source(record, command, when, Path(path))
    _write_sources(Path(folder), sources)


def _source(record: dict, command: list, when: datetime.datetime, path: Path) -> Source:
    """A file's entry in sources.json: its run's provenance, the command, when, and the bytes' sha256."""
    return Source(record, tuple(command), when.isoformat(timespec="seconds"), sha256_of(path))


def _place(placed: list, command: list) -> tuple:
    """Copy (source, target, provenance) triples, recording each in its folder's sources.json and moving a
    file it replaces into that folder's replaced/<date-time>/. Returns (count, lines naming what was replaced)."""
    when, replaced = _now(), {}
    for folder in sorted({target.parent for _, target, _ in placed}):
        folder.mkdir(parents=True, exist_ok=True)
        sources = _load_sources(folder)
        archive = folder / REPLACED / when.strftime("%Y%m%d-%H%M%S")
        for source, target, record in sorted((t for t in placed if t[1].parent == folder), key=lambda t: t[1]):
            data = source.read_bytes()
            if target.is_file() and target.read_bytes() != data:
                old = sources.get(target.name)
                kept = _archive(target, archive, old)
                replaced.setdefault((None if old is None else old.run, kept), []).append(target.name)
            atomic_write_bytes(target, data)
            sources[target.name] = _source(record, command, when, target)
        _write_sources(folder, sources)
    lines = [f"replaced {len(names)} files of {'run ' + run if run else 'unknown origin'} ({', '.join(names)}): "
             f"kept in {archive}/" for (run, archive), names in replaced.items()]
    return len(placed), lines


def _archive(path: Path, archive: Path, source: Optional[Source]) -> Path:
    """Move a replaced prediction file into `archive` (or `archive`-2, ... if it holds that name: two runs
    within a second), with its provenance in that folder's sources.json; returns the folder."""
    stamp, number = archive, 1
    while (archive / path.name).exists():
        number += 1
        archive = stamp.with_name(f"{stamp.name}-{number}")
    archive.mkdir(parents=True, exist_ok=True)
    os.replace(path, archive / path.name)
    sources = _load_sources(archive)
    sources[path.name] = source
    _write_sources(archive, sources)
    return archive


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


def _spellings(names) -> set:
    """Which spellings the Part-1 files among `names` use: '2023' (pretrain/finetune), '2024'."""
    found = set()
    for name in names:
        for old, new in PART1_MODES.items():
            found |= {"2023"} if name.startswith(old + "-") else {"2024"} if name.startswith(new + "-") else set()
    return found


def _file_record(folder: Path, name: str, sources: dict) -> Optional[Source]:
    """The record of predictions/`name`, or None when no run of this project wrote these bytes."""
    source = sources.get(name)
    return source if source is not None and source.sha256 == sha256_of(folder / name) else None


class SubmissionRefused(UserError):
    """Prediction files the course would not accept; one line per problem, the table of what was found."""

    def __init__(self, lines: list, table: list):
        super().__init__("\n".join(lines))
        self.lines, self.table = lines, table


def check_predictions(folder: Path, allow: Iterable[str] = ()) -> tuple:
    """(manifest dict, table lines, warning lines, refusal lines): what is there, from which runs, what is missing,
    and what the course would not accept (less the kinds in `allow`)."""
    allow = set(allow)
    names = {p.name for p in folder.iterdir() if p.is_file() and p.name != SOURCES} if folder.is_dir() else set()
    sources = _load_sources(folder)
    files = {name: _file_record(folder, name, sources) for name in sorted(names)}
    groups, missing, warnings = _groups(names, files)
    manifest_files, table, refusals = _judge(files, _problems(names, files), allow)
    if missing:
        expected = sum(len(v) for v in expected_files().values())
        warnings.append(f"missing {len(missing)} of {expected} expected prediction files: "
                        f"{', '.join(missing)}")
    manifest = {"created": _now().isoformat(timespec="seconds"), "allowed": sorted(allow),
                "files": manifest_files, "groups": groups, "missing": missing}
    return manifest, table, warnings, refusals


# What the manifest keeps of each file's provenance, in this order.
_MANIFEST_KEYS = ("run", "model", "model_lineage", "model_sha256", "steps", "max_steps", "data_fraction",
                  "dev", "date")


def _judge(files: dict, problems: dict, allow: set) -> tuple:
    """({file: its manifest entry}, the table's lines, a refusal line per problem of a kind not in
    `allow`)."""
    manifest_files, refusals = {}, []
    table = [_TABLE.format("file", "run", "model", "steps", "dev", "finished", "status")]
    for name, source in files.items():
        # Every key, None where the run's provenance has none (a file of unknown origin has no provenance).
        provenance = asdict(Provenance() if source is None else Provenance.from_json(source.provenance))
        kept = {key: provenance[key] for key in _MANIFEST_KEYS}
        kinds = [kind for kind, _ in problems[name]]
        refused = [(k, text) for k, text in problems[name] if k not in allow]
        refusals += [f"predictions/{name}: {text} (--allow {k} to hand it in anyway)" for k, text in refused]
        table.append(_table_row(name, kept, kinds, [k for k, _ in refused]))
        manifest_files[name] = {**kept, "allowed": [k for k in kinds if k in allow]}
    return manifest_files, table, refusals


def _groups(names: set, files: dict) -> tuple:
    """({group: its files found and their runs}, the expected files missing, a warning per group whose
    files come from more than one run)."""
    groups, missing, warnings = {}, [], []
    for group, expected in expected_files().items():
        found = [f for f in (_present(n, names) for n in expected) if f]
        missing += [n for n in expected if not _present(n, names)]
        runs = sorted({files[f].run for f in found if files[f]})
        groups[group] = {"files": found, "runs": runs}
        if len(runs) > 1:
            of_run = {r: [f for f in found if files[f] and files[f].run == r] for r in runs}
            warnings.append(f"warning: {group} predictions come from {len(runs)} different runs: " +
                            "; ".join(f"{r} ({', '.join(of_run[r])})" for r in runs))
    return groups, missing, warnings


def _problems(names: set, files: dict) -> dict:
    """{file: [(kind, text)]}: its run's problems (provenance.run_problems), and Part 1 files of both
    spellings."""
    problems = {name: run_problems(None if source is None else source.provenance) for name,
                source in files.items()}
    if _spellings(names) == {"2023", "2024"}:
        part1 = [n for n in sorted(names) if _spellings([n])]
        problems[part1[0]] = problems[part1[0]] + [
            ("mixed-spellings", f"Part 1 files of both spellings: {', '.join(part1)} (keep one course version's)")]
    return problems


def _table_row(name: str, kept: dict, kinds: list, refused: list) -> str:
    """One file's line of the table: its run, model, steps, dev score, date (as the manifest keeps them) and
    status."""
    status = "ok"
    if kinds:
        status = ("refused: " + ",".join(refused)) if refused else ("allowed: " + ",".join(kinds))
    return _TABLE.format(name, Path(kept["run"]).name if kept["run"] else "?",
                         lineage_text(kept["model_lineage"]) or kept["model"] or "?", _text(kept["steps"]),
                         _text(kept["dev"]), (kept["date"] or "?")[:16], status)


_TABLE = "  {:38s} {:24s} {:40s} {:>6s} {:>7s} {:16s} {}"


def _text(value) -> str:
    return "?" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def make_submission(zip_path: str | os.PathLike, code_root: str | os.PathLike,
                    predictions_dir: str | os.PathLike, allow: Iterable[str] = ()) -> tuple:
    """Write the course's submission zip; returns (path, entry names, table lines, warning lines).

    Entries are stored uncompressed under the names the course's script gives
    them: `os.path.join(".", file)`, which zipfile normalises to `file`. Files
    the course would not accept (less the kinds in `allow`) raise
    SubmissionRefused, and nothing is written.
    """
    code_root, predictions_dir = Path(code_root), Path(predictions_dir)
    if (predictions_dir / ENSEMBLE_MANIFEST).is_file():  # an ensemble's folder: its own predictions
        predictions_dir = predictions_dir / "predictions"
    if not code_root.is_dir():
        raise UserError(f"code folder {code_root} does not exist")
    predictions = sorted(p for p in predictions_dir.iterdir() if p.is_file() and p.name != SOURCES) \
        if predictions_dir.is_dir() else []
    if not predictions:
        raise UserError(f"no prediction files in {predictions_dir}: run classifier.py and train_multitask.py "
                        f"first (a complete run copies its predictions there)")
    manifest, table, warnings, refusals = check_predictions(predictions_dir, allow)
    if refusals:
        raise SubmissionRefused(refusals, table)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in _code_files(code_root):
            archive.write(code_root / name, os.path.join(".", name))
        for path in predictions:
            archive.write(path, os.path.join(".", "predictions", path.name))
        archive.writestr(MANIFEST, json.dumps(manifest, indent=2) + "\n")
        names = archive.namelist()
    return atomic_write_bytes(zip_path, buffer.getvalue()), names, table, warnings

"""Where a prediction file came from, and what about it the course would not accept.

A run's provenance is read from its own folder when its files are published (`config.json`: the
model and its weights' sha256, --max-steps, --data-fraction, the planned steps; `metrics.json`:
the steps trained and the best dev score, or with --per-task-best that of each task's best) and
kept with each file in the course-level folder's `sources.json`, so the zip can judge a file after
its run folder is gone.

What the course would not accept, each a kind `prepare_submit.py --allow KIND` can override:
a smoke run (--max-steps stopped it early), a partial one (--data-fraction < 1), an interrupted
one (fewer steps than planned), a model other than the course's bert-base-uncased (the embedded
fallback, or any other), a file no run of this project wrote, and Part 1 files of both spellings.

An ensemble's folder (ensemble.py: an `ensemble.json` manifest) is judged by its members: the course would not
accept it for whatever it would not accept of any one of them.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert.errors import UserError

from ..saved.run_record import BaseModel, known_fields, read_run_record
from ..saved.run_result import RunResult

COURSE_MODELS = ("bert-base-uncased", "google-bert/bert-base-uncased")  # the only pretrained model it allows
COURSE_TASKS = ("sst", "quora", "sts", "cfimdb")  # whose training sets a continued pretraining may read
REFUSALS = {   # kind -> why the course would not take such a file
    "smoke": "a smoke run, stopped early by --max-steps",
    "partial-data": "trained on part of the data (--data-fraction < 1)",
    "interrupted": "a run that trained fewer steps than planned",
    "fallback-model": "the embedded fallback model, for trying the tool, not the course's bert-base-uncased",
    "other-model": "a model other than the course's bert-base-uncased",
    "unknown-origin": "not written by a run of this project, or changed since",
    "mixed-spellings": "Part 1 files of both the 2023 (pretrain/finetune) and 2024 spellings",
}
INCOMPLETE = ("smoke", "partial-data", "interrupted")  # a run that does not publish on its own
UNKNOWN_MODEL = BaseModel(None, None, None, None, None, None, None, None)   # a run that loaded no checkpoint
ENSEMBLE_MANIFEST = "ensemble.json"  # an ensemble's folder: its members, each with its provenance


@dataclass(frozen=True)
class Provenance:
    """A run's provenance (run_provenance) as kept in sources.json, or an ensemble's (ensemble_provenance)."""
    run: Optional[str] = None
    date: Optional[str] = None
    model: Optional[str] = None
    model_resolved_from: Optional[str] = None
    model_sha256: Optional[str] = None
    model_lineage: Optional[dict] = None
    steps: Optional[int] = None
    total_steps: Optional[int] = None
    planned_steps: Optional[int] = None
    max_steps: Optional[int] = None
    data_fraction: Optional[float] = None
    finished: Optional[bool] = None
    dev: Optional[float] = None
    members: Optional[list] = None   # an ensemble's: each member's provenance, as kept

    @classmethod
    def from_json(cls, data: dict) -> "Provenance":
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class Source:
    """One text a continued pretraining read (pretraining/models.lineage's "corpus")."""
    kind: Optional[str] = None
    name: Optional[str] = None
    path: Optional[str] = None
    sha256: Optional[str] = None


@dataclass(frozen=True)
class Start:
    """The checkpoint a continued pretraining began from (lineage's "from")."""
    name: Optional[str] = None
    requested: Optional[str] = None
    resolved_from: Optional[str] = None
    weights_sha256: Optional[str] = None


@dataclass(frozen=True)
class Lineage:
    """What a pretrained model is made of (pretraining/models.lineage, kept in pretraining.json): the
    checkpoint it continued and that checkpoint's own lineage, or the size drawn anew, and the text read."""
    start: Optional[Start] = None
    init_config: Optional[str] = None
    from_pretraining: Optional["Lineage"] = None
    corpus: tuple = ()

    @classmethod
    def from_json(cls, data: dict) -> "Lineage":
        renamed = {"start" if key == "from" else key: value for key, value in data.items()}
        raw = cls(**known_fields(cls, renamed))
        return dataclasses.replace(
            raw, start=None if raw.start is None else Start(**known_fields(Start, raw.start)),
            from_pretraining=Lineage.from_json(raw.from_pretraining) if raw.from_pretraining else None,
            corpus=tuple(Source(**known_fields(Source, source)) for source in raw.corpus or ()))


def _read(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _date(path: Path) -> Optional[str]:
    try:
        stamp = path.stat().st_mtime
    except OSError:
        return None
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat(timespec="seconds")


def run_provenance(run_dir: str | os.PathLike) -> dict:
    """What the run in `run_dir` was: model, steps trained and planned, data fraction, best dev score, date
    (without its config.json, only the folder: run_problems calls that unknown origin)."""
    run_dir = Path(run_dir).resolve()
    manifest = _read(run_dir / ENSEMBLE_MANIFEST)
    if manifest is not None:
        return ensemble_provenance(run_dir, manifest)
    if not (run_dir / "config.json").is_file():  # no record of the run: its files are of unknown origin
        return {"run": str(run_dir), "date": None}
    record = read_run_record(run_dir / "config.json")
    metrics = _result(run_dir / "metrics.json")
    model, epochs = record.model or UNKNOWN_MODEL, record.arguments.get("epochs")
    return {"run": str(run_dir), "date": _date(run_dir / "metrics.json"), "model": model.name,
            "model_resolved_from": model.resolved_from, "model_sha256": model.weights_sha256,
            "model_lineage": model.lineage,
            "steps": None if metrics is None else metrics.steps, "total_steps": record.total_steps,
            "planned_steps": None if epochs is None else record.steps_per_epoch * epochs,
            "max_steps": record.arguments.get("max_steps"),
            "data_fraction": record.arguments.get("data_fraction"),
            "finished": metrics is not None, "dev": None if metrics is None else metrics.dev}


def _result(path: Path) -> Optional[RunResult]:
    """A finished run's metrics.json; None where it has none (unfinished)."""
    return RunResult.read(path) if path.is_file() else None


def ensemble_provenance(folder: Path, manifest: dict) -> dict:
    """An ensemble's record: its members' own (kept in its manifest when it was built), the model they share, its
    dev score (its metrics.json)."""
    try:
        members = [m["provenance"] for m in manifest["members"]]
    except (KeyError, TypeError) as e:
        raise UserError(f"{folder / ENSEMBLE_MANIFEST}: not an ensemble's manifest (no {e})") from None
    metrics = _read(folder / "metrics.json")
    kept = [Provenance.from_json(m) for m in members]
    models = sorted({str(m.model) for m in kept})
    return {"run": str(folder), "date": _date(folder / "metrics.json"),
            "model": models[0] if len(models) == 1 else "mixed: " + ", ".join(models),
            "model_lineage": kept[0].model_lineage if len(models) == 1 and kept else None,
            "steps": None, "total_steps": None, "max_steps": None, "data_fraction": None,
            "finished": metrics is not None,
            "dev": None if metrics is None else metrics["ensemble"].get("overall"),
            "members": members}


def run_problems(record: Optional[dict]) -> list:
    """(kind, one-line reason) for each thing about the run behind a file that the course would not accept."""
    if not record or "model" not in record or not (kept := Provenance.from_json(record)).run:
        return [("unknown-origin", REFUSALS["unknown-origin"])]
    if "members" in record:
        return ensemble_problems(kept)
    problems = []
    steps, planned, max_steps = kept.steps, kept.planned_steps, kept.max_steps
    if max_steps is not None and (planned is None or max_steps < planned):
        problems.append(("smoke", f"a smoke run: --max-steps {max_steps} stopped it at step {steps}"
                                  + (f" of {planned}" if planned else "")))
    fraction = kept.data_fraction
    if fraction is not None and fraction < 1:
        problems.append(("partial-data", f"trained on --data-fraction {fraction} of the data"))
    total = kept.total_steps
    if not kept.finished or steps is None or (total is not None and steps < total):
        problems.append(("interrupted", f"an interrupted run: {steps} of {total} steps trained"))
    name = kept.model
    if kept.model_resolved_from == "embedded":
        problems.append(("fallback-model", f"model {name}: {REFUSALS['fallback-model']}"))
    elif name not in COURSE_MODELS:
        continued, why = course_lineage(kept.model_lineage)
        if not continued:
            problems.append(("other-model", f"model {name}: {REFUSALS['other-model']}" + (f" ({why})" if why else "")))
    return problems


def ensemble_problems(kept: Provenance) -> list:
    """An ensemble's: each kind any member has, once, naming the members with each reason."""
    if not kept.members or not kept.finished:
        return [("unknown-origin", "an ensemble without members or without its metrics.json")]
    found = {}
    for member in kept.members:
        name = Path(str(Provenance.from_json(member).run)).name
        for kind, text in run_problems(member):
            found.setdefault(kind, {}).setdefault(text, []).append(name)
    return [(kind, "; ".join(f"ensemble member{'s' if len(names) > 1 else ''} {', '.join(names)}: {text}"
                             for text, names in texts.items())) for kind, texts in found.items()]


def course_lineage(lineage: Optional[dict]) -> tuple:
    """(True, "") for a model pretrain.py continued from the course's bert-base-uncased on the course's training
    sets only (task-adaptive pretraining: the course's own model trained further on its own training data, as
    fine-tuning is), through any number of such rounds; else (False, why not), why empty for a model of no
    recorded lineage."""
    if not lineage:
        return False, ""
    return _course_lineage(Lineage.from_json(lineage))


def _course_lineage(lineage: Lineage) -> tuple:
    outside = [s.path or s.name for s in lineage.corpus if s.kind != "task" or s.name not in COURSE_TASKS]
    if outside:
        return False, f"pretrained on text other than the course's training sets: {outside[0]}"
    start = lineage.start
    if start is None:
        return False, f"pretrained from scratch ({lineage.init_config}), not from bert-base-uncased"
    if start.name in COURSE_MODELS and start.resolved_from != "embedded":
        return True, ""
    if lineage.from_pretraining:
        return _course_lineage(lineage.from_pretraining)
    return False, f"continued from {start.name}, not from bert-base-uncased"


def lineage_text(lineage: Optional[dict]) -> Optional[str]:
    """A short name for a model made by continued pretraining of the course's model, for the hand-in's table."""
    if not course_lineage(lineage)[0]:
        return None
    return f"bert-base-uncased+MLM({','.join(s.name for s in Lineage.from_json(lineage).corpus)})"


def incomplete_reason(record: dict) -> Optional[str]:
    """Why a run is not complete (smoke, partial or interrupted), or None."""
    reasons = [text for kind, text in run_problems(record) if kind in INCOMPLETE]
    return "; ".join(reasons) or None


def parse_allow(text: Optional[str]) -> tuple:
    """--allow KIND,...: the kinds of refusal overridden on purpose."""
    kinds = tuple(k.strip() for k in (text or "").split(",") if k.strip())
    unknown = [k for k in kinds if k not in REFUSALS]
    if unknown:
        raise UserError(f"--allow: unknown kind {unknown[0]!r}; choose from {', '.join(REFUSALS)}")
    return kinds

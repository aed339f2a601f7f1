"""The runs an ensemble averages: each one read and checked before anything is written.

A member is a finished run folder of `train_multitask.py` (config.json, metrics.json, model/). Runs can be
averaged when they predict the same things the same way: the same tasks, the same label sets, the same dev
and test files (by sha256: the examples averaged are the same examples) and the same tokenizer. Their recipes
may differ (learning rate, pair mode, pooling, training files, seed): that is what an ensemble mixes. A run
that does not fit is refused in one line naming it and the difference.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError
from minbert.loading import VOCAB_FILES

from ..config import TrainConfig
from ..course.provenance import run_problems, run_provenance
from ..registry import get_task
from ..saved.model_folder import MODEL_DIR
from ..saved.run_record import DataFile, read_run_record
from ..task_file import declare_tasks

AVERAGED_SPLITS = ("dev", "test")
TOKENIZER_FILES = (*VOCAB_FILES, "tokenizer_config.json")
LABELS = ("head_kind", "num_classes", "label_range", "label_names")  # what a task's label set is


@dataclass(frozen=True)
class Member:
    """A finished run as an ensemble reads it."""
    path: Path                # resolved
    config_sha256: str        # of its config.json: which run this was, exactly
    seed: Optional[int]
    tasks: tuple              # as it trained them, in its order
    model: Optional[str]      # the model it fine-tuned, as config.json names it
    data_dir: Optional[str]   # the data folder it read (its --data-dir)
    files: dict               # (task, split) -> sha256 of the dev and test files it read (None: no such file)
    labels: dict              # task -> its label set (LABELS of its declaration)
    tokenizer: str            # sha256 over its tokenizer's files
    provenance: dict          # tasks/course/provenance.py's record of it
    task_file: Optional[str]  # its --task-file, declaring its own tasks

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def problems(self) -> list:
        """(kind, line) for what the course would not accept of it: smoke, partial, fallback model, ..."""
        return run_problems(self.provenance)

    def describe(self) -> dict:
        """Its entry in the ensemble's manifest."""
        return {"run": str(self.path), "config_sha256": self.config_sha256, "seed": self.seed, "model": self.model,
                "tokenizer_sha256": self.tokenizer, "problems": [kind for kind, _ in self.problems],
                "status": "; ".join(text for _, text in self.problems) or "ok"}


def read_member(path: str | os.PathLike) -> Member:
    """A run folder, checked to be a finished run of train_multitask.py."""
    folder = Path(path)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such run folder")
    if not (folder / "config.json").is_file():
        raise UserError(f"{folder}: not a run folder of train_multitask.py (no config.json)")
    if not (folder / "metrics.json").is_file() or not (folder / MODEL_DIR).is_dir():
        raise UserError(f"{folder}: an unfinished run (no metrics.json or {MODEL_DIR}/): finish it first with "
                        f"train_multitask.py --resume {folder}")
    record = read_run_record(folder / "config.json")
    try:
        tasks = record.task_list
        declare_tasks(record.task_file)
        files = {(t, s): _sha256(record.data_file(t, s)) for t in tasks for s in AVERAGED_SPLITS}
    except (KeyError, TypeError) as e:
        raise UserError(f"{folder / 'config.json'}: not a run's record (no {e})") from None
    labels = {t: label_set(t, record.declared_tasks.get(t)) for t in tasks}
    return Member(folder.resolve(), hashlib.sha256((folder / "config.json").read_bytes()).hexdigest(),
                  record.seed, tasks, None if record.model is None else record.model.name,
                  TrainConfig.from_record(record.arguments).data_dir, files, labels,
                  tokenizer_hash(folder / MODEL_DIR),
                  run_provenance(folder), record.task_file)


def _sha256(file: Optional[DataFile]) -> Optional[str]:
    return None if file is None else file.sha256


def label_set(task: str, declared: Optional[dict]) -> dict:
    """A task's label set: its declaration's as the run recorded it, or the course's (the registry's)."""
    if declared is not None:
        return {k: declared.get("head" if k == "head_kind" else k) for k in LABELS}
    cfg = get_task(task)
    return {k: getattr(cfg, k) for k in LABELS}


def tokenizer_hash(folder: Path) -> str:
    """sha256 over the tokenizer's files in a run's model folder (vocabulary and casing)."""
    digest = hashlib.sha256()
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()


def check_members(members: list) -> None:
    """Refuse, in one line naming the run and the difference, runs that cannot be averaged with the first."""
    if not members:
        raise UserError("no runs to ensemble: name at least one finished run folder")
    first = members[0]
    seen = {}
    for member in members:
        if member.path in seen:
            raise UserError(f"{member.path}: named twice (an ensemble averages different runs)")
        seen[member.path] = member
    for member in members[1:]:
        _check_like(member, first)
    declare_tasks(first.task_file)  # the tasks the ensemble writes: the first run's declaration, the same labels


def _check_like(member, first) -> None:
    """`member` against the first run: the same tasks, label sets, dev and test files, and tokenizer."""
    if sorted(member.tasks) != sorted(first.tasks):
        raise UserError(f"{member.path}: trained tasks {','.join(member.tasks)}, but {first.path} "
                        f"{','.join(first.tasks)}: an ensemble averages the same tasks")
    for task in first.tasks:
        if member.labels[task] != first.labels[task]:
            raise UserError(f"{member.path}: task {task}'s label set {member.labels[task]} differs from "
                            f"{first.path}'s {first.labels[task]}")
        for split in AVERAGED_SPLITS:
            if member.files[task, split] != first.files[task, split]:
                raise UserError(f"{member.path}: read a different {task} {split} file (sha256 "
                                f"{_short(member.files[task, split])}) than {first.path} "
                                f"({_short(first.files[task, split])}): the examples averaged must be the same")
    if member.tokenizer != first.tokenizer:
        raise UserError(f"{member.path}: its tokenizer (sha256 {_short(member.tokenizer)} of its "
                        f"{MODEL_DIR}/ vocabulary) differs from {first.path}'s ({_short(first.tokenizer)})")


def _short(digest: Optional[str]) -> str:
    return digest[:12] if digest else "none: no such file"

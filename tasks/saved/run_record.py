"""A run's record, RUN_DIR/config.json, as its readers see it: `RunRecord`.

`tasks/training/record.py::run_record` writes it (every option, the model and data files with their hashes,
the machine); the hand-in's provenance, the model card, predict.py's rebuilt run and an ensemble's members
read it through `read_run_record`. The key names on disk are the writer's and never change.

Schema 2 says its number ("schema": 2). A record without one is schema 1 (every run before 2026-11-28): it
reads through `upgrade_1`, which also fills in what the oldest schema-1 runs did not record yet.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError
from minbert.errors import read_json

SCHEMA = 2


def known_fields(cls, data: dict) -> dict:
    """The keys of `data` that are fields of the dataclass `cls`: a key a later writer added is ignored, and
    one an earlier writer did not write takes its field's default, decided once where the record is read."""
    names = {field.name for field in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


@dataclass(frozen=True)
class DataFile:
    """One split's file as the run read it (config.json's "data" -> TASK -> SPLIT)."""
    path: str
    sha256: str
    n_rows: int
    n_used: int

    @classmethod
    def from_json(cls, data: Optional[dict]) -> Optional["DataFile"]:
        return None if data is None else cls(data["path"], data["sha256"], data["n_rows"], data["n_used"])


@dataclass(frozen=True)
class BaseModel:
    """The checkpoint the run started from (config.json's "model")."""
    name: str
    resolved_from: Optional[str]     # "embedded" for the fallback model packaged with the project
    weights_sha256: Optional[str]
    folder: Optional[str]            # where it was loaded from (its tokenizer, its README's licence)
    num_layers: Optional[int]
    hidden_size: Optional[int]
    architecture: Optional[dict]     # "config": the BertConfig it built, absent where the loader did not say
    pretraining: Optional[dict]      # pretraining.json of a model pretrain.py made; None for any other model

    @classmethod
    def from_json(cls, data: Optional[dict]) -> Optional["BaseModel"]:
        if data is None:
            return None
        optional = ("resolved_from", "weights_sha256", "folder", "num_layers", "hidden_size", "config",
                    "pretraining")
        return cls(data["name"], *(data.get(key) for key in optional))

    @property
    def lineage(self) -> Optional[dict]:
        """How pretrain.py made it (the checkpoint continued, the corpus), or None."""
        return None if self.pretraining is None else self.pretraining["lineage"]


@dataclass(frozen=True)
class Precision:
    """config.json's "precision": what --precision asked for and what the run trained in."""
    requested: str
    used: str
    native_bf16: bool


@dataclass(frozen=True)
class RunRecord:
    """What a run was, as config.json records it."""
    command: tuple                    # sys.argv of the run
    arguments: dict                   # every option (TrainConfig.from_record reads them), and "task_list"
    seed: int
    model: Optional[BaseModel]        # None where the encoder was built without loading a checkpoint
    data: dict                        # task -> split -> DataFile, None for a split the run had no file of
    device: str
    versions: dict                    # python, torch, ..., minbert_commit, minbert_dirty
    declared_tasks: dict              # task -> what --task-file declared of it; {} for the course's tasks
    max_length: Optional[dict]        # task -> tokens; None for runs before eb120d9 (2026-11-23)
    precision: Optional[Precision]    # None for runs before 3f8373e (2026-11-22), which had one precision
    steps_per_epoch: int
    total_steps: int
    schema: int = SCHEMA

    @classmethod
    def from_json(cls, data: dict, where) -> "RunRecord":
        """A config.json's content as its record; one line naming `where` if it is malformed or of an unknown
        schema."""
        if not isinstance(data, dict):
            raise UserError(f"{where}: not a run's record (not a JSON object)")
        if "schema" not in data:
            data = upgrade_1(data)
        if data["schema"] != SCHEMA:
            raise UserError(f"{where}: a run record of schema {data['schema']}, this code reads schemas 1 "
                            f"to {SCHEMA}")
        try:
            precision = data["precision"]
            return cls(tuple(data["command"]), dict(data["arguments"]), data["seed"],
                       BaseModel.from_json(data["model"]),
                       {task: {split: DataFile.from_json(file) for split, file in splits.items()}
                        for task, splits in data["data"].items()},
                       data["device"], dict(data["versions"]), dict(data["declared_tasks"]),
                       data["max_length"],
                       None if precision is None else Precision(precision["requested"], precision["used"],
                                                                precision["native_bf16"]),
                       data["steps_per_epoch"], data["total_steps"])
        except (KeyError, TypeError, AttributeError) as e:
            raise UserError(f"{where}: not a run's record (no {e})") from None

    @property
    def task_list(self) -> tuple:
        return tuple(self.arguments["task_list"])

    @property
    def task_file(self) -> Optional[str]:
        """--task-file, absent from the arguments of runs before 13d285e (2026-11-23), which had none."""
        return self.arguments.get("task_file")

    def data_file(self, task: str, split: str) -> Optional[DataFile]:
        """The file the run read for `task`'s `split`, or None (no such split in the run)."""
        return self.data[task].get(split) if task in self.data else None

    @property
    def commit(self) -> str:
        """The minbert commit it ran, "(with local changes)" where the tree was dirty."""
        commit = self.versions.get("minbert_commit", "unknown")   # absent outside a git checkout
        return commit + " (with local changes)" if self.versions.get("minbert_dirty") else commit


def upgrade_1(data: dict) -> dict:
    """A schema-1 config.json (no "schema" key) as schema 2: the same record, with what its oldest runs did
    not write made explicit."""
    absent = {"declared_tasks": {},    # runs before 13d285e (2026-11-23): no --task-file, so none declared
              "max_length": None,      # runs before eb120d9 (2026-11-23)
              "precision": None}       # runs before 3f8373e (2026-11-22)
    return {**absent, **data, "schema": SCHEMA}


def read_run_record(path: str | os.PathLike, error: type = UserError) -> RunRecord:
    """RUN_DIR/config.json as its RunRecord; `error` (a UserError) with one line naming the file where it
    cannot be read or is no run's record."""
    path = Path(path)
    data = read_json(path, error, "run record (config.json)")
    try:
        return RunRecord.from_json(data, path)
    except UserError as e:
        raise error(str(e)) from None

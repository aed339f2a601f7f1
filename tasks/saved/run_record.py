"""A run's record, RUN_DIR/config.json, as one typed record: `RunRecord`.

`tasks/training/record.py::run_record` builds it (every option, the model and data files with their hashes,
the machine, what the run resolved) and writes its `to_json`; the hand-in's provenance, the model card,
predict.py's rebuilt run and an ensemble's members read it through `read_run_record`, and reading a record
back gives what was written. The key names on disk never change.

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


def part(cls, data: Optional[dict], **derived):
    """`data` as the record `cls` (None stays None), with `derived` fields given by the caller; a KeyError
    names the first field it needs and lacks."""
    if data is None:
        return None
    needed = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
    missing = next((name for name in needed if name not in data and name not in derived), None)
    if missing is not None:
        raise KeyError(missing)
    return cls(**known_fields(cls, data), **derived)


def written(record) -> dict:
    """A part of the record as the writer writes it: an optional field (default None) the record lacks has
    no key, as in the records written before it existed; a required one is written even when null."""
    return {f.name: to_json(getattr(record, f.name)) for f in dataclasses.fields(record)
            if getattr(record, f.name) is not None or f.default is not None}


def to_json(value):
    """A record's value as JSON: its parts through their own to_json, tuples as lists."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if dataclasses.is_dataclass(value):
        return written(value)
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class DataFile:
    """One split's file as the run read it (config.json's "data" -> TASK -> SPLIT)."""
    path: str
    sha256: str
    n_rows: int
    n_used: int
    skipped: Optional[dict] = None   # reason -> rows left out; absent from the oldest records
    # An ablation trial's training share (tasks/ablation/plateau.py): its fraction, the rows it trained on
    # and those it held out for the plateau rule; absent from any other run's record.
    trial_fraction: Optional[float] = None
    trial_rows: Optional[int] = None
    heldout_rows: Optional[int] = None

    @classmethod
    def from_json(cls, data: Optional[dict]) -> Optional["DataFile"]:
        return part(cls, data)

    def to_json(self) -> dict:
        return written(self)


@dataclass(frozen=True)
class BaseModel:
    """The checkpoint the run started from (config.json's "model": minbert's ModelSource, and for a model
    pretrain.py made its pretraining.json)."""
    name: str
    resolved_from: Optional[str] = None     # "embedded" for the fallback model packaged with the project
    weights_sha256: Optional[str] = None
    folder: Optional[str] = None            # where it was loaded from (its tokenizer, its README's licence)
    num_layers: Optional[int] = None
    hidden_size: Optional[int] = None
    architecture: Optional[dict] = None     # "config": the BertConfig it built
    pretraining: Optional[dict] = None      # pretraining.json of a model pretrain.py made; None for any other
    requested: Optional[str] = None         # what --model asked for
    weights_file: Optional[str] = None
    ignored_tensors: Optional[list] = None      # the checkpoint's tensors that are not the encoder's
    initialised_tensors: Optional[list] = None  # what the checkpoint lacked and was drawn anew

    @classmethod
    def from_json(cls, data: Optional[dict]) -> Optional["BaseModel"]:
        """A key a record does not have reads None: the oldest records lack some."""
        return None if data is None else part(cls, data, architecture=data.get("config"))

    def to_json(self) -> dict:
        """The writer's keys: "config" for the architecture."""
        return {("config" if key == "architecture" else key): value for key, value in written(self).items()}

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
    tf32: Optional[bool] = None     # fp32 matmuls in TF32; absent from records before --no-tf32


@dataclass(frozen=True)
class Resolved:
    """An option as asked for and as the run resolved it (config.json's "implementation")."""
    requested: str
    used: str


@dataclass(frozen=True)
class Graphs:
    """config.json's "cuda_graphs": --cuda-graphs, whether the run captured its step, at which widths, why."""
    requested: str
    used: str                       # "on" or "off"
    widths: Optional[list]          # the padded widths captured; None where nothing was
    why: Optional[str]


@dataclass(frozen=True)
class LearningRate:
    """config.json's "lr": the peak rate the run used and where it came from (--lr, or the recipe's)."""
    used: float
    reason: Optional[str]


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
    # What the run resolved and counted; None where an old schema-1 record lacks it (upgrade_1).
    implementation: Optional[Resolved]
    cuda_graphs: Optional[Graphs]
    lr: Optional[LearningRate]
    frozen_layers: Optional[int]
    sampler: Optional[str]
    world_size: Optional[int]         # processes torchrun started (1 without it)
    backend: Optional[str]            # their torch.distributed backend; None for one process
    trainable_parameters: Optional[int]
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
            return cls(tuple(data["command"]), dict(data["arguments"]), data["seed"],
                       BaseModel.from_json(data["model"]),
                       {task: {split: DataFile.from_json(file) for split, file in splits.items()}
                        for task, splits in data["data"].items()},
                       data["device"], dict(data["versions"]), dict(data["declared_tasks"]),
                       data["max_length"], part(Precision, data["precision"]),
                       data["steps_per_epoch"], data["total_steps"],
                       part(Resolved, data["implementation"]), part(Graphs, data["cuda_graphs"]),
                       part(LearningRate, data["lr"]),
                       *(data[key] for key in ("frozen_layers", "sampler", "world_size", "backend",
                                               "trainable_parameters")))
        except (KeyError, TypeError, AttributeError) as e:
            raise UserError(f"{where}: not a run's record (no {e})") from None

    def to_json(self) -> dict:
        """config.json's content: what `from_json` reads back as this record."""
        data = written(self)
        return {"schema": data.pop("schema"), **data}   # first, as the writer has always put it

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
              "precision": None,       # runs before 3f8373e (2026-11-22)
              # what the oldest runs did not count or resolve yet
              **{key: None for key in ("implementation", "cuda_graphs", "lr", "frozen_layers", "sampler",
                                       "world_size", "backend", "trainable_parameters")}}
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

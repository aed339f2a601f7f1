"""Tasks a user declares in a JSON file of their own (`--task-file`), registered beside the course's.

The papers' studies run on GLUE tasks (CoLA, MRPC, RTE, SST-2, STS-B) the course
does not ship; a declaration says where a task's files are and how to read them,
and becomes a `TaskConfig` record like the course's (`tasks/registry.py`), so
every command and every ablation mode takes it by name. The file is an object,
task name -> declaration:

    {"cola": {"train": "CoLA/train.tsv", "dev": "CoLA/dev.tsv",
              "test": {"file": "CoLA/test.tsv", "header": true, "text": ["sentence"], "id": "index"},
              "header": false, "text": [3], "label": 1, "classes": 2, "metric": "mcc"},
     "mrpc": {"train": "MRPC/train.tsv", "dev": "MRPC/dev.tsv",
              "text": ["#1 String", "#2 String"], "label": "Quality", "classes": 2, "metric": "f1"},
     "rte":  {"train": "RTE/train.tsv", "dev": "RTE/dev.tsv", "text": ["sentence1", "sentence2"],
              "label": "label", "id": "index", "labels": ["not_entailment", "entailment"]},
     "stsb": {"train": "STS-B/train.tsv", "dev": "STS-B/dev.tsv", "text": ["sentence1", "sentence2"],
              "label": "score", "range": [0, 5], "metric": "spearman"}}

Relative paths are relative to the JSON file's folder. A file may say which
format it is written in, `"schema": 1` beside its tasks; one that does not is
schema 1, the only one so far. Any mistake is one line
naming the file, the task and the key, and the command exits with status 2.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional, Union

from minbert.errors import UserError, read_json

from .head_kinds import CLASSIFY, REGRESS, HeadKind
from .registry import COURSE_TASKS, SPLITS, Layout, TaskConfig, set_declared_tasks

KEYS = {
    "train": "the training file (required)",
    "dev": "the dev file, evaluated after every epoch (required)",
    "test": "a test file, labels not needed: its predictions are written",
    "text": "one or two sentence columns",
    "label": "the label column",
    "id": "the id column (default: none; an example's id is its data row's number, from 0)",
    "classes": "classification into N classes written 0..N-1",
    "labels": "classification: the classes as the files write them, in order (class 0 first)",
    "range": "regression: [low, high], the scores' inclusive range",
    "metric": f"classification: {', '.join(CLASSIFY.metrics)} (default {CLASSIFY.metrics[0]}); regression: "
              f"{', '.join(REGRESS.metrics)} (default {REGRESS.metrics[0]})",
    "header": "whether the files' first line names the columns (default true; false: columns are 0-based indices)",
    "delimiter": "'\\t' or ',' (default: ',' for a .csv file, else tab)",
    "quoting": "whether double quotes group fields (default: true for ',', false for tab, as GLUE's readers)",
    "max_length": "tokens per sequence (default 128)",
    "description": "free text",
}
# What each key may be; a key left out is None, or the default its `Declaration` field gives.
KINDS = {"train": (str, dict), "dev": (str, dict), "test": (str, dict), "text": (list,), "label": (str, int),
         "id": (str, int, type(None)), "classes": (int,), "labels": (list,), "range": (list,), "metric": (str,
                                                                                                          ),
         "header": (bool,), "delimiter": (str,), "quoting": (bool,), "max_length": (int,
                                                                                    ), "description": (str,)}
REQUIRED = ("train", "dev", "text", "label")
SPLIT_KEYS = ("file", "header", "text", "label", "id")  # what a split given as an object may set for itself
NAME = re.compile(r"[a-z][a-z0-9_-]*")
SCHEMA = 1  # the file's format: a file may say so ("schema": 1); one that does not is schema 1, as all so far


def declare_tasks(path) -> tuple:
    """Read the task file at `path`, register its tasks (dropping any declared earlier) and return their names;
    None declares none."""
    configs = load_task_file(path) if path else []
    set_declared_tasks(configs)
    return tuple(c.name for c in configs)


def load_task_file(path) -> list:
    """The file's declarations as `TaskConfig` records; a mistake is a `UserError` naming the file and key."""
    path = Path(path).expanduser().resolve()
    declarations = read_json(path, UserError, "task file (--task-file)")
    tasks = dict(declarations) if isinstance(declarations, dict) else {}
    schema = tasks.pop("schema", SCHEMA)
    if not tasks:
        raise UserError(f"{path}: expected an object of task name -> declaration, with at least one task")
    if schema != SCHEMA or isinstance(schema, bool):
        raise UserError(f"{path}: 'schema' must be {SCHEMA}, the task file format this version reads "
                        f"(no task may be named 'schema'), got {schema!r}")
    return [_task(Declaration.read(path, name, body)) for name, body in tasks.items()]


@dataclass(frozen=True)
class Declaration:
    """One task's declaration as its file writes it, every key checked against KINDS; `_task` makes the
    `TaskConfig` of it. Every complaint names the file, the task and the key."""
    path: Path
    name: str
    train: Union[str, dict]
    dev: Union[str, dict]
    text: list
    label: Union[str, int]
    test: Union[str, dict, None] = None
    id: Union[str, int, None] = None
    classes: Optional[int] = None
    labels: Optional[list] = None
    range: Optional[list] = None
    metric: Optional[str] = None         # None: the head kind's first
    header: bool = True
    delimiter: Optional[str] = None      # None: ',' for a .csv train file, else tab
    quoting: Optional[bool] = None       # None: quotes for ',', none for tab
    max_length: int = 128
    description: Optional[str] = None    # None: "declared in FILE"

    @classmethod
    def read(cls, path: Path, name, body) -> "Declaration":
        error = partial(_error, path, name)
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise UserError(f"{path}: task name {name!r}: use lower-case letters, digits, '-' and '_', "
                            f"starting with a letter")
        if name in COURSE_TASKS:
            raise error(f"the course's task {name!r} cannot be redeclared; choose another name")
        if not isinstance(body, dict):
            raise error("the declaration must be an object")
        unknown = sorted(set(body) - set(KEYS))
        if unknown:
            raise error(f"unknown key {unknown[0]!r}; the keys are {', '.join(KEYS)}")
        missing = [key for key in REQUIRED if key not in body]
        if missing:
            raise error(f"{missing[0]!r} is required ({KEYS[missing[0]]})")
        for key, value in body.items():
            kinds = KINDS[key]
            if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
                raise error(f"{key!r} must be {' or '.join(_KIND_NAMES[k] for k in kinds)}, got {value!r}")
        return cls(path=path, name=name, **body)

    def error(self, message: str) -> UserError:
        return _error(self.path, self.name, message)


def _error(path: Path, name, message: str) -> UserError:
    return UserError(f"{path}: task {name!r}: {message}")


_KIND_NAMES = {str: "a string", int: "an integer", list: "a list", bool: "true or false", dict: "an object",
               float: "a number", type(None): "null"}


def _task(d: Declaration) -> TaskConfig:
    files, split_layouts = {}, {}
    for split in SPLITS:
        entry = getattr(d, split)
        if entry is not None:
            files[split], split_layouts[split] = _split_file(d, split, entry)
    delimiter = d.delimiter
    if delimiter is None:
        delimiter = "," if files["train"].suffix.lower() == ".csv" else "\t"
    if delimiter not in ("\t", ","):
        raise d.error(f"'delimiter' must be '\\t' or ',', got {delimiter!r}")
    text = _columns(d, "text", d.text, d.header)
    if not 1 <= len(text) <= 2:
        raise d.error(f"'text' names {len(text)} columns; a task has one or two sentences")
    label = _column(d, "label", d.label, d.header)
    ident = _column(d, "id", d.id, d.header)
    layouts = {split: _split_layout(d, split, own, Layout(d.header, text, label, ident))
               for split, own in split_layouts.items() if own}
    head = _head(d)
    if d.max_length < 8:
        raise d.error(f"'max_length' must be >= 8, got {d.max_length}")
    return TaskConfig(
        name=d.name, files={split: str(p) for split,
                            p in files.items()}, text_columns=text, label_column=label,
        id_column=ident, max_length=d.max_length,
        description=f"declared in {d.path}" if d.description is None else d.description, delimiter=delimiter,
        quoting=delimiter == "," if d.quoting is None else d.quoting, header=d.header, layouts=layouts,
        prediction_header="prediction", prediction_style="tsv", outputs={}, declared_in=str(d.path), **head)


def _split_file(d: Declaration, split: str, entry) -> tuple:
    """(resolved path, the split's own layout keys) of a split given as a path or as {"file": ..., ...}."""
    own = {}
    if isinstance(entry, dict):
        unknown = sorted(set(entry) - set(SPLIT_KEYS))
        if unknown or "file" not in entry:
            raise d.error(f"{split!r}: " + (f"unknown key {unknown[0]!r}" if unknown else "'file' is required") +
                          f"; a split's object may set {', '.join(SPLIT_KEYS)}")
        own = {k: v for k, v in entry.items() if k != "file"}
        entry = entry["file"]
        if not isinstance(entry, str):
            raise d.error(f"{split!r}: 'file' must be a string, got {entry!r}")
    if not entry.strip():
        raise d.error(f"{split!r}: empty file name")
    return (d.path.parent / Path(entry).expanduser()).resolve(), own


def _split_layout(d: Declaration, split: str, own: dict, task: Layout) -> Layout:
    header = own.get("header", task.header)
    if not isinstance(header, bool):
        raise d.error(f"{split!r}: 'header' must be true or false, got {header!r}")
    # A split that changes whether there is a header must say where its columns are.
    needed = [k for k in ("text", "label", "id") if header != task.header and k not in own
              and not (k == "label" and split == "test") and not (k == "id" and task.id_column is None)]
    if needed:
        raise d.error(f"{split!r}: its 'header' differs from the task's, so it must give its own "
                      f"{', '.join(repr(k) for k in needed)}")
    text = _columns(d, f"{split}.text", own["text"], header) if "text" in own else task.text_columns
    if len(text) != len(task.text_columns):
        raise d.error(f"{split!r}: 'text' names {len(text)} columns, the task {len(task.text_columns)}")
    label = _column(d, f"{split}.label", own["label"], header) if "label" in own else task.label_column
    ident = _column(d, f"{split}.id", own["id"], header) if "id" in own else task.id_column
    return Layout(header, text, label, ident)


def _columns(d: Declaration, key: str, values: list, header: bool) -> tuple:
    if not isinstance(values, list):
        raise d.error(f"{key!r} must be a list of columns, got {values!r}")
    columns = tuple(_column(d, key, v, header) for v in values)
    if len(set(columns)) != len(columns):
        raise d.error(f"{key!r} names a column twice")
    return columns


def _column(d: Declaration, key: str, value, header: bool):
    """A column name (files with a header) or 0-based index (files without); None stays None (no id column)."""
    if value is None:
        return None
    if header and not (isinstance(value, str) and value.strip()):
        raise d.error(f"{key!r}: with a header, columns are named by the header's names, got {value!r}")
    if not header and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise d.error(f"{key!r}: without a header ('header': false), columns are 0-based indices, got {value!r}")
    return value.strip() if header else value


def _head(d: Declaration) -> dict:
    """The TaskConfig fields of the task's head kind: classification ('classes' or 'labels') or regression
    ('range')."""
    kinds = [k for k in ("classes", "labels", "range") if getattr(d, k) is not None]
    if len(kinds) != 1:
        raise d.error("give exactly one of 'classes' (classification, labels 0..N-1), 'labels' (classification, "
                      "the classes as the files write them) or 'range' (regression)" +
                      (f"; found {', '.join(kinds)}" if kinds else ""))
    if kinds[0] == "range":
        return _regression_head(d)
    n, label_names = _classes(d, kinds[0])
    metric = _metric(d, CLASSIFY)
    if metric == "f1" and n != 2:
        raise d.error(f"metric 'f1' is the positive class's F1 and needs two classes (this task has {n}); "
                      f"use 'macro_f1'")
    return dict(head_kind=CLASSIFY.name, num_classes=n, label_range=(0, n - 1), label_names=label_names,
                metric=metric, prediction_format="name" if label_names else CLASSIFY.declared_format)


def _regression_head(d: Declaration) -> dict:
    low_high = d.range
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in low_high)
    if len(low_high) != 2 or not numbers or not low_high[0] < low_high[1]:
        raise d.error(f"'range' must be [low, high] with low < high, got {low_high!r}")
    low, high = float(low_high[0]), float(low_high[1])
    return dict(head_kind=REGRESS.name, num_classes=None, label_range=(low, high), metric=_metric(d, REGRESS),
                prediction_format=REGRESS.declared_format)


def _classes(d: Declaration, kind: str) -> tuple:
    """(number of classes, their names as the files write them or None) of a 'labels' or 'classes' task."""
    if kind == "labels":
        names = d.labels
        if len(names) < 2 or not all(isinstance(n, str) and n.strip() for n in names) \
                or len({n.strip() for n in names}) != len(names):
            raise d.error(f"'labels' must list at least two distinct non-empty strings, got {names!r}")
        return len(names), tuple(n.strip() for n in names)
    if d.classes < 2:
        raise d.error(f"'classes' must be >= 2, got {d.classes}")
    return d.classes, None


def _metric(d: Declaration, kind: HeadKind) -> str:
    metric = kind.metrics[0] if d.metric is None else d.metric
    if metric not in kind.metrics:
        raise d.error(f"metric {metric!r} does not fit a {kind.word} task; choose {', '.join(kind.metrics)}")
    return metric

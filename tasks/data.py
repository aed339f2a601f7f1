"""Readers for the files of every registered task: the CS224N default project's and the user's own.

The course's files are tab-separated with a header row: an unnamed index column, then
`id` and the task's columns (`tasks/registry.py` names them). They are parsed
like the course parses them (`csv` module, tab delimiter, default quote
character), so rows with unbalanced quotes come out the same way they do for
the course's code: a quoted field swallows the following tabs and the row
usually ends with an empty label. A task declared with `--task-file` says
its own delimiter, quoting, header and columns (`TaskConfig.layout`); GLUE's
TSV files are read as GLUE's readers read them, without quote processing.
In train and dev files such rows are
skipped, counted and reported in one warning line per file (a file with many
of them is treated as the wrong file). A test row is an id that must get a
prediction: one that cannot be parsed stops the run, naming its line.

Every problem is reported as a `DataError` whose message is one line that
starts with the file name.
"""

from __future__ import annotations

import hashlib
import math
import os
import pathlib
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from minbert.errors import DataError

from .registry import MULTITASK_TASKS, REGISTRY, SPLITS, Layout, TaskConfig
from .text_files import decode, one_line, records, separated, show

TASKS = MULTITASK_TASKS  # the default task set of train_multitask.py
DATA_DIR_ENV = "MINBERT_DATA_DIR"

# Used when neither a data folder nor MINBERT_DATA_DIR is given.
DEFAULT_DATA_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"

_MAX_REPORTED_LINES = 5


@dataclass
class Example:
    id: str
    a: str
    b: str | None
    label: int | float | None
    line: int  # 1-based line number in the file where the record starts


@dataclass
class Dataset:
    task: str
    split: str
    path: pathlib.Path
    examples: list[Example]
    n_rows: int                                   # data rows read (usable + skipped)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    skipped_lines: list[int] = field(default_factory=list)  # first <=5 skipped lines
    sha256: str = ""                              # of the file bytes

    def __len__(self) -> int:
        return len(self.examples)

    def describe(self) -> dict:
        """A json-able summary, meant for run configs."""
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "n_rows": self.n_rows,
            "n_used": len(self.examples),
            "skipped": dict(self.skipped),
        }


# --------------------------------------------------------------------------
# names and paths


def _check_task(task) -> TaskConfig:
    if task not in REGISTRY:
        raise DataError(f"unknown task {task!r}; expected one of {', '.join(REGISTRY)}")
    return REGISTRY[task]


def _check_split(split) -> None:
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")


def resolve_data_dir(data_dir=None) -> pathlib.Path:
    """The data folder: `data_dir` if given, else $MINBERT_DATA_DIR, else <repo>/data."""
    if data_dir is not None and str(data_dir) != "":
        return pathlib.Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV, "")
    if env:
        return pathlib.Path(env).expanduser()
    return DEFAULT_DATA_DIR


def split_path(data_dir, task, split) -> pathlib.Path:
    """Where the course keeps `task`/`split`: e.g. sst/test -> ids-sst-test-student.csv."""
    spec = _check_task(task)
    _check_split(split)
    return resolve_data_dir(data_dir) / spec.files[split]


# --------------------------------------------------------------------------
# reading


def _default_warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _lines_text(lines: list[int], total: int) -> str:
    text = ", ".join(str(n) for n in lines)
    return text + (", ..." if total > len(lines) else "")


def _reasons_text(skipped: dict[str, int]) -> str:
    return ", ".join(f"{reason}: {count}" for reason, count in skipped.items())


def _column_name(column) -> str:
    return f"column {column}" if isinstance(column, int) else column


def _parse_label(raw: str | None, spec: TaskConfig):
    """Returns (label, None) or (None, reason)."""
    if raw is None:
        return None, "too few fields"
    text = raw.strip()
    if not text:
        return None, "empty label"
    if spec.label_names is not None:  # classes as the files write them
        return (spec.label_names.index(text), None) if text in spec.label_names else (None, "unknown label")
    try:
        if "_" in text:  # float() accepts "1_0"; the course's files never do
            raise ValueError
        value = float(text)
    except ValueError:
        return None, "non-numeric label"
    if not math.isfinite(value):
        return None, "non-finite label"
    if spec.kind.integer_labels:
        if value != int(value):
            return None, "non-integer label"
        value = int(value)
    low, high = spec.label_range
    if not low <= value <= high:
        return None, "label out of range"
    return value, None


def _header_error(name: str, task: str, spec: TaskConfig, header: list[str], missing: list[str]) -> DataError:
    shown = ", ".join(show(h, 20) for h in header[:8])
    if len(header) > 8:
        shown += ", ..."
    hint = f"is it {separated(spec.delimiter)}?" if len(header) <= 1 else f"is this the right {task} file?"
    return DataError(
        f"{name}: line 1: header lacks column(s) {', '.join(missing)} needed for "
        f"{task} (found: {shown}); {hint}"
    )


def read_split(data_dir, task, split, strict=False, warn=None) -> Dataset | None:
    """Read one split of one task.

    Missing train/dev files raise `DataError`; a missing test file gives one
    warning and None. Unusable rows are skipped with one warning per file (or,
    with `strict=True`, the first one raises `DataError`).
    """
    spec = _check_task(task)
    _check_split(split)
    if split not in spec.files:  # a declared task without a test file: nothing to predict, nothing to say
        return None
    warn = _default_warn if warn is None else warn
    path = split_path(data_dir, task, split)
    raw = _read_bytes(path, spec, split, warn)
    if raw is None:
        return None
    name = path.name
    text = decode(name, raw)
    if not text.strip():
        raise DataError(f"{name}: empty file ({len(raw)} bytes); is this the right file?")
    layout = spec.layout(split)
    rows = records(name, text, spec.delimiter, spec.quoting)
    if layout.header:
        columns = _columns(name, task, spec, layout, split, next(rows, None), len(raw))
    else:
        columns = {i: i for i in _wanted_columns(layout, split)}
    examples, skipped, skipped_lines, n_rows = _parse_rows(name, rows, columns, spec, layout, split, strict)
    if n_rows == 0:
        raise DataError(f"{name}: has a header but no data rows")
    return Dataset(
        task=task,
        split=split,
        path=path,
        examples=examples,
        n_rows=n_rows,
        skipped=_report_skipped(name, task, n_rows, skipped, skipped_lines, warn),
        skipped_lines=skipped_lines,
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def _read_bytes(path: pathlib.Path, spec: TaskConfig, split: str, warn: Callable) -> bytes | None:
    """The file's bytes; None (and one warning) for a missing course test file, whose predictions are then
    skipped. A declared task's files must all be where its declaration says."""
    name = path.name
    if not path.exists():
        where = path.parent
        if spec.declared_in is not None:
            raise DataError(f"{name} not found in {where}, where {spec.declared_in} says the {spec.name} "
                            f"{split} file is")
        if split == "test":
            warn(f"{name} not found in {where}; {spec.name} test predictions will be skipped")
            return None
        raise DataError(
            f"{name} not found in {where}; pass --data-dir or set {DATA_DIR_ENV}"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{name}: cannot read {path}: {one_line(exc.strerror or exc)}") from None


def _wanted_columns(layout: Layout, split: str) -> list:
    ident = [layout.id_column] if layout.id_column is not None else []
    return [*ident, *layout.text_columns] + ([layout.label_column] if split != "test" else [])


def _columns(name: str, task: str, spec: TaskConfig, layout: Layout, split: str, first, size: int) -> dict:
    """Column name -> index, from the header record (`first`); every column the split needs must be there."""
    if first is None:  # only blank lines
        raise DataError(f"{name}: empty file ({size} bytes); is this the right file?")
    header = [h.strip() for h in first[1]]
    # Same lookup as csv.DictReader: a repeated name maps to its last column.
    columns = {h: i for i, h in enumerate(header)}
    missing = [c for c in _wanted_columns(layout, split) if c not in columns]
    if missing:
        raise _header_error(name, task, spec, header, missing)
    return columns


def _parse_rows(name: str, rows, columns: dict, spec: TaskConfig, layout: Layout, split: str, strict: bool):
    """(examples, skipped reason -> count, first skipped lines, data rows read). A test row that cannot be
    parsed stops the read (it needs a prediction), and so does any unusable row when `strict`."""
    examples: list[Example] = []
    skipped: Counter[str] = Counter()
    skipped_lines: list[int] = []
    seen_ids: set[str] = set()
    n_rows = 0
    for start, row in rows:
        problem, example = _parse_row(row, columns, spec, layout, split, start, seen_ids, n_rows)
        n_rows += 1
        if problem is None:
            examples.append(example)
            seen_ids.add(example.id)
            continue
        reason, detail = problem
        if split == "test" and reason != "duplicate id":
            raise DataError(f"{name}: line {start}: {detail}; every test row needs a prediction, "
                            f"so this row cannot be skipped: fix the file")
        if strict:
            raise DataError(f"{name}: line {start}: {detail} (strict mode)")
        skipped[reason] += 1
        if len(skipped_lines) < _MAX_REPORTED_LINES:
            skipped_lines.append(start)
    return examples, skipped, skipped_lines, n_rows


def _report_skipped(name: str, task: str, n_rows: int, skipped: Counter, skipped_lines: list[int],
                    warn: Callable) -> dict[str, int]:
    """The skipped rows' reasons, most frequent first, said in one warning; more than 1% of the rows means the
    wrong file."""
    n_skipped = sum(skipped.values())
    ordered = dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    if n_skipped:
        reasons = _reasons_text(ordered)
        lines = _lines_text(skipped_lines, n_skipped)
        if n_skipped > 1 and n_skipped > 0.01 * n_rows:
            raise DataError(
                f"{name}: {n_skipped} of {n_rows} rows are unusable ({reasons}) at lines "
                f"{lines}; more than 1% is too many, is this the right {task} file?"
            )
        warn(f"{name}: skipped {n_skipped} of {n_rows} rows ({reasons}) at lines {lines}")
    return ordered


def _parse_row(row, columns, spec: TaskConfig, layout: Layout, split: str, line: int, seen_ids, index: int):
    """Returns (None, Example) or ((reason, detail), None).

    Training rows must be complete. A dev or test row is an id the grader
    expects a prediction for, so an empty sentence there is kept (and encoded
    as an empty sentence); a repeated id keeps its first row, which already
    gets the id's one prediction. Without an id column, the id is `index`, the
    data row's number from 0 (GLUE's test files number their rows so).
    """

    def get(col):
        i = columns[col]
        return row[i] if i < len(row) else None

    need_label = split != "test"
    absent = [str(c) for c in _wanted_columns(layout, split) if get(c) is None]
    if absent:
        return ("too few fields", f"too few fields ({len(row)}; no {', '.join(absent)})"), None

    label = None
    if need_label:
        raw = get(layout.label_column)
        label, reason = _parse_label(raw, spec)
        if reason is not None:
            return (reason, f"{reason} {_column_name(layout.label_column)}={show(raw)}"), None

    # Lower-cased as the course's readers do, so prediction files carry the ids its grader keys on.
    ident = str(index) if layout.id_column is None else get(layout.id_column).strip().lower()
    if not ident:
        return ("empty id", "empty id"), None

    sentences = []
    for col in layout.text_columns:
        value = get(col).strip()
        if not value and split == "train":
            return ("empty sentence", f"empty sentence ({_column_name(col)})"), None
        sentences.append(value)

    if ident in seen_ids:
        return ("duplicate id", f"duplicate id {show(ident)}"), None

    b = sentences[1] if len(sentences) > 1 else None
    return None, Example(id=ident, a=sentences[0], b=b, label=label, line=line)


def read_task(data_dir, task, strict=False, warn=None) -> dict[str, Dataset | None]:
    """{"train": ..., "dev": ..., "test": ...} for one task (test may be None)."""
    _check_task(task)
    return {split: read_split(data_dir, task, split, strict=strict, warn=warn) for split in SPLITS}


# --------------------------------------------------------------------------
# subsampling


def subsample(examples: Iterable[Example], fraction, seed) -> list[Example]:
    """A seeded random subset of about `fraction` of the examples, in file order.

    Deterministic for a given (examples, fraction, seed); keeps at least one
    example of a non-empty list. `fraction` must be in (0, 1].
    """
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
    if not ok or not math.isfinite(fraction) or not 0 < fraction <= 1:
        raise DataError(f"subsample fraction must be in (0, 1], got {fraction!r}")
    items = list(examples)
    if fraction == 1 or not items:
        return items
    k = min(len(items), max(1, round(len(items) * fraction)))
    keep = sorted(random.Random(seed).sample(range(len(items)), k))
    return [items[i] for i in keep]

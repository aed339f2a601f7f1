"""A user's own sentences or pairs to score (`predict.py --input`): a csv or tsv file, or stdin.

The first line names the columns; tab-separated if it holds a tab, else
comma-separated. The text columns are the task's (registry: `sentence`, or
`sentence1` and `sentence2`) unless named with `--columns`; the ids are the
task's id column where there is one, else each row's line number. Problems are
one `DataError` line naming the file and line.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

from minbert import DataError

from ..data import Dataset, Example
from ..registry import get_task
from ..text_files import decode, records

STDIN = "-"


def read_user_file(source: str, task: str, columns: Optional[Sequence[str]] = None) -> Dataset:
    """The rows of `source` (a path or "-") as a labelless split of `task`, in file order."""
    cfg = get_task(task)
    name = "<stdin>" if source == STDIN else source
    raw = sys.stdin.buffer.read() if source == STDIN else _read(Path(source))
    text = decode(name, raw)
    first_line = text.split("\n", 1)[0]
    delimiter = "\t" if "\t" in first_line else ","
    rows = records(name, text, delimiter)
    header = next(rows, None)
    if header is None:
        raise DataError(f"{name}: empty input; the first line must name the columns")
    names = [h.strip() for h in header[1]]
    index = text_indices(name, names, task, columns)
    id_index = names.index(cfg.id_column) if cfg.id_column in names else None
    examples = []
    for line, fields in rows:
        needed = max(index + ([id_index] if id_index is not None else []))
        if len(fields) <= needed:
            raise DataError(f"{name}: line {line}: {len(fields)} fields, the header names {len(names)}")
        ident = fields[id_index].strip() if id_index is not None else str(line)
        texts = [fields[i].strip() for i in index]
        examples.append(Example(ident, texts[0], texts[1] if len(texts) > 1 else None, None, line))
    if not examples:
        raise DataError(f"{name}: no rows to score after the header")
    return Dataset(task, "test", Path(name), examples, len(examples))


def text_indices(name: str, names: list, task: str, columns: Optional[Sequence[str]]) -> list:
    """Where the header `names` puts the task's text columns (`columns`, else the task's own names)."""
    cfg = get_task(task)
    wanted = list(columns or cfg.text_columns)
    if len(wanted) != len(cfg.text_columns):
        raise DataError(f"--columns: {task} reads {len(cfg.text_columns)} text column(s) "
                        f"({', '.join(cfg.text_columns)}), got {len(wanted)}")
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DataError(f"{name}: line 1: no column {missing[0]!r} (found: {', '.join(names) or 'none'}); "
                        f"name the text columns with --columns")
    return [names.index(c) for c in wanted]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror or e})") from None


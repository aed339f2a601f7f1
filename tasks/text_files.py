"""A data file as text: its bytes decoded as the course's reader decodes them, its records split as its csv
reader splits them (or, for a declared task, with the task's delimiter and quoting), and a value shown in a
one-line message. Read by the task readers (`tasks/data.py`) and by a user's own file (`tasks/saved/user_input.py`).
"""
from __future__ import annotations

import csv
import io
from typing import Iterator

from minbert.errors import DataError


def one_line(text) -> str:
    """Collapse any line breaks so a message stays on one line."""
    return " ".join(str(text).split())


def show(value: str, limit: int = 30) -> str:
    value = one_line(value)
    if len(value) > limit:
        value = value[:limit] + "..."
    return repr(value)


def decode(name: str, raw: bytes) -> str:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
        offset = exc.start + start
        line = raw.count(b"\n", 0, offset) + 1
        raise DataError(
            f"{name}: not UTF-8 text (invalid byte 0x{raw[offset]:02x} at byte offset "
            f"{offset}, line {line}); is this the right file?"
        ) from None
    # Universal newlines, as `open(path)` gives the course's reader.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def records(name: str, text: str, delimiter: str = "\t", quoting: bool = True) -> Iterator[tuple[int, list[str]]]:
    """(line where it starts, fields) of every non-blank record, as the course's csv reading splits them (or,
    for a declared task, with its delimiter and quoting)."""
    quote_rules = {} if quoting else {"quoting": csv.QUOTE_NONE, "quotechar": None}
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, **quote_rules)
    line_before = 0
    while True:
        start = line_before + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(
                f"{name}: line {start}: cannot parse as {separated(delimiter)} CSV ({one_line(exc)})"
            ) from None
        line_before = reader.line_num
        if row:  # a blank line; csv.DictReader skips these too
            yield start, row


def separated(delimiter: str) -> str:
    return {"\t": "tab", ",": "comma"}.get(delimiter, repr(delimiter)) + "-separated"

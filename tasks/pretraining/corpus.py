"""The text pretraining reads, as documents of lines: plain text files (`--corpus`) and the training splits of
registered tasks (`--tasks`), each source with the hash of what it was read from.

A corpus file is UTF-8 text with one sentence or paragraph a line and blank lines between documents; a
sequence of the packed corpus never crosses a document's end (packing.py). A task's source is its training
split only, never dev or test (which the studies and the course score on): every sentence of it, a pair's two
sentences one after the other, the whole split one document (its sentences are unrelated, as RoBERTa's
FULL-SENTENCES packing lets unrelated text share a sequence).

A file that is missing, a folder, empty, binary (a NUL byte) or not UTF-8 is one line naming it (`DataError`,
exit 2 from the command).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from minbert import DataError

from ..data import read_split
from ..text_files import decode, one_line


@dataclass
class Source:
    """One source of text: its documents (each a list of non-blank lines, stripped) and where they came from."""
    kind: str                 # "file" or "task"
    name: str                 # the path as given, or the task's name
    path: str                 # the file read (a task's training file)
    sha256: str               # of that file's bytes
    documents: list

    @property
    def lines(self) -> int:
        return sum(len(d) for d in self.documents)

    def text(self) -> str:
        """The documents as the text that is tokenised: lines joined by newlines, documents by a blank line."""
        return "\n\n".join("\n".join(d) for d in self.documents)

    def describe(self) -> dict:
        """config.json's record of the source: enough to tell whether a later run read the same text."""
        return {"kind": self.kind, "name": self.name, "path": self.path, "sha256": self.sha256,
                "documents": len(self.documents), "lines": self.lines}


def split_documents(text: str) -> list:
    """Documents (lists of stripped non-blank lines) of a text whose blank lines end documents."""
    documents, current = [], []
    for line in text.split("\n"):
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    return documents


def read_corpus_file(path) -> Source:
    """A `--corpus` file as documents; a file that is not usable text is one line naming it."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--corpus {path}: no such file")
    if path.is_dir():
        raise DataError(f"--corpus {path}: a folder, not a text file")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"--corpus {path}: cannot read it ({one_line(e.strerror or e)})") from None
    nul = raw.find(b"\0")
    if nul >= 0:
        raise DataError(f"--corpus {path}: a binary file, not text (a NUL byte at byte offset {nul}); "
                        f"pretraining reads plain UTF-8 text, one sentence or paragraph a line")
    documents = split_documents(decode(f"--corpus {path}", raw))
    if not documents:
        raise DataError(f"--corpus {path}: empty ({len(raw)} bytes, no line of text)")
    return Source("file", str(path), str(path), hashlib.sha256(raw).hexdigest(), documents)


def read_task_source(data_dir, task: str, warn: Optional[Callable] = None) -> Source:
    """A registered task's training sentences (never dev or test): the whole split as one document."""
    split = read_split(data_dir, task, "train", warn=warn)
    lines = []
    for example in split.examples:
        lines.extend(s.strip() for s in (example.a, example.b) if s is not None and s.strip())
    if not lines:
        raise DataError(f"{split.path.name}: no sentence to pretrain on in {task}'s training split")
    return Source("task", task, str(split.path), split.sha256, [lines])

"""The corpus as a run uses it: every source read (corpus.py), tokenised once (tokenised.py), packed and split
into training and held-out sequences (packing.py), with the record config.json keeps of it."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from minbert import Tokenizer

from ..config import parse_tasks
from ..data import resolve_data_dir
from ..registry import get_task
from ..task_file import declare_tasks
from .corpus import read_corpus_file, read_task_source
from .packing import Sequences, pack, split_held_out
from .tokenised import tokenise, tokenizer_fingerprint


@dataclass
class PreparedCorpus:
    train: Sequences
    held_out: Sequences
    sources: list = field(default_factory=list)   # each source's record: where it came from, its hash, its size
    max_length: int = 128

    def describe(self) -> dict:
        """config.json's "corpus"."""
        return {"sources": self.sources, "max_length": self.max_length,
                "train": {"sequences": len(self.train), "tokens": self.train.tokens},
                "held_out": {"sequences": len(self.held_out), "tokens": self.held_out.tokens}}


def read_sources(corpus_files, tasks: Optional[str], data_dir=None, task_file=None,
                 warn: Optional[Callable] = None) -> list:
    """The sources asked for: each --corpus file, then each --tasks task's training split."""
    sources = [read_corpus_file(path) for path in corpus_files or ()]
    if tasks:
        declare_tasks(task_file)
        names = parse_tasks(tasks)
        course = any(get_task(t).declared_in is None for t in names)
        folder = resolve_data_dir(data_dir) if course else None
        sources += [read_task_source(folder, t, warn) for t in names]
    return sources


def prepare_corpus(sources: list, tokenizer: Tokenizer, max_length: int, held_out: float, seed: int,
                   cache_dir: Optional[Path], say: Callable = print) -> PreparedCorpus:
    """Tokenise (or read back) every source, pack, and set the held-out share apart."""
    fingerprint = tokenizer_fingerprint(tokenizer)
    tokenised, records = [], []
    for source in sources:
        result = tokenise(source, tokenizer, cache_dir, fingerprint)
        say(f"corpus: {source.kind} {source.name}: {source.lines:,} lines, {result.tokens:,} tokens "
            f"({'read from the cache' if result.cached else 'tokenised'})")
        tokenised.append(result)
        records.append({**source.describe(), "tokens": result.tokens, "cache_key": result.key})
    sequences = pack(tokenised, max_length, tokenizer.cls_id, tokenizer.sep_id)
    train_rows, held_rows = split_held_out(len(sequences), held_out, seed)
    return PreparedCorpus(sequences.rows(train_rows), sequences.rows(held_rows), records, max_length)


def corpus_changed(recorded: list, now: list) -> Optional[str]:
    """Why the sources a run recorded differ from those read now (a resumed run must read the same text)."""
    if len(recorded) != len(now):
        return f"the run read {len(recorded)} source(s), now {len(now)}"
    for old, new in zip(recorded, now):
        if (old.get("kind"), old.get("name"), old.get("sha256")) != (new.kind, new.name, new.sha256):
            return f"{new.path} is not the file the run started from (its SHA-256 differs)"
    return None

"""Tokenised documents packed into sequences of at most `--max-length` tokens, `[CLS] ... [SEP]` as BERT's
single-segment input, and the seeded held-out share set apart for evaluation.

Packing is greedy and keeps lines whole: a sequence takes a document's next lines while they fit in
`max_length - 2` tokens, and a line longer than that is cut into pieces of that size. A sequence never
crosses a document's end (RoBERTa's DOC-SENTENCES), so the model learns from text that belongs together;
unrelated sentences meant to share sequences go in one document (a task's training split is one, corpus.py).
With no next-sentence objective every sequence is one segment (token type 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minbert import DataError

HELD_OUT_STREAM = 0x4E1D  # the held-out draw's own random stream beside --seed's others


@dataclass
class Sequences:
    """Packed sequences, special tokens included, one after the other in `ids`."""
    ids: np.ndarray       # int32
    starts: np.ndarray    # int64, len(self) + 1 offsets into ids

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[self.starts[i]:self.starts[i + 1]]

    @property
    def lengths(self) -> list:
        return np.diff(self.starts).tolist()

    @property
    def tokens(self) -> int:
        return int(self.starts[-1])

    def rows(self, indices) -> "Sequences":
        """The sequences at `indices`, in that order."""
        parts = [self[int(i)] for i in indices]
        ends = np.cumsum([len(p) for p in parts], dtype=np.int64)
        ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        return Sequences(ids, np.concatenate([[0], ends]).astype(np.int64))


def pack(tokenised_sources, max_length: int, cls_id: int, sep_id: int) -> Sequences:
    """Every document of every source (`Tokenised`), in order, packed into `[CLS] lines [SEP]` sequences."""
    room = max_length - 2
    bodies = []
    for source in tokenised_sources:
        for document in source.documents():
            bodies.extend(_pack_document(document, room))
    pieces = [np.concatenate([[cls_id], body, [sep_id]]).astype(np.int32) for body in bodies]
    ends = np.cumsum([len(p) for p in pieces], dtype=np.int64)
    ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    return Sequences(ids, np.concatenate([[0], ends]).astype(np.int64))


def _pack_document(lines: list, room: int) -> list:
    """One document's lines greedily into bodies of at most `room` tokens, lines kept whole where they fit."""
    bodies, current, used = [], [], 0
    for line in lines:
        while len(line):
            if used + len(line) <= room:
                current.append(line)
                used += len(line)
                line = line[:0]
            elif used:
                bodies.append(np.concatenate(current))
                current, used = [], 0
            else:  # longer than a whole sequence: cut
                bodies.append(line[:room])
                line = line[room:]
    if used:
        bodies.append(np.concatenate(current))
    return bodies


def split_held_out(n: int, fraction: float, seed: int) -> tuple:
    """(training indices, held-out indices), both sorted and disjoint, together every index below `n`: a
    seeded `fraction` of them (at least one) held out. The same (n, fraction, seed) always gives the same."""
    if n < 2:
        raise DataError(f"the corpus packs into {n} sequence(s): too little text to hold a share out for "
                        f"evaluation and train on the rest")
    k = min(n - 1, max(1, round(n * fraction)))
    order = np.random.default_rng([seed, HELD_OUT_STREAM]).permutation(n)
    return np.sort(order[k:]), np.sort(order[:k])

"""Sources tokenised once: every line's WordPiece ids, cached on disk under the hash of their content.

The cache key is the SHA-256 of the text that is tokenised (a source's documents, corpus.py) together with
the tokenizer's full serialisation (vocabulary, lower-casing, accents), so a changed file, another task
split or another vocabulary is tokenised afresh, and the same text with the same tokenizer is read back,
whichever run, folder or file name it comes from. The cache is a user cache, shared by every run (a
ladder of budgets, a rerun, task-adaptive pretraining of several models on one corpus):
`--cache-dir`, else `$MINBERT_CACHE_DIR/pretraining`, else `$XDG_CACHE_HOME/minbert/pretraining`
(`~/.cache/minbert/pretraining`). One `<key>.npz` per source (numpy arrays, read without pickle);
deleting the folder only costs the tokenising again.
"""
from __future__ import annotations

import hashlib
import io
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from minbert import Tokenizer

from ..fileio import atomic_write_bytes
from .corpus import Source

CACHE_ENV = "MINBERT_CACHE_DIR"
FORMAT = 1        # of the cached arrays; part of the key, so a new layout never reads an old file
_CHUNK = 10_000   # lines per encode_batch call


def default_cache_dir() -> Path:
    """$MINBERT_CACHE_DIR/pretraining, else $XDG_CACHE_HOME/minbert/pretraining, else ~/.cache/minbert/..."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "minbert")
    return Path(root).expanduser() / "pretraining"


@dataclass
class Tokenised:
    """One source's token ids (no special tokens), line by line, and where its documents end."""
    ids: np.ndarray          # int32: every line's tokens, one after the other
    line_ends: np.ndarray    # int64: where each line's tokens end in `ids`
    doc_ends: np.ndarray     # int64: where each document's lines end (in lines)
    key: str                 # the cache key (content hash)
    cached: bool = False     # read back from the cache rather than tokenised here

    @property
    def tokens(self) -> int:
        return int(len(self.ids))

    def documents(self):
        """Each document as a list of its lines' id arrays."""
        line_starts = np.concatenate([[0], self.line_ends[:-1]]).astype(np.int64)
        first = 0
        for end in self.doc_ends.tolist():
            yield [self.ids[line_starts[i]:self.line_ends[i]] for i in range(first, end)]
            first = end


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """The hash of everything that decides the ids: the backend's serialisation (vocabulary, normaliser...)."""
    return hashlib.sha256(tokenizer.backend.to_str().encode("utf-8")).hexdigest()


def content_key(source: Source, fingerprint: str) -> str:
    digest = hashlib.sha256(f"minbert-pretraining-{FORMAT}\0{fingerprint}\0".encode())
    digest.update(source.text().encode("utf-8"))
    return digest.hexdigest()


def tokenise(source: Source, tokenizer: Tokenizer, cache_dir: Optional[Path], fingerprint: Optional[str] = None
             ) -> Tokenised:
    """The source's ids, from the cache when its content was tokenised before (`cache_dir` None: no cache)."""
    key = content_key(source, fingerprint or tokenizer_fingerprint(tokenizer))
    path = None if cache_dir is None else Path(cache_dir) / f"{key}.npz"
    if path is not None and path.exists():
        found = _read(path, key)
        if found is not None:
            return found
    result = _encode(source, tokenizer, key)
    if path is not None:
        _write(path, result)
    return result


def _encode(source: Source, tokenizer: Tokenizer, key: str) -> Tokenised:
    lines = [line for doc in source.documents for line in doc]
    lengths, pieces = [], []
    for start in range(0, len(lines), _CHUNK):
        for encoding in tokenizer.backend.encode_batch(lines[start:start + _CHUNK], add_special_tokens=False):
            lengths.append(len(encoding.ids))
            pieces.append(np.asarray(encoding.ids, dtype=np.int32))
    ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    doc_ends = np.cumsum([len(d) for d in source.documents], dtype=np.int64)
    return Tokenised(ids, np.cumsum(lengths, dtype=np.int64), doc_ends, key)


def _read(path: Path, key: str) -> Optional[Tokenised]:
    """The cached arrays; None (and one line) for a damaged file, which is then tokenised again."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            return Tokenised(saved["ids"], saved["line_ends"], saved["doc_ends"], key, cached=True)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        print(f"warning: {path}: unreadable cache file ({type(e).__name__}); tokenising again", file=sys.stderr)
        return None


def _write(path: Path, tokenised: Tokenised) -> None:
    """Atomically, so that a killed run or two runs at once never leave half a file; a cache that cannot be
    written costs only the tokenising next time."""
    buffer = io.BytesIO()
    np.savez(buffer, ids=tokenised.ids, line_ends=tokenised.line_ends, doc_ends=tokenised.doc_ends)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as e:
        print(f"warning: cannot write the tokenised corpus to {path} ({e.strerror or e}); it will be "
              f"tokenised again next time", file=sys.stderr)

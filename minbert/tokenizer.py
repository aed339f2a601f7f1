"""WordPiece tokenisation through the `tokenizers` library, built from a checkpoint folder.

Encoding is split from padding: data is tokenised once per run into id lists
(`encode`), and each batch is padded to its own longest example (`collate`).
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import torch
from tokenizers import Tokenizer as _Tokenizer
from tokenizers import normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from .errors import CheckpointError


@dataclass
class Encoding:
    ids: list
    type_ids: list


class Tokenizer:
    def __init__(self, backend: _Tokenizer, max_length: int = 512):
        self.backend = backend
        self.max_length = max_length
        self.pad_id = backend.token_to_id("[PAD]")
        self.cls_id = backend.token_to_id("[CLS]")
        self.sep_id = backend.token_to_id("[SEP]")
        if None in (self.pad_id, self.cls_id, self.sep_id):
            raise CheckpointError("vocabulary lacks one of [PAD], [CLS], [SEP]")

    @classmethod
    def from_folder(cls, folder, max_length: Optional[int] = None) -> "Tokenizer":
        folder = Path(folder)
        settings = {}
        if (folder / "tokenizer_config.json").exists():
            settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        limit = settings.get("model_max_length", 512)
        limit = 512 if not isinstance(limit, int) or limit > 100_000 else limit
        max_length = min(max_length or limit, limit)
        if (folder / "vocab.txt").exists():
            backend = _wordpiece_from_vocab(folder / "vocab.txt",
                                            lowercase=settings.get("do_lower_case", True),
                                            strip_accents=settings.get("strip_accents"))
        elif (folder / "tokenizer.json").exists():
            backend = _Tokenizer.from_file(str(folder / "tokenizer.json"))
        else:
            raise CheckpointError(f"{folder}: no vocab.txt or tokenizer.json")
        backend.no_padding()
        backend.no_truncation()  # its pair truncation enumerates overflow windows: memory blows up on long pairs
        return cls(backend, max_length)

    def __len__(self):
        return self.backend.get_vocab_size()

    def encode(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None,
               max_length: Optional[int] = None) -> list:
        """`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated to `max_length` (at most the
        tokenizer's own), unpadded."""
        limit = min(max_length or self.max_length, self.max_length)
        first = [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=False)]
        if pairs is None:
            return [Encoding([self.cls_id] + a[: limit - 2] + [self.sep_id], [0] * (min(len(a), limit - 2) + 2))
                    for a in first]
        second = [e.ids for e in self.backend.encode_batch(list(pairs), add_special_tokens=False)]
        out = []
        for a, b in zip(first, second, strict=True):
            n_a, n_b = _longest_first(len(a), len(b), limit - 3)
            out.append(Encoding([self.cls_id] + a[:n_a] + [self.sep_id] + b[:n_b] + [self.sep_id],
                                [0] * (n_a + 2) + [1] * (n_b + 1)))
        return out

    def collate(self, encodings: Sequence[Encoding], width: Optional[int] = None) -> dict:
        """Pad to the longest example of this batch, or to `width` if that is wider (a static shape)."""
        width = max(width or 0, max(len(e.ids) for e in encodings))
        ids = torch.full((len(encodings), width), self.pad_id, dtype=torch.long)
        types = torch.zeros((len(encodings), width), dtype=torch.long)
        mask = torch.zeros((len(encodings), width), dtype=torch.long)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = torch.tensor(e.ids)
            types[row, :n] = torch.tensor(e.type_ids)
            mask[row, :n] = 1
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}

    def __call__(self, texts, pairs=None) -> dict:
        return self.collate(self.encode(texts, pairs))


def _longest_first(n_a: int, n_b: int, budget: int) -> tuple[int, int]:
    """Lengths after longest-first truncation, as Hugging Face's tokenizers cut a pair."""
    if n_a + n_b <= budget:
        return n_a, n_b
    short = min(n_a, n_b)
    if short <= budget // 2:
        return (n_a, budget - n_a) if n_a == short else (budget - n_b, n_b)
    big, small = (budget + 1) // 2, budget // 2  # the longer sequence (on a tie, the second) keeps the odd token
    return (big, small) if n_a > n_b else (small, big)


def _wordpiece_from_vocab(vocab_path: Path, lowercase: bool, strip_accents) -> _Tokenizer:
    try:
        vocab = {}
        for i, line in enumerate(vocab_path.read_text(encoding="utf-8").splitlines()):
            vocab.setdefault(line.rstrip("\n"), i)
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{vocab_path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if "[UNK]" not in vocab:
        raise CheckpointError(f"{vocab_path}: no [UNK] token")
    tok = _Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = vocab.get("[CLS]"), vocab.get("[SEP]")
    if cls is None or sep is None:
        raise CheckpointError(f"{vocab_path}: no [CLS] or [SEP] token")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok

"""Datasets tokenised once per run, and the batches cut from them.

Tokenising is the only per-example host work, so it happens here, once; a
batch is then just padding a handful of id lists to the batch's own longest.
"""
from dataclasses import dataclass
from typing import Optional

import torch

from minbert import Tokenizer

from .data import Dataset
from .registry import get_task


@dataclass
class EncodedSplit:
    task: str
    ids: list                       # example ids, in file order
    encodings: list                 # per example: (Encoding,) or, siamese pairs, (Encoding, Encoding)
    labels: Optional[torch.Tensor]  # None for test splits
    lengths: list                   # tokens per example (the longer side for siamese pairs)

    def __len__(self):
        return len(self.ids)

    def rows(self, indices: list) -> "EncodedSplit":
        """The split cut down to `indices` (a list of row numbers), in that order."""
        return EncodedSplit(self.task, [self.ids[i] for i in indices], [self.encodings[i] for i in indices],
                            self.labels[indices] if self.labels is not None else None,
                            [self.lengths[i] for i in indices])


def encode_split(dataset: Dataset, tokenizer: Tokenizer, pair_mode: str,
                 max_length: Optional[int] = None) -> EncodedSplit:
    """Token ids of every example, truncated to `max_length` tokens (default: the tokenizer's)."""
    cfg = get_task(dataset.task)
    examples = dataset.examples
    a = [e.a for e in examples]
    if cfg.is_pair and pair_mode == "siamese":
        encodings = list(zip(tokenizer.encode(a, max_length=max_length),
                             tokenizer.encode([e.b for e in examples], max_length=max_length)))
    elif cfg.is_pair:
        encodings = [(e,) for e in tokenizer.encode(a, [e.b for e in examples], max_length=max_length)]
    else:
        encodings = [(e,) for e in tokenizer.encode(a, max_length=max_length)]
    labels = None
    if examples and examples[0].label is not None:
        labels = torch.tensor([e.label for e in examples],
                              dtype=cfg.kind.label_dtype)
    return EncodedSplit(dataset.task, [e.id for e in examples], encodings, labels,
                        [max(len(x.ids) for x in enc) for enc in encodings])


def bucket_width(longest: int, widths: Optional[tuple]) -> Optional[int]:
    """The narrowest of `widths` (ascending) that holds `longest` tokens; None without widths (or past the widest:
    the batch's own longest)."""
    return next((w for w in widths if w >= longest), None) if widths else None


def make_batch(split: EncodedSplit, indices, tokenizer: Tokenizer, device, widths: Optional[tuple] = None) -> dict:
    """Tensors for one step: one padded sequence, or `a_`/`b_` sequences for siamese pairs. Each sequence is
    padded to its batch's longest or, given `widths` (ascending), to the narrowest of them that holds it: a few
    static shapes, which CUDA graphs need (tasks/training/graphs.py); the padding is masked."""
    chosen = [split.encodings[i] for i in indices]

    def collate(encodings):
        return tokenizer.collate(encodings, bucket_width(max(len(e.ids) for e in encodings), widths))
    if len(chosen[0]) == 1:
        batch = collate([c[0] for c in chosen])
    else:
        batch = {}
        for side, k in (("a", 0), ("b", 1)):
            batch.update({f"{side}_{key}": t for key, t in collate([c[k] for c in chosen]).items()})
    if split.labels is not None:
        batch["labels"] = split.labels[list(indices)]
    if torch.device(device).type == "cuda":  # page-locked, so the copy is asynchronous and overlaps the GPU's work
        batch = {k: v.pin_memory() for k, v in batch.items()}
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}

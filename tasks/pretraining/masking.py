"""BERT's masking, drawn anew each time a sequence is seen (RoBERTa's dynamic masking).

Of each sequence's tokens, 15% are chosen (each independently, `probability`); of the chosen, 80% become
`[MASK]`, 10% a random token, 10% stay as they are, and all of them are predicted (`labels`: the original id
at a chosen position, -100, which the loss ignores, elsewhere: transformers' convention). Special tokens
(`[CLS]`, `[SEP]`, `[PAD]`, `[MASK]`, `[UNK]`) are never chosen, and the random token is never one of them nor
a vocabulary's placeholder (`[unused17]`). With
`whole_word`, a word's WordPiece continuations (`##...`) are chosen with it: the draw is per word, so a
word is masked whole or not at all (the rate of tokens is still 15% in expectation). A sequence that draws
nothing gets one unit chosen, so that every sequence has a token to predict.

Every draw comes from a generator seeded by (seed, stream, sequence): the stream is the number of the pass
over the corpus for training (a new mask each pass) and a fixed number for the held-out sequences (the same
mask at every evaluation, so that evaluations compare). A batch is therefore a function of its indices alone:
a resumed run masks exactly as the unbroken one, whichever process of a torchrun group draws it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minbert import DataError, Tokenizer

IGNORE = -100
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")


@dataclass(frozen=True)
class Masking:
    mask_id: int
    special: np.ndarray        # bool over the vocabulary: never chosen
    continuation: np.ndarray   # bool over the vocabulary: a "##" piece, masked with its word under whole_word
    random_ids: np.ndarray     # the ids a randomly replaced token is drawn from
    seed: int = 0
    probability: float = 0.15
    to_mask: float = 0.8       # of the chosen: replaced by [MASK]
    to_random: float = 0.1     # of the chosen: replaced by a random token (the rest stay unchanged)
    whole_word: bool = False

    @classmethod
    def for_tokenizer(cls, tokenizer: Tokenizer, **options) -> "Masking":
        vocab = tokenizer.backend.get_vocab()
        size = max(len(tokenizer), max(vocab.values()) + 1)
        special, continuation, bracketed = (np.zeros(size, dtype=bool) for _ in range(3))
        for token, i in vocab.items():
            special[i] = token in SPECIAL_TOKENS
            continuation[i] = token.startswith("##")
            bracketed[i] = token.startswith("[") and token.endswith("]")  # [unused17] and the special tokens
        mask_id = vocab.get("[MASK]")
        if mask_id is None:
            raise DataError("the vocabulary has no [MASK] token: it cannot be used for masked-language modelling")
        return cls(mask_id, special, continuation, np.flatnonzero(~bracketed), **options)

    def describe(self) -> dict:
        """config.json's "masking"."""
        return {"probability": self.probability, "to_mask": self.to_mask, "to_random": self.to_random,
                "unchanged": round(1 - self.to_mask - self.to_random, 6), "whole_word": self.whole_word,
                "dynamic": True, "seed": self.seed}

    def units(self, ids: np.ndarray) -> np.ndarray:
        """The unit each position is drawn with: itself, or under whole_word the word it belongs to."""
        if not self.whole_word:
            return np.arange(len(ids))
        starts = ~self.continuation[ids] | self.special[ids]
        starts[0] = True
        return np.cumsum(starts) - 1

    def mask(self, ids: np.ndarray, stream: int, sequence: int) -> tuple:
        """(input ids, labels) of one sequence, both int64 arrays of its length."""
        rng = np.random.default_rng([self.seed, stream, sequence])
        maskable = ~self.special[ids]
        unit = self.units(ids)
        chosen = (rng.random(int(unit[-1]) + 1) < self.probability)[unit] & maskable
        if not chosen.any() and maskable.any():
            chosen = (unit == unit[rng.choice(np.flatnonzero(maskable))]) & maskable
        labels = np.full(len(ids), IGNORE, dtype=np.int64)
        labels[chosen] = ids[chosen]
        inputs = ids.astype(np.int64)
        where = np.flatnonzero(chosen)
        fate = rng.random(len(where))
        inputs[where[fate < self.to_mask]] = self.mask_id
        randomised = where[(fate >= self.to_mask) & (fate < self.to_mask + self.to_random)]
        inputs[randomised] = rng.choice(self.random_ids, size=len(randomised))
        return inputs, labels


def masked_batch(sequences, items, masking: Masking, pad_id: int, device) -> dict:
    """The tensors of one step: `items` are (sequence index, stream) pairs, padded to the batch's longest."""
    drawn = [masking.mask(sequences[i], stream, i) for i, stream in items]
    width = max(len(ids) for ids, _ in drawn)
    input_ids = torch.full((len(drawn), width), pad_id, dtype=torch.long)
    labels = torch.full((len(drawn), width), IGNORE, dtype=torch.long)
    attention = torch.zeros((len(drawn), width), dtype=torch.long)
    for row, (ids, targets) in enumerate(drawn):
        input_ids[row, :len(ids)] = torch.from_numpy(ids)
        labels[row, :len(ids)] = torch.from_numpy(targets)
        attention[row, :len(ids)] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention, "token_type_ids": torch.zeros_like(input_ids),
             "labels": labels}
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}

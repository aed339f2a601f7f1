"""Sentence features of every layer of a frozen encoder, in one pass: what linear probes are fitted on.

One forward pass with every hidden state gives all layers at once (index 0 is
the embeddings' output, index k the output of layer k), so probing every layer
costs one pass over the data, not one per layer. Two sentence vectors per layer:
the [CLS] state ("cls-token") and the mean of the real tokens' states ("mean").
A pair encoded as one sequence (`--pair-mode cross`) gives that sequence's
vector; pairs encoded one sentence at a time (`siamese`) give Sentence-BERT's
[u, v, |u - v|, u * v] of the two vectors. The encoder runs in eval mode (no
dropout) under inference mode, in batches sorted by length.
"""
from __future__ import annotations

import numpy as np
import torch

import minbert

from ....encoded import EncodedSplit, make_batch
from ....heads import pair_features, pool_tokens, sequences
from ....machine import autocast

FEATURE_POOLINGS = ("cls-token", "mean")


@torch.inference_mode()
def layer_features(encoder: minbert.BertModel, split: EncodedSplit, tokenizer, device, batch_size: int = 128,
                   precision: str = "fp32") -> dict:
    """pooling -> float32 array (layers + 1, examples, width), examples in the split's order.

    width is the hidden size, or four times it for pairs encoded one sentence at a time.
    """
    was_training = encoder.training
    encoder.eval()
    order = sorted(range(len(split)), key=split.lengths.__getitem__)
    out = {}
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            batch = make_batch(split, rows, tokenizer, device)
            per_sequence = []
            for seq in sequences(batch):
                with autocast(device, precision):
                    hidden = encoder(**seq, output_hidden_states=True).hidden_states
                mask = seq["attention_mask"]
                per_sequence.append({p: torch.stack([pool_tokens(h.float(), mask, p) for h in hidden])
                                     for p in FEATURE_POOLINGS})
            for pooling in FEATURE_POOLINGS:
                vectors = [s[pooling] for s in per_sequence]
                value = vectors[0] if len(vectors) == 1 else pair_features(*vectors)
                if pooling not in out:
                    out[pooling] = np.empty((value.shape[0], len(split), value.shape[-1]), dtype=np.float32)
                out[pooling][:, rows] = value.cpu().numpy()
    finally:
        encoder.train(was_training)
    return out

"""A reference and a fast-path model with the same random weights, and batches of given lengths."""
import torch

import minbert
from minbert.fast import FastBertModel

CONFIG = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              initializer_range=0.2)


FP32_TOL = 1e-5


BF16_TOL = 0.06  # bf16 keeps 8 significant bits; both paths round differently (SDPA vs written out, fused QKV)


LENGTHS = {
    "mixed": ([13, 1, 7, 12, 3, 9], 13),
    "several-blocks": ([100, 90, 5, 3, 7, 60, 1, 2, 40, 100], 100),  # regrouped into blocks by length
    "no-padding": ([9, 9, 9], 9),
    "padding-past-the-longest": ([5, 3], 8),
}


def models(**overrides):
    """A reference and a fast model with the same random weights (non-zero biases, uneven LayerNorms)."""
    config = minbert.BertConfig(**{**CONFIG, **overrides})
    torch.manual_seed(0)
    reference = minbert.BertModel(minbert.BertConfig(**{**CONFIG, **overrides, "implementation": "reference"}))
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
    fast_model = minbert.build_model(config)
    fast_model.load_state_dict(reference.state_dict())
    assert type(reference) is minbert.BertModel and type(fast_model) is FastBertModel
    return reference, fast_model


def make_batch(lengths, seq):
    g = torch.Generator().manual_seed(1)
    n = torch.tensor(lengths)[:, None]
    mask = (torch.arange(seq)[None] < n).long()
    ids = torch.randint(1, CONFIG["vocab_size"], (len(lengths), seq), generator=g) * mask
    types = ((torch.arange(seq)[None] >= n // 2) & mask.bool()).long()  # a second segment
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def max_diff_on_tokens(a, b, mask):
    """Outputs at padding positions mean nothing (zeros on the fast path, computed on the reference)."""
    return ((a - b).abs() * mask[..., None]).max().item()

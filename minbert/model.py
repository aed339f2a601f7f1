"""BERT written out module by module.

Module and parameter names mirror Hugging Face's checkpoint keys
(`encoder.layer.3.attention.self.query.weight`, ...), so loading a checkpoint
is a near-identity mapping (see `loading.py`).
"""
import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig


def activation(name: str):
    if name == "gelu":
        return lambda x: F.gelu(x)  # the exact (erf) GELU of the original BERT
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    return F.relu


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor            # (batch, seq, hidden)
    pooler_output: torch.Tensor                # (batch, hidden): tanh(W h_[CLS] + b)
    hidden_states: Optional[tuple] = None      # embeddings output, then every layer's output
    attentions: Optional[tuple] = None         # every layer's (batch, heads, query, key) probabilities


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids=None, token_type_ids=None, inputs_embeds=None):
        """`inputs_embeds` replaces the word-embedding lookup (SMART perturbs it)."""
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        seq_len = inputs_embeds.shape[1]
        positions = torch.arange(seq_len, device=inputs_embeds.device)
        x = inputs_embeds + self.position_embeddings(positions)[None]
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention over the unpadded keys."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x, key_mask: Optional[torch.Tensor], output_attentions: bool = False):
        """key_mask: (batch, 1, 1, seq) bool, True where a key may be attended; None = no padding."""
        B, T, C = x.shape
        # One fused projection: a single matmul for Q, K and V instead of three.
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        q, k, v = F.linear(x, weight, bias).view(B, T, 3, self.num_heads, self.head_size) \
            .permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, head_size)
        dropout_p = self.dropout_p if self.training else 0.0
        if not output_attentions:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, dropout_p=dropout_p)
            probs = None
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_size)
            if key_mask is not None:
                scores = scores.masked_fill(~key_mask, torch.finfo(scores.dtype).min)
            probs = scores.softmax(dim=-1)
            y = F.dropout(probs, dropout_p, self.training) @ v
        return y.transpose(1, 2).reshape(B, T, C), probs


class BertSelfOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, y, residual):
        return self.LayerNorm(self.dropout(self.dense(y)) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, x, key_mask, output_attentions=False):
        y, probs = self.self(x, key_mask, output_attentions)
        return self.output(y, x), probs


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def forward(self, x):
        return self.act(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertLayer(nn.Module):
    """Post-LayerNorm transformer block: attention, then the feed-forward network."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, x, key_mask, output_attentions=False):
        x, probs = self.attention(x, key_mask, output_attentions)
        return self.output(self.intermediate(x), x), probs


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x, key_mask, output_hidden_states=False, output_attentions=False):
        hidden, attentions = [x], []
        for block in self.layer:
            x, probs = block(x, key_mask, output_attentions)
            hidden.append(x)
            attentions.append(probs)
        return x, (tuple(hidden) if output_hidden_states else None), \
            (tuple(attentions) if output_attentions else None)


class BertPooler(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden):
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)
        self.source = None  # set by from_pretrained: what was loaded, for run records
        self.apply(self._init_weights)

    def _init_weights(self, module):
        """BERT's initialisation: N(0, initializer_range) truncated at 2 std, zero biases, unit LayerNorms."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    @property
    def num_layers(self) -> int:
        return len(self.encoder.layer)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_hidden_states=False, output_attentions=False) -> EncoderOutput:
        x = self.embeddings(input_ids, token_type_ids, inputs_embeds)
        key_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            key_mask = attention_mask[:, None, None, :].bool()
        last, hidden, attentions = self.encoder(x, key_mask, output_hidden_states, output_attentions)
        return EncoderOutput(last, self.pooler(last), hidden, attentions)

    def extra_repr(self) -> str:
        c = self.config
        text = f"layers={self.num_layers}, hidden={c.hidden_size}, heads={c.num_attention_heads}"
        if self.source is not None:
            text += f", loaded={self.source.name!r} from {self.source.folder}"
        return text

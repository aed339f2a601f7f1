"""BERT (Devlin et al., 2019), the reference implementation: plain padded tensors, every step in sight.

    embed    word + position + segment embeddings, LayerNorm, dropout   BertEmbeddings
    encode   num_hidden_layers x BertLayer:
               multi-head self-attention, add & norm                    BertAttention
               feed-forward (dense, GELU, dense), add & norm            BertIntermediate, BertOutput
    pool     tanh(W h_[CLS] + b)                                        BertPooler

`BertModel(config)` is always this reference, and this file imports nothing of any other
implementation. `minbert.build_model` and `from_pretrained` (`build.py`) give by default, on a CPU, the fast
path of `fast.py` over it (`BertConfig.implementation`, `auto` by default): these modules and
parameters with faster forwards, tested against this file (tests/minbert/test_fast.py). Names mirror
Hugging Face's checkpoint keys (`encoder.layer.3.attention.self.query.weight`), so loading is a
near-identity mapping (`loading.py`). Shapes: B batch, T tokens, hidden = heads * head_size.
"""
import math
from dataclasses import dataclass
from functools import partial
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig

# "gelu" is the exact (erf) GELU of the original BERT.
ACT2FN = {"gelu": F.gelu, "gelu_new": partial(F.gelu, approximate="tanh"),
          "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"), "relu": F.relu}


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor            # (B, T, hidden)
    pooler_output: Optional[torch.Tensor]      # (B, hidden): tanh(W h_[CLS] + b); None when not asked (pool=False)
    hidden_states: Optional[tuple] = None      # the embeddings' output, then every layer's: each (B, T, hidden)
    attentions: Optional[tuple] = None         # every layer's probabilities: each (B, heads, T query, T key)


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def sum_embeddings(self, input_ids=None, token_type_ids=None, inputs_embeds=None):
        """What each token is, where, in which segment: (B, T, hidden). `inputs_embeds` (B, T, hidden)
        replaces the word-embedding lookup (SMART perturbs it)."""
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)                     # (B, T, hidden)
        positions = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)
        x = inputs_embeds + self.position_embeddings(positions)[None]           # (1, T, hidden) broadcast
        if token_type_ids is None:  # one segment: every token is in segment 0
            return x + self.token_type_embeddings.weight[0]
        return x + self.token_type_embeddings(token_type_ids)

    def forward(self, input_ids=None, token_type_ids=None, inputs_embeds=None):
        return self.dropout(self.LayerNorm(self.sum_embeddings(input_ids, token_type_ids, inputs_embeds)))


def attention_keys(attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The keys every query may look at, built once per forward in the form SDPA's fused kernels take:
    (B, 1, 1, T key) bool, True at real tokens; None when nothing is padding, which leaves SDPA free to
    pick its fastest kernel (flash attention takes no mask).

    attention_mask: (B, T), 1 (or True) at real tokens. A sequence without any real token is taken as
    unpadded, as the fast path takes it: its outputs mean nothing but stay finite, where a row of keys all
    masked is NaN on some fused kernels.
    Only a CPU mask is read on the host to find "no padding": on a GPU that read would wait for the
    device once per forward, so there the mask is always built.
    """
    if attention_mask is None or _unpadded_on_the_cpu(attention_mask):
        return None
    real = attention_mask.bool()
    real = real | ~real.any(-1, keepdim=True)                                   # (B, T)
    return real[:, None, None, :]                                               # (B, 1, 1, T key)


def _unpadded_on_the_cpu(attention_mask: torch.Tensor) -> bool:
    """No padding, read on the host where that costs no wait for a device."""
    return attention_mask.device.type == "cpu" and bool(attention_mask.all())


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention over the real (non-padding) tokens: each head weighs
    the tokens' values by the softmax of its query's scores against their keys.

    `written_out` is the readable definition; `forward` runs the same computation through torch's
    fused `scaled_dot_product_attention` (flash / memory-efficient kernels on CUDA) unless the
    probabilities are asked for, which only the written-out one has (tests/tasks/test_devices.py holds
    the two together, values and gradients).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def written_out(self, q, k, v, keys):
        """q, k, v: (B, heads, T, head_size); keys: `attention_keys`' (B, 1, 1, T key) mask or None.
        Returns (B, heads, T, head_size) and the (B, heads, T query, T key) probabilities."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_size)            # (B, heads, T query, T key)
        if keys is not None:
            scores = scores.masked_fill(~keys, torch.finfo(scores.dtype).min)   # no query looks at padding
        probs = scores.softmax(dim=-1)                                          # each query's row sums to 1
        return self.dropout(probs) @ v, probs

    def sdpa(self, q, k, v, keys):
        """`written_out`'s values through the fused kernel (its own dropout mask, same probability)."""
        dropout_p = self.dropout.p if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=dropout_p)

    def project_qkv(self, x):
        """Q, K and V of x (B, T, hidden) from one matmul over the three projections' weights stacked into
        (3 * hidden, hidden): one kernel (and under autocast one cast of the stacked weight) where three
        `Linear`s take three, each with its own cast. The parameters stay `query`, `key` and `value`, so the
        state dict keeps Hugging Face's keys; stacked on every call, so no copy goes stale when they change.
        Returns q, k, v: each (B, heads, T, head_size)."""
        B, T, _ = x.shape
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])   # (3 * hidden, hidden)
        bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])           # (3 * hidden,)
        qkv = F.linear(x, weight, bias)                                               # (B, T, 3 * hidden)
        return qkv.view(B, T, 3, self.num_heads, self.head_size).permute(2, 0, 3, 1, 4).unbind(0)

    def forward(self, x, keys, output_attentions: bool = False):
        """x: (B, T, hidden); keys: `attention_keys(attention_mask)`, made once per forward by `BertModel`.
        Returns (B, T, hidden) and, if asked, the (B, heads, T, T) probabilities (else None)."""
        B, T, hidden = x.shape
        q, k, v = self.project_qkv(x)                                           # each (B, heads, T, head_size)
        if output_attentions:
            y, probs = self.written_out(q, k, v, keys)
        else:
            y, probs = self.sdpa(q, k, v, keys), None
        y = y.transpose(1, 2).reshape(B, T, hidden)                             # (B, T, hidden), heads concatenated
        return y, probs


class BertSelfOutput(nn.Module):
    """Add & norm after attention: mix the heads, dropout, add the residual, LayerNorm."""

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

    def forward(self, x, keys, output_attentions: bool = False):
        y, probs = self.self(x, keys, output_attentions)
        return self.output(y, x), probs


class BertIntermediate(nn.Module):
    """The feed-forward network's widening half: dense to intermediate_size, then the activation."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, x):
        return self.act(self.dense(x))


class BertOutput(nn.Module):
    """Add & norm after the feed-forward network: dense back to hidden, dropout, residual, LayerNorm."""

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

    def forward(self, x, keys, output_attentions: bool = False):
        x, probs = self.attention(x, keys, output_attentions)
        return self.output(self.intermediate(x), x), probs


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x, keys, output_hidden_states: bool = False, output_attentions: bool = False):
        """keys: `attention_keys`' mask (the fast path passes its TokenLayout in its place). Returns the last
        layer's output, and if asked every layer's output and probabilities."""
        hidden, attentions = [x], []
        for layer in self.layer:
            x, probs = layer(x, keys, output_attentions)
            hidden.append(x)
            attentions.append(probs)
        return x, (tuple(hidden) if output_hidden_states else None), \
            (tuple(attentions) if output_attentions else None)


class BertPooler(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden):
        return torch.tanh(self.dense(hidden[:, 0]))                             # (B, hidden), from [CLS]


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
                output_hidden_states=False, output_attentions=False, pool: bool = True) -> EncoderOutput:
        """input_ids, attention_mask (1 real, 0 padding), token_type_ids: (B, T). Outputs at padding
        positions are computed like any other and mean nothing. `pool=False` skips the pooler (its output
        is None) for a caller that reads only the token states, as mean pooling does."""
        x = self.embeddings(input_ids, token_type_ids, inputs_embeds)           # (B, T, hidden)
        keys = attention_keys(attention_mask)                                   # once, for every layer
        last, hidden, attentions = self.encoder(x, keys, output_hidden_states, output_attentions)
        return EncoderOutput(last, self.pooler(last) if pool else None, hidden, attentions)

    # Hooks for training loops, so that a loop works with any implementation without knowing its
    # internals. The reference keeps nothing derived from its parameters and computes every
    # gradient through autograd, so it has nothing to do; fast.py overrides both.

    def watch_optimizer(self, optimizer: torch.optim.Optimizer):
        """Call once with the optimizer that steps this model's parameters.

        An implementation that keeps copies derived from the parameters (fast.py: the cast evaluation
        weights) registers a step hook that forgets them after every step, since an optimizer need
        not bump the parameters' version counters (fused AdamW does not). Returns the hook's
        removable handle, or None when nothing was registered.
        """
        return None

    def prepare_for_data_parallel(self) -> "BertModel":
        """Call before the model's gradients are taken through DistributedDataParallel.

        DDP averages over the ranks only the gradients that autograd hands it, so an implementation
        that writes a gradient into `.grad` by itself (fast.py: the embedding tables) stops doing so.
        Returns the model.
        """
        return self

    def extra_repr(self) -> str:
        c = self.config
        text = f"layers={self.num_layers}, hidden={c.hidden_size}, heads={c.num_attention_heads}"
        if self.source is not None:
            text += f", loaded={self.source.name!r} from {self.source.folder}"
        return text

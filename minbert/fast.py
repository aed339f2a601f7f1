"""The fast path: the modules of `model.py` with faster forwards, the default implementation.

`use_fast_path` (called by `build.build_model`, the one place that chooses) gives some of a model's
modules a subclass that only overrides methods, so the parameters, the state dict and the loading
code are those of the reference. What changes:

- Padding is never computed. Between attentions the residual stream is a (rows, hidden) matrix
  of the batch's real tokens (`TokenLayout`), so dense layers, LayerNorm and dropout skip the
  padding, which is up to half of a shuffled batch. The reference `BertAttention`, `BertLayer`,
  `BertEncoder`, `BertSelfOutput`, `BertIntermediate` and `BertOutput` run unchanged on those rows:
  where the reference passes the attention mask, this path passes the layout.
- Attention regroups the rows into padded blocks of sequences of similar length, computes Q, K and
  V with one matmul, and uses SDPA unless dropout or the probabilities are wanted (`attend`).
  Moving rows between these layouts is a gather both ways (`_Regroup`): the backward gathers too,
  rather than scatter-adding into zeros as autograd's index_select backward does (all moves of the
  regrouped layout, and the padded batch -> rows move of the one kept for attention probabilities).
- Dropout draws its CPU mask four elements per 64-bit random number (`FastDropout`).
- The embedding tables' backward adds the looked-up rows into a kept `.grad` buffer instead
  of making a dense (vocab, hidden) gradient every step (`FastEmbedding`); not under DDP, which
  a training loop says through the `BertModel` hook `prepare_for_data_parallel`.
- In evaluation under autocast, weights are cast to the low precision once, not per batch
  (`CastOnceLinear`), and forgotten after every optimizer step (the hook `watch_optimizer`).

The three drop-in layers (dropout, linear, embedding) live in `fast_layers.py`; this file holds the
token layout, the attention and the model that use them, and `use_fast_path`.

tests/minbert/test_fast.py holds this path to the reference: outputs, gradients, probabilities, and
the dropout mask's statistics.
"""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .fast_layers import (
    CastOnceLinear,
    FastDropout,
    FastEmbedding,
    cast_once,
    drop_cast_weights,
    drop_copies_of_the_other_mode,
    dropout,
    eval_cast_dtype,
    rows_backward,
)
from .model import BertEmbeddings, BertModel, BertSelfAttention, EncoderOutput

ROW_MULTIPLE = 64       # real-token rows are padded to a multiple of this (see TokenLayout._round_rows)
BLOCK_OVERHEAD = 4096   # cost of one more attention block, in (sequences x length**2) units


# ---------------------------------------------------------------------------------- token layout

def _partition(lengths: list, overhead: int) -> list:
    """Cut ascending lengths into runs minimising sum(overhead + count * longest**2).

    A block's attention work grows with its padded length squared; each extra
    block costs a fixed number of kernel launches (`overhead`, in the same units).
    """
    n = len(lengths)
    best, cut = [0] + [None] * n, [0] * (n + 1)
    for end in range(1, n + 1):
        top = lengths[end - 1] ** 2
        best[end], cut[end] = min((best[start] + overhead + (end - start) * top, start)
                                  for start in range(end))
    runs, end = [], n
    while end:
        runs.append((cut[end], end))
        end = cut[end]
    return runs[::-1]


class _Regroup(torch.autograd.Function):
    """`x.index_select(0, index)` whose backward is also a gather: `grad.index_select(0, back)`.

    Autograd's backward of index_select adds into a zeroed tensor (index_add_), a scatter that
    on CPU runs several times slower than a gather. The two agree exactly when every row of x
    that is picked is picked by one output row only, apart from output rows whose gradient is
    exactly zero: `TokenLayout`'s moves between rows and attention blocks are such. Rows of the
    result named by `dead` (a bool mask) or from `live` on get no gradient, as under index_add_.
    """

    @staticmethod
    def forward(ctx, x, index, back, live, dead):
        ctx.back, ctx.live, ctx.dead = back, live, dead
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.index_select(0, ctx.back)
        if ctx.live is not None:
            grad[ctx.live:] = 0
        if ctx.dead is not None:
            grad.masked_fill_(ctx.dead[:, None], 0)
        return grad, None, None, None, None


class TokenLayout:
    """Where a batch's real tokens sit, so that no layer works on padding.

    Between attentions the residual stream is a (rows, hidden) matrix of the
    real tokens only. For attention the rows are gathered into padded blocks of
    sequences of similar length (`regroup`), or into the batch's own (batch, seq)
    layout when the probabilities are returned. Block slots past a sequence's end
    repeat one of its tokens, are masked out as keys and dropped as queries, so they get
    exactly zero gradient.
    """

    def __init__(self, batch: int, seq: int, attention_mask: Optional[torch.Tensor],
                 regroup: bool = True):
        self.batch, self.seq = batch, seq
        self.rows = None      # flat (batch * seq) position of each row; None = no padding, no gather
        self.real = batch * seq
        self.gather = None    # row filling each attention block slot; None = identity
        self.scatter = None   # block slot of each row; None = identity
        self.blocks = [(batch, seq, None)]  # (sequences, length, (sequences, length) bool valid or None)
        self.padding_slots = None  # bool per block slot, True past its sequence's end (regrouped only)
        self._masks = {}
        # A batch without any real token is garbage in, garbage out: treated as unpadded.
        if attention_mask is None or bool(attention_mask.all()) or not bool(attention_mask.any()):
            return
        device = attention_mask.device
        mask = attention_mask.bool()
        flat = mask.reshape(-1)
        self.rows = flat.nonzero().squeeze(1)
        self.real = len(self.rows)
        self._row_of_position = (flat.cumsum(0) - 1).clamp_(min=0)  # padding: any row (dead in flatten's backward)
        self._padding_positions = ~flat
        if not regroup:
            self.gather = self._row_of_position
            self.scatter = self.rows
            self.blocks = [(batch, seq, mask)]
        else:
            lengths = mask.sum(1)
            starts = lengths.cumsum(0) - lengths   # each sequence's first row
            counts = lengths.tolist()
            order = [b for b in sorted(range(batch), key=counts.__getitem__) if counts[b] > 0]
            sorted_counts = [counts[b] for b in order]
            gather, scatter, padding, self.blocks, base = [], torch.empty_like(self.rows), [], [], 0
            for lo, hi in _partition(sorted_counts, BLOCK_OVERHEAD):
                seqs, width = torch.tensor(order[lo:hi], device=device), sorted_counts[hi - 1]
                n, start = lengths[seqs][:, None], starts[seqs][:, None]
                t = torch.arange(width, device=device)[None]
                valid = t < n
                gather.append((start + torch.minimum(t, n - 1)).reshape(-1))
                scatter[(start + t)[valid]] = base + torch.arange(len(seqs) * width, device=device)[valid.reshape(-1)]
                self.blocks.append((len(seqs), width, None if bool(valid.all()) else valid))
                padding.append(~valid.reshape(-1))
                base += len(seqs) * width
            self.gather, self.scatter, self.padding_slots = torch.cat(gather), scatter, torch.cat(padding)
        self._round_rows()

    def _round_rows(self):
        """Pad the row count to a multiple of ROW_MULTIPLE with copies of the first token.

        oneDNN JIT-compiles a bf16 matmul kernel for every new shape (~4 ms
        each), and caches only so many: with exact token counts almost every
        batch is a new shape, a dozen times per step. The spare rows never
        reach a real row or the loss, so they change nothing and get zero gradient.
        """
        spare = -self.real % ROW_MULTIPLE
        if spare:
            self.rows = torch.cat([self.rows, self.rows[:1].expand(spare)])
            self.scatter = torch.cat([self.scatter, self.scatter[:1].expand(spare)])

    def flatten(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, ...) -> (rows, width)."""
        x = x.reshape(self.batch * self.seq, -1)
        if self.rows is None:
            return x
        return _Regroup.apply(x, self.rows, self._row_of_position, None, self._padding_positions)

    def row_of(self, positions: torch.Tensor) -> torch.Tensor:
        """The row of each flat (batch * seq) position of a real token (a padding position: some other row)."""
        return positions if self.rows is None else self._row_of_position[positions]

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(rows, width) -> (batch, seq, width), zeros at padding."""
        if self.rows is not None:
            x = x.new_zeros(self.batch * self.seq, x.shape[-1]).index_copy(
                0, self.rows[:self.real], x[:self.real])
        return x.view(self.batch, self.seq, x.shape[-1])

    def to_blocks(self, x: torch.Tensor) -> list:
        """(rows, width) -> one (sequences, length, width) tensor per attention block.

        When regrouped, a row's gradient is its own slot's: the other slots that repeat it lie past
        a sequence's end, masked as keys and dropped as queries, so their gradient is exactly zero.
        """
        if self.padding_slots is not None:
            x = _Regroup.apply(x, self.gather, self.scatter, self.real, None)
        elif self.gather is not None:
            x = x.index_select(0, self.gather)
        sizes = [b * t for b, t, _ in self.blocks]
        return [part.view(b, t, -1) for part, (b, t, _) in zip(x.split(sizes), self.blocks)]

    def from_blocks(self, parts: list) -> torch.Tensor:
        """Inverse of `to_blocks`: back to (rows, width), the padding slots dropped."""
        parts = [p.reshape(p.shape[0] * p.shape[1], -1) for p in parts]
        x = parts[0] if len(parts) == 1 else torch.cat(parts)
        if self.padding_slots is not None:  # the spare rows' gradient is exactly zero (_round_rows)
            return _Regroup.apply(x, self.scatter, self.gather, None, self.padding_slots)
        return x if self.scatter is None else x.index_select(0, self.scatter)

    def key_mask(self, block: int, dtype=None):
        """A block's keys as SDPA's bool mask (dtype None) or an additive bias; None if unpadded."""
        valid = self.blocks[block][2]
        if valid is None:
            return None
        if (block, dtype) not in self._masks:
            m = valid[:, None, None, :]
            if dtype is not None:
                m = torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill_(~m, torch.finfo(dtype).min)
            self._masks[block, dtype] = m
        return self._masks[block, dtype]


# ------------------------------------------------------------------------------------------ modules

def attend(q, k, v, bias: Optional[torch.Tensor], dropout_p: float, training: bool):
    """Softmax attention written out, in float32 whatever the autocast; returns (output, probabilities).

    Used for the probabilities and in training: SDPA's CPU kernels cannot apply
    dropout, so they would fall back to an unfused math path with the slow bernoulli_.
    At these sizes (head size 32, tens of tokens) float32 batched matmuls are no
    slower than bf16 ones, and the softmax wants float32 anyway. In bf16 they are
    not faster either, even with AMX, and oneDNN keeps a compiled kernel for every
    new (blocks, length) shape: 340 MB more peak memory in a default run.
    """
    with torch.autocast(q.device.type, enabled=False):
        q, k, v = q.float(), k.float(), v.float()
        scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)
        if bias is not None:
            scores = scores + bias
        probs = scores.softmax(dim=-1)
        return dropout(probs, dropout_p, training) @ v, probs


class FastBertEmbeddings(BertEmbeddings):
    def forward(self, input_ids=None, token_type_ids=None, inputs_embeds=None,
                layout: Optional[TokenLayout] = None):
        """With a `layout`, returns only the real tokens' rows (LayerNorm and dropout skip padding)."""
        x = self.sum_embeddings(input_ids, token_type_ids, inputs_embeds)
        if layout is not None:
            x = layout.flatten(x)
        return self.dropout(self.LayerNorm(x))


class FastBertSelfAttention(BertSelfAttention):
    """Attention over a layout's blocks, Q, K and V from one matmul."""

    train = drop_copies_of_the_other_mode  # its cast fused Q/K/V copy

    def fused_qkv(self, dtype=None):
        """One (3 * hidden, hidden) projection: a single matmul for Q, K and V, in `dtype` if given.

        Concatenated on every call: a copy kept across training steps would go stale, since
        fused AdamW updates parameters without bumping their version counters. Cast before
        concatenating: the same values, half the bytes moved by the concatenation.
        """
        weights = [self.query.weight, self.key.weight, self.value.weight]
        biases = [self.query.bias, self.key.bias, self.value.bias]
        if dtype is not None and weights[0].dtype not in (dtype, torch.float64):  # autocast leaves float64 alone
            weights, biases = [w.to(dtype) for w in weights], [b.to(dtype) for b in biases]
        return torch.cat(weights), torch.cat(biases)

    def forward(self, x, layout: TokenLayout, output_attentions: bool = False):
        """x: (real tokens, hidden) rows; returns the same rows and, if asked, the probabilities."""
        H, D = self.num_heads, self.head_size
        dtype = eval_cast_dtype(x, self)
        if dtype is None or self.query.weight.dtype == dtype:
            autocast = torch.is_autocast_enabled(x.device.type)
            weight, bias = self.fused_qkv(torch.get_autocast_dtype(x.device.type) if autocast else None)
        else:
            params = (self.query.weight, self.key.weight, self.value.weight,
                      self.query.bias, self.key.bias, self.value.bias)
            weight, bias = cast_once(self, params, lambda: self.fused_qkv(dtype))
        dropout_p = self.dropout.p if self.training else 0.0
        outputs, probs = [], None
        for i, qkv in enumerate(layout.to_blocks(F.linear(x, weight, bias))):
            B, T = qkv.shape[:2]
            q, k, v = qkv.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, D)
            if not output_attentions and dropout_p == 0.0:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=layout.key_mask(i))
            else:
                y, p = attend(q, k, v, layout.key_mask(i, torch.float32), dropout_p, self.training)
                probs = p if output_attentions else None
            outputs.append(y.to(qkv.dtype).transpose(1, 2))
        return layout.from_blocks(outputs), probs


class FastBertModel(BertModel):
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_hidden_states=False, output_attentions=False, pool: bool = True) -> EncoderOutput:
        """As `BertModel.forward`, but padding positions of the returned states are zeros (never computed)."""
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:2]
        layout = TokenLayout(shape[0], shape[1], attention_mask, regroup=not output_attentions)
        x = self.embeddings(input_ids, token_type_ids, inputs_embeds, layout)
        last, hidden, attentions = self.encoder(x, layout, output_hidden_states, output_attentions)
        if hidden is not None:
            hidden = tuple(layout.pad(h) for h in hidden)
        last = layout.pad(last)
        return EncoderOutput(last, self.pooler(last) if pool else None, hidden, attentions)

    def watch_optimizer(self, optimizer: torch.optim.Optimizer):
        """Drop the cast evaluation weights after every step of `optimizer`; returns the hook's handle.

        Needed when an optimizer that bumps no version counter (fused AdamW) steps the model between
        two evaluations under autocast with neither a train() nor a graph-building forward between.
        """
        return optimizer.register_step_post_hook(lambda optimizer, args, kwargs: drop_cast_weights(self))

    def prepare_for_data_parallel(self) -> "FastBertModel":
        """Embedding tables' gradients through autograd, for DDP to average (`FastEmbedding`)."""
        rows_backward(self, False)
        return self


FAST_CLASSES = {nn.Linear: CastOnceLinear, nn.Dropout: FastDropout, nn.Embedding: FastEmbedding,
                BertEmbeddings: FastBertEmbeddings,
                BertSelfAttention: FastBertSelfAttention, BertModel: FastBertModel}


def use_fast_path(model: BertModel) -> BertModel:
    """Give `model`'s modules their fast forwards, in place; parameters and buffers are untouched.

    Each fast class subclasses its reference class and adds methods only, no state, so the
    class of an existing module can simply be replaced (as torch.nn.utils.parametrize does).
    """
    for module in model.modules():
        module.__class__ = FAST_CLASSES.get(type(module), type(module))
    return model

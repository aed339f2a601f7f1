"""The fast path's drop-in layers: `nn.Dropout`, `nn.Linear` and `nn.Embedding` with the same parameters and
cheaper forwards or backwards on a CPU (`fast.py` swaps them into a model).

- `FastDropout` draws its CPU mask four elements per 64-bit random number (`keep_mask`).
- `CastOnceLinear` casts its weights to autocast's low precision once per evaluation, not per batch
  (`cast_once`, also used by fast.py's fused attention projections).
- `FastEmbedding`'s backward adds the looked-up rows into a kept `.grad` buffer instead of making a
  dense (vocab, hidden) gradient every step.

tests/minbert/test_fast.py holds each to the stock layer.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

# ----------------------------------------------------------------------------------------- dropout

def keep_mask(shape, p: float, dtype, device) -> tuple:
    """(mask, kept): 1 where an element is kept and 0 where dropped, in `dtype`; and P(keep).

    torch's CPU bernoulli_ draws one Mersenne-Twister number per element, a large share of a
    training forward; one 64-bit draw here gives four 16-bit uniforms (so P(drop) =
    round(p * 2**16) / 2**16), from the same seeded default generator. The mask is made with
    vectorised int16 arithmetic because bool tensors go through scalar loops on CPU.
    """
    n = math.prod(shape)
    threshold = round(p * 65536) - 32768   # dropped where the int16 draw < threshold
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-2 ** 63, None)
    bits = bits.view(torch.int16)[:n].view(shape)
    keep = bits.clamp_(threshold - 1, threshold).sub_(threshold - 1).to(dtype)
    return keep, 1.0 - (threshold + 32768) / 65536


class _Dropout(torch.autograd.Function):
    """Inverted dropout that saves only its mask for backward."""

    @staticmethod
    def forward(ctx, x, p):
        keep, kept = keep_mask(x.shape, p, x.dtype, x.device)
        if x.dtype == torch.float32:
            ctx.scale = None
            keep.mul_(1.0 / kept)  # a scaled mask: one multiply fewer each way
        else:
            ctx.scale = 1.0 / kept  # bf16 would round 1/0.9 0.16% low: scale in float, per element
        ctx.save_for_backward(keep)
        out = x * keep
        return out if ctx.scale is None else out.mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        grad = grad * keep
        return (grad if ctx.scale is None else grad.mul_(ctx.scale)), None


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p <= 0:
        return x
    if x.device.type != "cpu" or not 0 < round(p * 65536) < 65536:  # p beyond 16-bit resolution
        return F.dropout(x, p, training)
    return _Dropout.apply(x, p)


class FastDropout(nn.Dropout):
    """nn.Dropout with the cheaper CPU mask."""

    def forward(self, x):
        return dropout(x, self.p, self.training)


# ------------------------------------------------------------------------------ evaluation weights

def eval_cast_dtype(x: torch.Tensor, module: nn.Module):
    """The autocast dtype when `module` evaluates (eval mode, no grad) under autocast; else None."""
    if module.training:
        return None
    if torch.is_grad_enabled():  # a training step in eval mode: the weights are about to change
        module.__dict__.pop("_eval_weights", None)
        return None
    if not torch.is_autocast_enabled(x.device.type):
        return None
    return torch.get_autocast_dtype(x.device.type)


def cast_once(module: nn.Module, tensors: tuple, make):
    """`make()` (low-precision weights), reused until one of `tensors` changes or the cache is dropped.

    Autocast casts every weight on every call and keeps its cache for one autocast block only,
    so evaluation batch after batch would re-cast all weights. The result is the same tensors
    autocast would make, so the outputs are bitwise the same. A change is seen through the
    tensors' version counters (in-place edits, load_state_dict) and storage; an optimizer step
    needs `FastBertModel.watch_optimizer`, since fused AdamW does not bump version counters.
    Weights made under `torch.inference_mode()` (a model loaded there to predict) have no version
    counter: for them the storage alone is the stamp.
    """
    stamp = tuple((0 if t.is_inference() else t._version, t.data_ptr()) for t in tensors)
    cached = module.__dict__.get("_eval_weights")
    if cached is None or cached[0] != stamp:
        cached = module.__dict__["_eval_weights"] = (stamp, make())
    return cached[1]


def drop_copies_of_the_other_mode(self, mode: bool = True):
    """`train(mode)` that forgets what only the other mode uses: training drops the cast evaluation
    weights, evaluation drops the kept gradient buffer. Calling train() again in training (as a
    loop may every step) keeps the buffer."""
    self.__dict__.pop("_eval_weights" if mode else "_grad_buffer", None)
    return nn.Module.train(self, mode)


def drop_cast_weights(model: nn.Module) -> None:
    """Forget the cast evaluation weights of every module of `model`; they are made again when used."""
    for module in model.modules():
        module.__dict__.pop("_eval_weights", None)


class CastOnceLinear(nn.Linear):
    """nn.Linear whose low-precision weights are cast once per evaluation, not once per batch."""

    train = drop_copies_of_the_other_mode

    def forward(self, x):
        dtype = eval_cast_dtype(x, self)
        if dtype is None or self.weight.dtype == dtype:
            return super().forward(x)
        w, b = cast_once(self, (self.weight, self.bias), lambda: (self.weight.to(dtype), self.bias.to(dtype)))
        return F.linear(x, w, b)


# ------------------------------------------------------------------------------ embedding gradient

class _LookupAddingRows(torch.autograd.Function):
    """An embedding lookup whose backward adds its rows into the table's `.grad` in place.

    The stock backward returns a fresh dense (vocab, hidden) gradient every step (47 MB for
    MiniLM, 94 MB for bert-base): too large for malloc to keep, so every step maps new pages
    that the kernel zeroes, page by page, several times the cost of zeroing memory already
    mapped. The gradient returned for the weight is None (autograd leaves `.grad` alone); the
    values land in `.grad` as autograd would put them there (created, or accumulated).
    """

    @staticmethod
    def forward(ctx, ids, weight, table):
        ctx.table = table
        ctx.save_for_backward(ids)
        return F.embedding(ids, weight, table.padding_idx)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        ctx.table.add_to_grad(ids, grad)
        return None, None, None


class FastEmbedding(nn.Embedding):
    """nn.Embedding whose training backward reuses one `.grad` buffer from step to step.

    When `.grad` is None (after zero_grad), the next backward zeroes the kept buffer and makes
    it `.grad` again; so a gradient held on to past `zero_grad` changes under its holder (copy
    it to keep it). Used only on CPU (CUDA's caching allocator keeps its blocks), in training
    mode with grad enabled and `.rows_backward` True (`FastBertModel.prepare_for_data_parallel`
    sets it False: DDP must receive every gradient from autograd).
    """

    rows_backward = True
    train = drop_copies_of_the_other_mode

    def forward(self, ids):
        if (not self.rows_backward or not self.training or self.weight.device.type != "cpu"
                or not self.weight.requires_grad
                or not torch.is_grad_enabled() or self.max_norm is not None or self.sparse
                or self.scale_grad_by_freq):
            return super().forward(ids)
        return _LookupAddingRows.apply(ids, self.weight, self)

    def add_to_grad(self, ids, grad):
        w = self.weight
        ids, grad = ids.reshape(-1), grad.reshape(-1, w.shape[1])
        if self.padding_idx is not None:  # the padding row never learns, as in F.embedding
            keep = ids != self.padding_idx
            ids, grad = ids[keep], grad[keep]
        if w.grad is None:
            kept = self.__dict__.get("_grad_buffer")
            if kept is None or kept.shape != w.shape or kept.dtype != w.dtype or kept.device != w.device:
                kept = self.__dict__["_grad_buffer"] = torch.zeros_like(w)
            else:
                kept.zero_()  # whatever wrote into it since (clipping, gradient surgery)
            w.grad = kept
        w.grad.index_add_(0, ids, grad.to(w.grad.dtype))


def rows_backward(model: nn.Module, enabled: bool) -> None:
    """Turn `FastEmbedding`'s in-place row gradients on or off for every table of `model`."""
    for module in model.modules():
        if isinstance(module, FastEmbedding):
            module.rows_backward = enabled

"""The MLM head's fast path: `mlm.py`'s model with faster forwards, as `fast.py` is the encoder's.

`use_fast_mlm` (called by `build.build_mlm_model`, beside `build_model`) gives the encoder the fast forwards of
`fast.py` and the model the class below, which only overrides methods: the parameters, their tying, the state
dict and the loading code are the reference's. What changes:

- The positions to predict are gathered straight from the fast encoder's rows of real tokens
  (`TokenLayout.row_of`), never padded back to (B, T, hidden) first.
- Their count M is rounded up to a multiple of `fast.ROW_MULTIPLE` with copies of the first one, ignored by the
  loss: M changes with every dynamically masked batch, and oneDNN compiles a bf16 matmul kernel per new shape.
- In training, `compute_loss` runs the decoder and the cross-entropy as one operation (`LinearCrossEntropy`):
  the gradient of the logits, softmax - one-hot, is made in the forward, in place of the logits, in the matmul
  precision, and the backward is the two matmuls alone. The stock path keeps the logits, casts them to float32
  for the loss (autocast), takes log_softmax there, and in the backward makes a zeroed (M, V) float32 gradient,
  scatters into it, and runs log_softmax's backward and the cast's: several more passes over the largest
  tensor of the step.

tests/minbert/test_mlm.py holds this path to the reference: logits, loss, accuracy and every gradient.
"""
import torch
import torch.nn.functional as F

from .fast import ROW_MULTIPLE, TokenLayout, use_fast_path
from .fast_layers import drop_cast_weights
from .mlm import IGNORE_INDEX, BertForMaskedLM, MaskedLMOutput, masked_lm_output

CHUNK_ROWS = 64  # rows of float32 logits the fused loss makes at once: 8 MB at bert-base-uncased's vocabulary


class LinearCrossEntropy(torch.autograd.Function):
    """loss = mean over rows with a target of cross_entropy(h @ weight.T + bias, targets), and the argmax's hits.

    h: (M, hidden) in the matmul dtype; weight (V, hidden), bias (V,): the parameters; targets (M,), IGNORE_INDEX
    at rows to leave out (their gradient is zero). Matmuls run in `dtype` (autocast's, or float32), the softmax
    in float32. Returns (loss, correct count); only the loss has a gradient.
    """

    @staticmethod
    def forward(ctx, h, weight, bias, targets, dtype):
        with torch.autocast(h.device.type, enabled=False):
            w, h = weight.to(dtype), h.to(dtype)
            logits = h @ w.t()                                 # (M, V) in dtype; the bias is added in float32 below
            kept = targets != IGNORE_INDEX                                           # (M,)
            count = max(int(kept.sum()), 1)
            safe = targets.clamp(min=0)[:, None]                                     # (M, 1), ignored rows: any
            scale = (kept / count)[:, None]                                          # (M, 1): the mean; ignored: 0
            loss, correct = logits.new_zeros((), dtype=torch.float32), targets.new_zeros(())
            for lo in range(0, len(logits), CHUNK_ROWS):
                rows = slice(lo, lo + CHUNK_ROWS)
                log_p = (logits[rows] + bias).log_softmax(-1)                        # (rows, V) float32
                loss -= (log_p.gather(1, safe[rows]).squeeze(1) * kept[rows]).sum()
                correct += ((log_p.argmax(-1) == targets[rows]) & kept[rows]).sum()
                g = log_p.exp_()                                                     # softmax, in place
                g.scatter_add_(1, safe[rows], torch.full_like(g[:, :1], -1.0))       # - one-hot
                torch.mul(g, scale[rows], out=logits[rows])                          # d loss / d logits, in dtype
        ctx.save_for_backward(h, w, logits)
        ctx.dtypes = (weight.dtype, bias.dtype)
        ctx.mark_non_differentiable(correct)
        return loss / count, correct

    @staticmethod
    def backward(ctx, grad_loss, _):
        h, w, g = ctx.saved_tensors
        with torch.autocast(h.device.type, enabled=False):
            g = g * grad_loss.to(g.dtype) if grad_loss.item() != 1.0 else g
            grad_h = g @ w                                                           # (M, hidden)
            grad_w = (g.t() @ h).to(ctx.dtypes[0])                                   # (V, hidden)
            grad_b = g.sum(0, dtype=torch.float32).to(ctx.dtypes[1])                 # (V,)
        return grad_h, grad_w, grad_b, None, None


class FastBertForMaskedLM(BertForMaskedLM):
    def masked_rows(self, input_ids, attention_mask, token_type_ids, masked_positions):
        """(M', hidden) states at the positions to predict, M' = M rounded up to a multiple of ROW_MULTIPLE (the
        spare rows repeat the first), and M; or the (B, T, hidden) states and None for masked_positions None."""
        bert = self.bert
        layout = TokenLayout(input_ids.shape[0], input_ids.shape[1], attention_mask)
        rows = bert.encoder(bert.embeddings(input_ids, token_type_ids, None, layout), layout)[0]  # (rows, hidden)
        if masked_positions is None:
            return layout.pad(rows), None
        flat = masked_positions.reshape(-1).nonzero().squeeze(1)                     # (M,)
        count = len(flat)
        if count:
            flat = torch.cat([flat, flat[:1].expand(-count % ROW_MULTIPLE)])
        return rows.index_select(0, layout.row_of(flat)), count                      # (M', hidden)

    def masked_states(self, input_ids, attention_mask, token_type_ids, masked_positions):
        states, count = self.masked_rows(input_ids, attention_mask, token_type_ids, masked_positions)
        return states if count is None else states[:count]

    def compute_loss(self, input_ids, attention_mask, labels, token_type_ids=None) -> MaskedLMOutput:
        """As the reference's; in training with gradients, through the fused decoder and loss (logits None)."""
        masked = labels != IGNORE_INDEX
        states, count = self.masked_rows(input_ids, attention_mask, token_type_ids, masked)  # (M', hidden)
        targets = labels[masked]                                                     # (M,)
        if not (self.training and torch.is_grad_enabled()) or count == 0:
            return masked_lm_output(self.cls(states[:count]), targets)
        targets = F.pad(targets, (0, len(states) - count), value=IGNORE_INDEX)       # (M',)
        head = self.cls.predictions
        h = head.transform(states)                                                   # (M', hidden)
        device = h.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
        loss, correct = LinearCrossEntropy.apply(h, head.decoder.weight, head.bias, targets, dtype)
        return MaskedLMOutput(loss, correct, count)


    def watch_optimizer(self, optimizer: torch.optim.Optimizer):
        """Drop the cast evaluation weights of the encoder and the head after every step of `optimizer`
        (`FastBertModel.watch_optimizer`, for the whole model); returns the hook's handle."""
        return optimizer.register_step_post_hook(lambda optimizer, args, kwargs: drop_cast_weights(self))


def use_fast_mlm(model: BertForMaskedLM) -> BertForMaskedLM:
    """Give `model` (encoder and head) the fast forwards, in place; parameters and their tying are untouched."""
    use_fast_path(model.bert)
    use_fast_path(model.cls)  # the head's Linear layers: fast.py's drop-in ones
    model.__class__ = FastBertForMaskedLM
    return model

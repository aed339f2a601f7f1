"""BERT's masked-language-model head (Devlin et al., 2019), the reference: the encoder of `model.py` with the
head that predicts masked tokens, laid out and named as transformers' `BertForMaskedLM`.

    encode     BertModel (its pooler kept for the exported encoder, but not run: no next-sentence task)
    transform  dense hidden -> hidden, activation (config.hidden_act), LayerNorm     BertPredictionHeadTransform
    decode     logits = h @ word_embeddings.T + bias                                 BertLMPredictionHead

State-dict keys are the checkpoint keys of transformers' class: `bert.embeddings.word_embeddings.weight`,
`cls.predictions.transform.dense.weight`, `cls.predictions.transform.LayerNorm.weight`, `cls.predictions.bias`
and the tied `cls.predictions.decoder.weight` / `.bias`, which *are* the word embeddings and the bias (the same
Parameter objects, as transformers ties them), so an optimizer steps each once and they cannot drift apart.

The vocabulary projection, for a small model the largest matmul of a training step, runs only at the
positions to predict (`forward(..., masked_positions)`): about 15% of the tokens in pretraining, where
transformers computes it at every position. `BertForMaskedLM(config)` is always this reference;
`build.build_mlm_model` and `loading.mlm_from_pretrained` give the fast path of `fast_mlm.py` on a CPU.
Shapes: B batch, T tokens, M positions to predict, V vocabulary size.
"""
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .model import ACT2FN, BertModel, attention_keys

IGNORE_INDEX = -100  # label of a position not to predict (transformers' and cross_entropy's convention)
TIED = {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias"}  # key -> the key of the tensor it is


@dataclass
class MaskedLMOutput:
    loss: torch.Tensor                     # (): mean cross-entropy over the M predicted tokens (0 when M is 0)
    correct: torch.Tensor                  # (): how many of them the argmax gets right (no gradient)
    count: int                             # M
    logits: Optional[torch.Tensor] = None  # (M, V); None from the fast path's fused training loss

    @property
    def accuracy(self) -> float:
        """Masked-token accuracy of this batch (nan when nothing was masked)."""
        return float(self.correct) / self.count if self.count else float("nan")


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, h):
        return self.LayerNorm(self.transform_act_fn(self.dense(h)))             # (..., hidden)


class BertLMPredictionHead(nn.Module):
    """transform, then the decoder: the word embeddings as output weights, plus a bias of its own per token."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Parameter):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.tie(word_embeddings)

    def tie(self, word_embeddings: nn.Parameter):
        self.decoder.weight = word_embeddings                                    # (V, hidden), the same Parameter
        self.decoder.bias = self.bias                                            # (V,), the same Parameter

    def forward(self, h):
        return self.decoder(self.transform(h))                                   # (..., V)


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Parameter):
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)

    def forward(self, h):
        return self.predictions(h)


class BertForMaskedLM(nn.Module):
    def __init__(self, config: BertConfig, bert: Optional[BertModel] = None):
        """A new model of `config` (BERT's initialisation), or `bert`'s encoder with a new head."""
        super().__init__()
        self.config = config
        self.bert = bert if bert is not None else BertModel(config)
        self.cls = BertOnlyMLMHead(config, self.bert.embeddings.word_embeddings.weight)
        self.init_head()
        # Trained by no objective here (BERT trained it by next-sentence prediction, left out), kept so that the
        # exported encoder is complete; frozen so that optimizers and DDP see no parameter without a gradient.
        self.bert.pooler.requires_grad_(False)
        self.source = None  # set by loading.mlm_from_pretrained: what was loaded, for run records

    def init_head(self):
        """BERT's initialisation of the head's own tensors (the decoder weight is the embeddings, untouched)."""
        self.cls.predictions.transform.apply(self.bert._init_weights)
        nn.init.zeros_(self.cls.predictions.bias)

    @property
    def num_layers(self) -> int:
        return self.bert.num_layers

    def masked_states(self, input_ids, attention_mask, token_type_ids, masked_positions):
        """The encoder's last states at the positions to predict: (M, hidden), or (B, T, hidden) for None."""
        x = self.bert.embeddings(input_ids, token_type_ids)                      # (B, T, hidden)
        last = self.bert.encoder(x, attention_keys(attention_mask))[0]           # (B, T, hidden)
        return last if masked_positions is None else last[masked_positions]      # (M, hidden)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, masked_positions=None):
        """Logits over the vocabulary at the positions to predict.

        input_ids, attention_mask (1 real token, 0 padding; None: all real), token_type_ids (None: segment 0):
        (B, T). masked_positions: (B, T) bool, True where a token is to be predicted (real tokens only), or None
        for every position. Returns (M, V) logits, the True positions in row-major order (the order of
        `labels[masked_positions]`), or (B, T, V) when masked_positions is None (fill-mask, parity checks).
        """
        return self.cls(self.masked_states(input_ids, attention_mask, token_type_ids, masked_positions))

    def compute_loss(self, input_ids, attention_mask, labels, token_type_ids=None) -> MaskedLMOutput:
        """The MLM objective of one batch. labels: (B, T), the original token id where a token is to be
        predicted and IGNORE_INDEX (-100) everywhere else, as transformers' `labels`. Returns the mean
        cross-entropy over the predicted tokens, how many the argmax gets right and how many there are."""
        masked = labels != IGNORE_INDEX                                          # (B, T)
        logits = self(input_ids, attention_mask, token_type_ids, masked)         # (M, V)
        return masked_lm_output(logits, labels[masked])

    def watch_optimizer(self, optimizer: torch.optim.Optimizer):
        """The encoder's training hook (`BertModel.watch_optimizer`); the head keeps nothing derived."""
        return self.bert.watch_optimizer(optimizer)

    def prepare_for_data_parallel(self) -> "BertForMaskedLM":
        self.bert.prepare_for_data_parallel()
        return self


def masked_lm_output(logits, targets) -> MaskedLMOutput:
    """logits (M, V), targets (M,) -> the loss (float32 whatever the autocast), correct count and M."""
    count = targets.numel()
    if count == 0:  # cross_entropy's mean over nothing is nan; a batch without a masked token teaches nothing
        return MaskedLMOutput(logits.sum() * 0.0, torch.zeros((), dtype=torch.long), 0, logits)
    loss = F.cross_entropy(logits.float(), targets)
    correct = (logits.detach().argmax(-1) == targets).sum()
    return MaskedLMOutput(loss, correct, count, logits)

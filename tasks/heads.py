"""One shared minBERT encoder and a small head per task.

A batch for a task is a dict of tensors: in `cross` pair mode (and for SST) one
sequence (`input_ids`, `token_type_ids`, `attention_mask`); in `siamese` mode
two sequences, prefixed `a_` and `b_`. Each task's head is of the head kind its
registry record names (`tasks/head_kinds.py`), in one of two head designs
(`HEAD_DESIGNS`): this project's (`default`: linear layers) or those of the
CS224N report "Freeze Your Layers" (`report`: an MLP for single sentences, a
bilinear form and a projected cosine for siamese pairs). Heads return raw
outputs, and `task_spec` turns them into losses, predictions and the
divergences SMART needs, as the head kind's record says.
"""
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from minbert import BertModel

from .head_kinds import Reading
from .registry import MULTITASK_TASKS, TaskConfig, get_task

SEQ_KEYS = ("input_ids", "token_type_ids", "attention_mask")
# The sentence vector of a single sequence: the mean of the token states, BERT's pooler (a tanh
# layer over the [CLS] state, what the course's classifier reads), or the raw [CLS] state.
POOLINGS = ("mean", "pooler", "cls-token")
HEAD_DESIGNS = ("default", "report")  # the designs of the task heads (--task-heads)


def sequences(batch: dict) -> list[dict]:
    """The one or two encoder inputs a batch holds."""
    if "input_ids" in batch:
        return [{k: batch[k] for k in SEQ_KEYS}]
    return [{k: batch[f"{side}_{k}"] for k in SEQ_KEYS} for side in ("a", "b")]


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(hidden.dtype)[..., None]
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def pool_tokens(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """A sentence vector from token states: "mean" of the real tokens, or the "cls-token" state."""
    if pooling == "mean":
        return mean_pool(hidden, mask)
    if pooling == "cls-token":
        return hidden[:, 0]
    raise ValueError(f"pooling {pooling!r} is not a pooling of token states")


def report_heads_problem(tasks, pair_mode: str) -> Optional[str]:
    """Why the report's heads cannot serve these tasks in this pair mode, or None."""
    for task in tasks:
        cfg = get_task(task)
        if cfg.is_pair and cfg.kind.report_pair_head is None:
            return f"the report has no head for {task}, a sentence-pair task with {cfg.num_classes} classes"
        if cfg.is_pair and pair_mode != "siamese":
            return (f"the report's head for {task} compares two sentence vectors: add --pair-mode siamese "
                    f"(or leave {task} out of --tasks)")
    return None


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Sentence-BERT's features of a pair encoded one sentence at a time: [u, v, |u - v|, u * v]."""
    return torch.cat([u, v, (u - v).abs(), u * v], -1)


def _check_design(tasks, pair_mode: str, pooling: str, task_heads: str) -> None:
    """ValueError naming the first of MultitaskModel's options that is not one it knows, or that the tasks
    cannot take."""
    if pair_mode not in ("cross", "siamese"):
        raise ValueError(f"unknown pair mode {pair_mode!r}")
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}")
    if task_heads not in HEAD_DESIGNS:
        raise ValueError(f"unknown task-head design {task_heads!r}; "
                         f"expected one of {', '.join(HEAD_DESIGNS)}")
    if task_heads == "report" and report_heads_problem(tasks, pair_mode):
        raise ValueError(report_heads_problem(tasks, pair_mode))


class MultitaskModel(nn.Module):
    def __init__(self, encoder: BertModel, tasks=MULTITASK_TASKS, pair_mode: str = "cross",
                 pooling: str = "mean", dropout: float = 0.1, task_heads: str = "default"):
        super().__init__()
        _check_design(tasks, pair_mode, pooling, task_heads)
        self.encoder = encoder
        self.tasks = tuple(tasks)
        self.pair_mode = pair_mode
        self.pooling = pooling
        self.task_heads = task_heads
        self.dropout = nn.Dropout(dropout)
        h = encoder.config.hidden_size
        make = _report_design_head if task_heads == "report" else _default_design_head
        heads = {}
        for task in self.tasks:
            head = make(get_task(task), h, pair_mode)
            if head is not None:
                heads[task] = head
        self.heads = nn.ModuleDict(heads)
        for module in self.heads.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=encoder.config.initializer_range)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for module in self.heads.modules():  # after the loop above, which would draw its projections again
            if isinstance(module, ProjectedCosineHead):
                module.start_as_the_cosine()

    def embed_inputs(self, batch: dict) -> list[torch.Tensor]:
        """Word embeddings of each sequence: what SMART perturbs."""
        return [self.encoder.embeddings.word_embeddings(seq["input_ids"]) for seq in sequences(batch)]

    def sentence_vector(self, seq: dict, inputs_embeds: Optional[torch.Tensor] = None) -> torch.Tensor:
        out = self.encoder(input_ids=None if inputs_embeds is not None else seq["input_ids"],
                           attention_mask=seq["attention_mask"], token_type_ids=seq["token_type_ids"],
                           inputs_embeds=inputs_embeds, pool=self.pooling == "pooler")  # the pooler only if read
        if self.pooling == "pooler":
            return out.pooler_output
        return pool_tokens(out.last_hidden_state, seq["attention_mask"], self.pooling)

    def forward(self, task: str, batch: dict, inputs_embeds: Optional[list] = None) -> torch.Tensor:
        seqs = sequences(batch)
        embeds = inputs_embeds or [None] * len(seqs)
        if len(seqs) == 1:
            return self.heads[task](self.dropout(self.sentence_vector(seqs[0], embeds[0]))).squeeze(-1)
        if self.pair_mode != "siamese":
            raise ValueError("a two-sequence batch needs pair_mode='siamese'")
        if self.task_heads == "report":  # each sentence's vector as --pooling makes it (the report: pooled [CLS])
            u, v = (self.sentence_vector(s, e) for s, e in zip(seqs, embeds))
            return self.heads[task](self.dropout(u), self.dropout(v))
        # Siamese: Sentence-BERT's mean pooling, whatever the single-sentence pooling is.
        u, v = (mean_pool(self.encoder(input_ids=None if e is not None else s["input_ids"],
                                       attention_mask=s["attention_mask"],
                                       token_type_ids=s["token_type_ids"], inputs_embeds=e,
                                       pool=False).last_hidden_state,
                          s["attention_mask"]) for s, e in zip(seqs, embeds))
        if get_task(task).kind.siamese_cosine:
            return F.cosine_similarity(u, v, dim=-1)
        return self.heads[task](self.dropout(pair_features(u, v))).squeeze(-1)


def _default_design_head(cfg: TaskConfig, hidden: int, pair_mode: str) -> Optional[nn.Linear]:
    """A linear layer on the sentence vector; siamese pairs see Sentence-BERT's [u, v, |u-v|, u*v]."""
    siamese_pair = cfg.is_pair and pair_mode == "siamese"
    if cfg.kind.siamese_cosine and siamese_pair:
        return None  # the score is the cosine itself: no parameters
    width = 4 * hidden if siamese_pair else hidden
    return nn.Linear(width, cfg.kind.outputs(cfg))


class MLPHead(nn.Sequential):
    """The report's head on one sentence vector: a 2-layer MLP with a GELU, as wide as the encoder."""

    def __init__(self, hidden: int, outputs: int):
        super().__init__(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, outputs))


class BilinearPairHead(nn.Module):
    """The report's paraphrase head: one logit (W1 u + b)^T (W2 v + b) from two sentence vectors; b is one bias
    shared by both projections, as the report writes it."""

    def __init__(self, hidden: int):
        super().__init__()
        self.first, self.second = nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden, bias=False)
        self.bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return ((self.first(u) + self.bias) * (self.second(v) + self.bias)).sum(-1)


class ProjectedCosineHead(nn.Module):
    """The report's similarity head: cos(W1 u, W2 v); the score is 5 * relu of it (`task_spec`)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.first, self.second = nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden, bias=False)

    @torch.no_grad()
    def start_as_the_cosine(self):
        """W1 = W2 = I: the head starts as the sentence vectors' own cosine, and learns from there.

        From two independent random projections, cos(W1 u, W2 v) starts near 0 for every pair,
        relu passes no gradient for the pairs below 0, and W1 and W2 must first be brought into
        line: with them, STS ended at 0.35 Pearson after 120 steps of batch 16 (fraction 0.25,
        every layer trained), where the sentence encoder's plain cosine gives 0.84 untrained. The
        report does not say how it initialised them; this is this project's choice.
        """
        nn.init.eye_(self.first.weight)
        nn.init.eye_(self.second.weight)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.cosine_similarity(self.first(u), self.second(v), dim=-1)


def _report_design_head(cfg: TaskConfig, hidden: int, pair_mode: str) -> nn.Module:
    """The report's heads: an MLP on one sentence vector; on two (siamese pairs) a bilinear logit, or for a
    score the projected cosine. `report_heads_problem` has ruled out the pairs they cannot serve."""
    if not cfg.is_pair:
        return MLPHead(hidden, cfg.kind.outputs(cfg))
    return REPORT_PAIR_HEADS[cfg.kind.report_pair_head](hidden)


REPORT_PAIR_HEADS = {"bilinear": BilinearPairHead, "projected-cosine": ProjectedCosineHead}


@dataclass(frozen=True)
class TaskSpec:
    name: str
    loss: Callable          # (outputs, labels) -> scalar
    predict: Callable       # outputs -> values written to prediction files
    divergence: Callable    # (outputs, other outputs) -> scalar, for SMART
    probabilities: Optional[Callable] = None  # outputs -> each class's probability, or P(1); None for a score


def task_spec(task: str, pair_mode: str = "cross", task_heads: str = "default") -> TaskSpec:
    """Loss, prediction and SMART divergence of the task's head kind, for heads of this pair mode and design."""
    cfg = get_task(task)
    kind = cfg.kind
    low, high = map(float, cfg.label_range)
    reading = Reading(low, high, siamese=cfg.is_pair and pair_mode == "siamese", report=task_heads == "report")
    return TaskSpec(task, lambda o, y: kind.loss(o, y, reading), lambda o: kind.predict(o, reading), kind.divergence,
                    kind.probabilities)

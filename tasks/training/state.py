"""A run's state: `Run` (everything `build_run` makes, once) and `TrainState` (where the run is; checkpointed)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np
import torch
from torch import nn

from ..config import TrainConfig
from ..heads import MultitaskModel
from ..inputs import RunInputs
from .samplers import Sampler
from .smart import Smart

if TYPE_CHECKING:
    from .outputs import Outputs


@dataclass
class TrainState:
    """Where a run is; every checkpoint keeps it as the JSON "progress"."""
    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    best: Optional[dict] = None                  # the history entry with the best overall dev score
    history: list = field(default_factory=list)  # one entry per evaluation: epoch, step, dev, elapsed_s
    nonfinite_skipped: int = 0
    scaler_skipped: int = 0                      # fp16 steps the gradient scaler skipped (overflow)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "TrainState":
        return cls(**json.loads(text))

    def evaluated(self) -> bool:
        """The dev scores of the current step are in the history (a resumed finished run)."""
        return bool(self.history) and self.history[-1]["step"] == self.global_step


@dataclass
class StepInfo:
    batch: dict                 # task -> the step's example indices in its training split
    losses: Optional[dict]      # the values logged; None for a skipped (non-finite) step

    @property
    def examples(self) -> int:
        return sum(len(indices) for indices in self.batch.values())


@dataclass
class Run:
    """One fine-tuning, built once by `build_run`; only `state` (and the weights) move."""
    config: TrainConfig
    inputs: RunInputs
    model: MultitaskModel
    train: dict                  # task -> its training split (the seeded fraction of it)
    sampler: Sampler
    sampler_name: str
    steps_per_epoch: int
    total_steps: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    smart: Optional[Smart]
    shared: list                 # the encoder's trainable parameters: what gradient surgery combines
    surgery_rng: np.random.Generator
    loss_fn: nn.Module           # TaskLoss; under torchrun wrapped in DistributedDataParallel
    outputs: Outputs
    callbacks: list              # the outputs, the console's progress, the caller's
    state: TrainState = field(default_factory=TrainState)
    best_predictions: Optional[dict] = None  # (task, split) -> the best evaluation's predictions, in this process
    started: float = 0.0         # time.time() when this process began training: history's elapsed_s
    scaler: torch.amp.GradScaler = field(default_factory=lambda: torch.amp.GradScaler("cpu", enabled=False))
    # fp16's loss scaling (step.py); disabled, it passes everything through

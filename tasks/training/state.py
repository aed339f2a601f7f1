"""A run's state: `Run` (everything `build_run` makes, once, with the callbacks that take part) and `TrainState`
(where the run is; checkpointed)."""
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import nn

from ..config import TrainConfig
from ..inputs import RunInputs
from .averaging import Averages
from .graphs import StepGraphs
from .job import Job
from .reads import PendingLogs
from .samplers import Sampler
from .smart import Smart


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
    stop_reason: Optional[str] = None            # why a callback ended the run before its last step (request_stop)
    task_best: dict = field(default_factory=dict)  # --per-task-best: task -> its best evaluation's epoch, step, dev

    def to_json(self) -> str:
        saved = dataclasses.asdict(self)
        if saved["stop_reason"] is None:  # a run that was not stopped keeps the checkpoint it always had
            del saved["stop_reason"]
        if not saved["task_best"]:  # as one without --per-task-best
            del saved["task_best"]
        return json.dumps(saved)

    @classmethod
    def from_json(cls, text: str) -> "TrainState":
        return cls(**json.loads(text))

    def evaluated(self) -> bool:
        """The dev scores of the current step are in the history (a resumed finished run)."""
        return bool(self.history) and self.history[-1]["step"] == self.global_step

    def best_is_current(self) -> bool:
        """The model's weights are the best evaluation's: nothing to put back when the run finishes."""
        return self.best is not None and self.best["step"] == self.global_step


@dataclass
class StepInfo:
    batch: dict                 # task -> the step's example indices in its training split
    losses: Optional[dict]      # the values logged, on the device until read (Callback.on_losses has them read);
    #                             None for a skipped (non-finite) step

    @property
    def examples(self) -> int:
        return sum(len(indices) for indices in self.batch.values())


@dataclass
class Run:
    """One fine-tuning, built once by `build_run`; only `state` (and the weights) move.

    `callbacks` take part in the run as peers (callbacks.py's `Callback`): each hook goes to each, in order.
    A callback ends the run with `request_stop` and logs a value beside the run's curves with `log`."""
    config: TrainConfig
    inputs: RunInputs
    model: nn.Module             # the job's: a MultitaskModel when fine-tuning
    train: dict                  # task -> its training data (a split's seeded fraction when fine-tuning)
    sampler: Sampler
    sampler_name: str
    steps_per_epoch: int
    total_steps: int             # the steps the schedule spans; the run ends there unless stopped earlier
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    smart: Optional[Smart]
    shared: list                 # the encoder's trainable parameters: what gradient surgery combines
    surgery_rng: np.random.Generator
    loss_fn: nn.Module           # TaskLoss; under torchrun wrapped in DistributedDataParallel
    callbacks: list = field(default_factory=list)
    folder: Optional[Path] = None  # the run folder (checkpoints, --resume); None for a run kept in memory
    state: TrainState = field(default_factory=TrainState)
    best_predictions: Optional[dict] = None  # (task, split) -> the best evaluation's Predicted, in this process
    started: float = 0.0         # time.time() when this process began training: history's elapsed_s
    scaler: torch.amp.GradScaler = field(default_factory=lambda: torch.amp.GradScaler("cpu", enabled=False))
    # fp16's loss scaling (step.py); disabled, it passes everything through
    job: Optional[Job] = None    # what the run trains (job.py): its model, batches, loss and evaluation
    pending: PendingLogs = field(default_factory=PendingLogs)  # logged values not yet read from the device
    prefetched: Optional[tuple] = None  # (step, its batches) built ahead on CUDA (step.py's prefetch)
    graphs: StepGraphs = field(default_factory=StepGraphs)  # graphed or eager, and the batches' widths (graphs.py)
    lr_reason: str = ""          # why config.lr is the rate it is (tasks.config.lr_for_model): config.json's "lr"
    averages: Optional[Averages] = None  # --average's copies of the weights (averaging.py); None: none kept
    task_best_predictions: dict = field(default_factory=dict)  # --per-task-best: task -> its best evaluation's
    #                                                            dev predictions {(task, "dev"): list}, in this process

    def notify(self, hook: str, *args) -> None:
        """Call `hook` on every callback that has it, in the list's order."""
        for callback in self.callbacks:
            method = getattr(callback, hook, None)  # a callback need not define every hook
            if method is not None:
                method(self, *args)

    def request_stop(self, reason: str) -> None:
        """End the run at the current step (after its dev evaluation, if one is due), as if it were the last;
        `reason` goes into the run's metrics ("stop_reason"). The first request stands."""
        if self.state.stop_reason is None:
            self.state.stop_reason = reason

    def log(self, name: str, value: float) -> None:
        """A value at the current step for the callbacks that log curves (`on_log`): TensorBoard's."""
        self.notify("on_log", name, value)

    def ending(self) -> bool:
        """No step follows the current one: the last step is done, or a callback asked the run to stop."""
        return self.state.global_step >= self.total_steps or self.state.stop_reason is not None

"""What a run trains: the one seam between `fit`'s loop and the job it drives.

The loop (loop.py: epochs, steps, evaluations, checkpoints and resume, signals, torchrun) and everything on
the run's callback list are the same for every job; a `Job` supplies only what differs: the model, the
steps' plan, the loss of one step's batch, the batches themselves, the evaluation and where a command's
run folder puts its results. `MultitaskJob` (build.py) fine-tunes the encoder with the task heads, the
default of every command; `tasks.pretraining`'s masked-language-model job is the other.
"""
from typing import Optional

from torch import nn


class Job:
    """Override every method; `score` is the evaluation metric whose highest value marks the best weights."""
    score = "overall"

    def build_model(self, config, inputs, encoder=None) -> nn.Module:
        """The model to train, on inputs.device: a copy, never the inputs' own (`encoder` replaces the one
        to start from)."""
        raise NotImplementedError

    def encoder_of(self, model: nn.Module):
        """The minbert.BertModel inside `model` (the optimizer hook and DDP's preparation go to it)."""
        raise NotImplementedError

    def plan(self, config, inputs) -> tuple:
        """(the training data by task name, the sampler's name, the sampler): what decides each epoch's steps."""
        raise NotImplementedError

    def loss(self, model: nn.Module, config, inputs, smart=None) -> nn.Module:
        """The module whose forward(task, batch, weight) gives (loss, {name: value to log}) for one batch:
        what DistributedDataParallel wraps under torchrun."""
        raise NotImplementedError

    def make_batch(self, run, task: str, indices: list) -> dict:
        """The tensors (on the run's device) of one task's share of a step: `indices` from the plan."""
        raise NotImplementedError

    def evaluate(self, run, show: bool) -> tuple:
        """(metrics of the current weights, predictions to keep with the best evaluation, or None)."""
        raise NotImplementedError

    def folder_callbacks(self, folder, command_options: Optional[dict] = None) -> list:
        """The callbacks of a command's run in `folder`: its curves, its files, its console."""
        raise NotImplementedError

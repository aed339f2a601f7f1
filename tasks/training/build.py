"""A run built once from its options: the model (frozen where asked), the data order, the optimizer and the
learning-rate schedule, seeded by the options' seed; then, under torchrun, the ranks set apart. What is built
is the job's (job.py): `MultitaskJob`, the task heads on the encoder, unless another is given."""
import copy
import dataclasses
import random
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

import minbert

from ..config import TrainConfig, lr_for_model
from ..distributed import rank_seed
from ..encoded import make_batch
from ..evaluation import evaluate
from ..heads import MultitaskModel, task_spec
from ..inputs import RunInputs, multitask_model, subsample_split
from ..schedules import lr_lambda
from .averaging import build_averages, early_weights_warning
from .graphs import StepGraphs, device_lr, graphed_loss, resolve_graphs
from .job import Job
from .outputs import folder_callbacks
from .samplers import build_sampler
from .smart import Smart
from .state import Run
from .step import TaskLoss


def build_multitask_model(config: TrainConfig, inputs: RunInputs,
                          encoder: Optional[minbert.BertModel] = None) -> MultitaskModel:
    encoder = copy.deepcopy(inputs.encoder if encoder is None else encoder)
    if config.freeze_until == "all":
        frozen = minbert.freeze_encoder(encoder)
    else:
        frozen = minbert.freeze_until(encoder, config.freeze_until)
        if config.freeze_until > encoder.num_layers:
            print(f"note: --freeze-until {config.freeze_until} is beyond the model's {encoder.num_layers} layers: "
                  f"the whole encoder is frozen (only the pooler and heads train; --freeze-until all freezes "
                  f"the pooler too)", file=sys.stderr)
    model = multitask_model(config, encoder, inputs.tasks)
    if config.dropout is not None:
        minbert.set_dropout(model, config.dropout)
    model.frozen_layers = frozen
    model = model.to(inputs.device)
    if config.compile:
        model.encoder.compile()  # in place: the state dict keeps its keys; compiled at the first forward
    return model


def make_optimizer(config: TrainConfig, model, graphs: StepGraphs = StepGraphs()):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if config.optimizer == "minbert":
        # the torch path's eps (torch.optim.AdamW's default), not the class's course default 1e-6
        return minbert.AdamW(groups, lr=config.lr, eps=1e-8)
    if graphs.graphed:  # the learning rate and the step counts on the device: nothing for the host to read
        device = next(model.parameters()).device
        return torch.optim.AdamW(groups, lr=device_lr(config.lr, graphs, device), fused=True, capturable=True)
    return torch.optim.AdamW(groups, lr=config.lr, fused=True)


def training_plan(config: TrainConfig, inputs: RunInputs) -> tuple:
    """The training splits (config's seeded fraction of each task's), the sampler's name and the sampler:
    what decides the steps of an epoch."""
    train = {t: subsample_split(inputs.data[t]["train"], config.data_fraction, config.seed) for t in inputs.tasks}
    sampler_name = "union" if config.surgery != "none" else config.sampler
    batch = config.batch_size * config.grad_accum  # the effective batch; step.py cuts it into micro-batches
    sampler = build_sampler(sampler_name, {t: s.lengths for t, s in train.items()}, batch,
                            config.seed, bucket=not config.no_bucketing, num_epochs=config.epochs)
    return train, sampler_name, sampler


class MultitaskJob(Job):
    """Fine-tuning: the encoder with a head per task, the tasks' training splits, their dev scores."""

    def build_model(self, config, inputs, encoder=None):
        return build_multitask_model(config, inputs, encoder)

    def encoder_of(self, model):
        return model.encoder

    def plan(self, config, inputs):
        return training_plan(config, inputs)

    def loss(self, model, config, inputs, smart=None):
        specs = {t: task_spec(t, config.pair_mode, config.task_heads) for t in inputs.tasks}
        return TaskLoss(model, specs, smart, inputs.precision)

    def make_batch(self, run, task, indices):
        return make_batch(run.train[task], indices, run.inputs.tokenizer, run.inputs.device, run.graphs.widths)

    def evaluate(self, run, show):
        predictions = {}
        metrics = evaluate(run.model, run.inputs, run.config.eval_batch_size, show=show, predictions=predictions)
        return metrics, predictions

    def folder_callbacks(self, folder, command_options=None):
        return folder_callbacks(folder, command_options)


MULTITASK = MultitaskJob()


def build_run(config: TrainConfig, inputs: RunInputs, callbacks=(), encoder: Optional[minbert.BertModel] = None,
              folder=None, job: Job = MULTITASK) -> Run:
    """A fresh run of `job`: model, data order, optimizer and schedule, seeded by config.seed. `callbacks` take
    part in it (callbacks.py); `folder` is its run folder, None for a run kept in memory. A config without a
    learning rate (train_multitask.py without --lr) takes the model's size's (tasks.config.lr_for_model)."""
    graphs = resolve_graphs(config, inputs)  # before any work: `on` may be refused
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    np.random.seed(config.seed)
    lr, lr_reason = lr_for_model(config.lr, (inputs.encoder if encoder is None else encoder).config,
                                 freeze_until=config.freeze_until)
    config = dataclasses.replace(config, lr=lr)  # what config.json's arguments record, and --resume keeps
    model = job.build_model(config, inputs, encoder)
    train, sampler_name, sampler = job.plan(config, inputs)
    per_epoch = sampler.steps_per_epoch()
    total = per_epoch * config.epochs if config.max_steps is None else min(config.max_steps, per_epoch * config.epochs)
    optimizer = make_optimizer(config, model, graphs)
    job.encoder_of(model).watch_optimizer(optimizer)  # fused AdamW leaves no version bump to see
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total, config.warmup, config.lr_schedule))
    smart = Smart(model, config.smart_config(), config.pair_mode) if config.smart else None
    return Run(config, inputs, model, train, sampler, sampler_name, per_epoch, total, optimizer, scheduler, smart,
               shared=[p for p in job.encoder_of(model).parameters() if p.requires_grad],
               surgery_rng=np.random.default_rng(config.seed),
               loss_fn=graphed_loss(job.loss(model, config, inputs, smart), graphs), graphs=graphs,
               callbacks=list(callbacks), folder=None if folder is None else Path(folder),
               scaler=torch.amp.GradScaler(inputs.device.type, enabled=inputs.precision == "fp16"), job=job,
               lr_reason=lr_reason,
               averages=build_averages(model, config.average_list, config.ema_decay, config.swa_start, total))


def start(run: Run) -> None:
    """A fresh start: under torchrun the same weights on every rank, a different dropout stream on each. A run
    too short for its EMA says so here, once, not again when it resumes."""
    world = run.inputs.world
    too_short = early_weights_warning(run.config.average_list, run.config.ema_decay, run.total_steps)
    if too_short is not None and world.main:
        print(f"warning: {too_short}", file=sys.stderr)
    if world.active:
        torch.manual_seed(rank_seed(run.config.seed, world.rank))


def distribute(run: Run) -> None:
    """Under torchrun, the loss is computed through DDP, which averages the gradients over the ranks."""
    device = run.inputs.device
    if run.inputs.world.active:
        run.job.encoder_of(run.model).prepare_for_data_parallel()  # DDP averages only what autograd hands it
        # Each forward uses one task's head only, so the other heads are unused parameters.
        run.loss_fn = DistributedDataParallel(run.loss_fn, device_ids=[device.index] if device.type == "cuda" else None,
                                              find_unused_parameters=True)

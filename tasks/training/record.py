"""config.json: what a run was (every option, the model and data files with their hashes, the machine),
and the options TensorBoard's hparams table shows."""
import sys
from typing import Optional

import minbert

from ..config import TrainConfig
from ..inputs import RunInputs
from ..machine import versions
from ..registry import get_task
from ..saved.model_folder import pretraining_of
from ..saved.run_record import BaseModel, DataFile, Graphs, LearningRate, Precision, Resolved, RunRecord
from .state import Run


def arguments_record(config: TrainConfig, inputs: RunInputs, command_options: Optional[dict] = None) -> dict:
    """config.json's "arguments": every option, with the precision used (what --resume continues in), the
    command's own options, the parsed task list and the precision asked for."""
    options = config.to_dict()
    mode = options.pop("prediction_mode")
    return {**options, "precision": inputs.precision, **(command_options or {}), "prediction_mode": mode,
            "task_list": list(config.task_list), "precision_requested": inputs.precision_requested}


def declarations(tasks) -> dict:
    """What --task-file declared for the run's own tasks (columns, labels, metric, files); none for the course's."""
    return {t: get_task(t).describe() for t in tasks if get_task(t).declared_in is not None}


def run_record(run: Run, command_options: Optional[dict] = None) -> RunRecord:
    """config.json: the options, model, data files, device, package versions and the run's shape. Its parts
    are built strictly (no unknown key dropped): what the run records, its readers can read."""
    config, inputs, model = run.config, run.inputs, run.model
    world = inputs.world.describe()
    return RunRecord(
        command=tuple(sys.argv), arguments=arguments_record(config, inputs, command_options),
        seed=config.seed,
        model=model_record(inputs.encoder.source),
        data={task: {split: None if file is None else DataFile(**file) for split, file in splits.items()}
              for task, splits in inputs.data_record.items()},
        device=str(inputs.device), versions=versions(), declared_tasks=declarations(inputs.tasks),
        max_length=inputs.max_lengths,
        precision=Precision(inputs.precision_requested, inputs.precision, minbert.native_bf16(inputs.device),
                            inputs.tf32),
        steps_per_epoch=run.steps_per_epoch, total_steps=run.total_steps,
        implementation=Resolved(config.implementation, inputs.encoder.config.implementation),
        cuda_graphs=Graphs(config.cuda_graphs, **run.graphs.to_dict()),
        lr=LearningRate(config.lr, run.lr_reason),
        frozen_layers=model.frozen_layers, sampler=run.sampler_name,
        world_size=world["world_size"], backend=world["backend"],
        trainable_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad))


def model_record(source) -> Optional[BaseModel]:
    """config.json's "model": what was loaded and, for a model pretrain.py made, how (its pretraining.json)."""
    if source is None:
        return None
    loaded = source.to_dict()
    return BaseModel(**{key: value for key, value in loaded.items() if key != "config"},
                     architecture=loaded["config"], pretraining=pretraining_of(source.folder))


_HPARAMS = ("lr", "batch_size", "grad_accum", "epochs", "sampler", "surgery", "smart", "freeze_until", "pair_mode",
            "pooling", "task_heads", "precision", "seed", "data_fraction", "model", "average", "per_task_best")


def hparams(run: Run) -> dict:
    """The options TensorBoard's hparams table shows, with the precision used."""
    values = {**run.config.to_dict(), "precision": run.inputs.precision}
    return {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in values.items() if k in _HPARAMS}

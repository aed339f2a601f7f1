"""What every run and trial shares, loaded once: the encoder, the tokenizer and the tokenised data.

`prepare(config)` reads the checkpoint and the data of config's tasks and decides where the run
computes (device, precision); `multitask_model` puts the heads the options ask for on an encoder.
Training, a trained model's predictions and the studies all start here.
"""
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

import minbert
from minbert import UserError
from minbert.edits import resolve_freeze_until

from . import data as data_mod
from .config import TrainConfig
from .distributed import SINGLE, World, broadcast_from_main, device_for
from .encoded import EncodedSplit, encode_split
from .heads import MultitaskModel
from .machine import implementation_warning, resolve_device, use_tf32
from .registry import get_task


@dataclass
class RunInputs:
    """What every trial of a run or sweep shares: loaded once, never mutated by `fit`."""
    encoder: minbert.BertModel
    tokenizer: minbert.Tokenizer
    data: dict                    # task -> {"train"|"dev"|"test": EncodedSplit or None}
    data_record: dict             # task -> split -> describe() of the file read
    device: torch.device
    tasks: tuple = ()
    max_lengths: dict = field(default_factory=dict)  # task -> tokens per sequence
    world: World = SINGLE         # the processes torchrun started (tasks.distributed)
    precision: str = "fp32"       # what the run computes in: --precision resolved for this device
    precision_requested: str = "fp32"  # what --precision asked for (auto, bf16 or fp32)
    tf32: bool = False            # fp32 matmuls in TF32 (CUDA from Ampere on, unless --no-tf32)


def load_encoder(config: TrainConfig, device: torch.device) -> minbert.BertModel:
    """The default model falls back to the embedded one with a warning; a named one never does. It runs
    --implementation, `auto` resolved for `device` (minbert.build)."""
    return minbert.from_pretrained(config.model, fallback_to_embedded=config.model == minbert.DEFAULT_MODEL,
                                   implementation=config.implementation, device=device)


def where_it_computes(device_flag: str, precision_flag: str, no_tf32: bool, world: World = SINGLE) -> tuple:
    """(device, precision, whether fp32 matmuls run in TF32) for a command's --device, --precision and --no-tf32;
    fp16 on a CPU fails here, before any work."""
    device = device_for(world, resolve_device(device_flag))
    precision = minbert.resolve_precision(precision_flag, device)
    if device.type == "cpu":   # auto times a matmul on a CPU: every rank trains in rank 0's answer
        precision = broadcast_from_main(precision, world)
    return device, precision, use_tf32(device, not no_tf32)


def warn_of_implementation(device, implementation: str, world: World = SINGLE) -> None:
    """The one line a run's main process prints when its implementation is not the one for its device."""
    warning = implementation_warning(device, implementation)
    if warning and world.main:
        print(warning, file=sys.stderr)


def prepare(config: TrainConfig, warn: Optional[Callable] = None, world: World = SINGLE) -> RunInputs:
    """The encoder, tokenizer and tokenised data of config's tasks, and where the run computes (device, precision)."""
    if not world.main:
        warn = _silent  # rank 0 reports the data problems, once
    device, precision, tf32 = where_it_computes(config.device, config.precision, config.no_tf32, world)
    encoder = load_encoder(config, device)
    drawn = getattr(getattr(encoder, "source", None), "initialised_tensors", None)
    if drawn and world.main:
        print(f"note: {config.model} has no {', '.join(drawn)} (a masked-LM checkpoint): drawn as BERT initialises "
              f"them (trained with the heads unless --freeze-until all)", file=sys.stderr)
    warn_of_implementation(device, encoder.config.implementation, world)
    if config.freeze_until != "all":
        resolve_freeze_until(encoder, config.freeze_until)  # a bad K fails before any data work
    # Never more tokens than the model has positions, whatever its tokenizer_config.json claims.
    positions = encoder.config.max_position_embeddings
    tokenizer = minbert.Tokenizer.from_folder(encoder.source.folder, max_length=positions)
    # A declared task's files are where its --task-file says: the course's folder only matters for the course's.
    course = any(get_task(t).declared_in is None for t in config.task_list)
    data_dir = ensure_data_dir(config.data_dir) if course else None
    data, record, lengths = {}, {}, {}
    for task in config.task_list:
        lengths[task] = min(config.max_length or get_task(task).max_length, tokenizer.max_length)
        splits = data_mod.read_task(data_dir, task, strict=config.strict_data, warn=warn)
        record[task] = {s: (d.describe() if d is not None else None) for s, d in splits.items()}
        data[task] = {s: (encode_split(d, tokenizer, config.pair_mode, lengths[task]) if d is not None else None)
                      for s, d in splits.items()}
    # `auto` becomes the precision this device runs fast; config.json keeps both.
    return RunInputs(encoder, tokenizer, data, record, device, config.task_list, lengths, world=world,
                     precision=precision, precision_requested=config.precision, tf32=tf32)


def announcement(inputs: RunInputs, where: str, shape: Optional[str] = None) -> str:
    """A command's first line: the model (`shape`: its layers x hidden size unless given) and where it came from,
    the device (and the processes under torchrun), the precision and the implementation, and `where` the results
    go ("run folder runs/NAME")."""
    src, world = inputs.encoder.source, inputs.world
    shape = shape or f"{src.num_layers} layers x {src.hidden_size}"
    processes = f"; {world.size} processes ({world.backend})" if world.active else ""
    return (f"model: {src.name} ({src.resolved_from}, {shape}) from {src.folder}; device {inputs.device}{processes}; "
            f"{precision_note(inputs)}; {where}")


def precision_note(inputs: RunInputs) -> str:
    """How the precision and the implementation were chosen, for the run's first line."""
    used, device = inputs.precision, inputs.device
    implementation = f"; implementation {inputs.encoder.config.implementation}"
    if inputs.precision_requested == "auto":
        if used == "fp32" and minbert.native_bf16(device):   # a CPU whose bf16 units lose to its fp32
            speedup = minbert.cpu_bf16_speedup()
            why = (f"this CPU's bf16 matmuls ran at {speedup:.2f}x its fp32 rate, below the "
                   f"{minbert.CPU_BF16_GAIN}x that bf16 needs")
        elif used == "fp32":
            why = "no native bf16 or fp16 on this device: emulated bf16 trains 2-3x slower"
        else:
            why = f"native {used}" + (", no native bf16" if used == "fp16" else "")
        return f"precision {used} (auto: {why}){implementation}"
    if inputs.tf32 and used == "fp32":
        return f"precision fp32 (matmuls in TF32; --no-tf32 for IEEE fp32){implementation}"
    if not minbert.native(used, device):
        return f"precision {used} (emulated on this device: 2-3x slower than --precision fp32){implementation}"
    return f"precision {used}{implementation}"


def _silent(message: str) -> None:
    pass


def ensure_data_dir(data_dir) -> Path:
    """The default data/ folder is filled from the course's repository when empty (needs internet)."""
    folder = data_mod.resolve_data_dir(data_dir)
    if data_dir is None and not (folder / "ids-sst-train.csv").exists():
        from .course.starter_data import download_course_data
        try:
            download_course_data(folder)
        except UserError as e:
            raise UserError(f"no data in {folder} and it cannot be downloaded ({e}); pass --data-dir "
                            f"or set {data_mod.DATA_DIR_ENV} to the folder with the course's csv files") \
                from None
    return folder


def subsample_split(split: EncodedSplit, fraction: float, seed: int) -> EncodedSplit:
    if fraction >= 1:
        return split
    return split.rows(data_mod.subsample(range(len(split)), fraction, seed))


def multitask_model(config: TrainConfig, encoder: minbert.BertModel, tasks) -> MultitaskModel:
    """The encoder with the heads the options ask for: one construction for training and for loading a run."""
    return MultitaskModel(encoder, tasks, config.pair_mode, config.pooling, dropout=config.head_dropout,
                          task_heads=config.task_heads)

"""A trained model rebuilt from what a run left, to predict with (`predict.py`).

From a run folder: the architecture, tokenizer, tasks, pair mode, pooling and
max lengths come from its config.json, the weights from best.pt (the best
evaluation's, whether or not the run finished). From a model folder
(RUN_DIR/model/, model_folder.py): the encoder through `minbert.from_pretrained`,
the heads from heads.safetensors, the rest from tasks.json. Nothing is
repeated on the command line. A Part-1 folder (classifier.py) holds one run
per task; `run_folders` lists them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

import minbert
from minbert import CheckpointError, UserError
from minbert.errors import read_json
from minbert.loading import read_state_dict

from .. import data as data_mod
from ..config import TrainConfig
from ..encoded import encode_split
from ..heads import MultitaskModel
from ..inputs import RunInputs, multitask_model
from ..task_file import declare_tasks
from .checkpoint_files import BEST, CHECKPOINT, load_checkpoint
from .model_folder import MODEL_DIR, TASKS_JSON
from .run_record import BaseModel, read_run_record

PART1_RESULTS = "classifier.json"


@dataclass
class Trained:
    """A model ready to predict, and how its run ran it."""
    model: MultitaskModel
    tokenizer: minbert.Tokenizer
    config: TrainConfig          # the run's options: tasks, pair mode, pooling, eval batch size, file names
    max_lengths: dict            # task -> tokens per sequence, as the run encoded them
    origin: Path                 # the weights file read
    data_dir: Optional[str]      # the data folder the run read, if recorded

    @property
    def tasks(self) -> tuple:
        return self.model.tasks


def run_folders(path) -> list:
    """The run folders below `path`: itself, or a Part-1 folder's one run per task."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"{path}: no such run folder")
    part1 = path / PART1_RESULTS
    if part1.exists() and not (path / "config.json").exists():
        try:
            tasks = json.loads(part1.read_text(encoding="utf-8"))["tasks"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UserError(f"{part1}: cannot read the Part-1 run's tasks ({e})") from None
        if not tasks:
            raise CheckpointError(f"{part1}: no task of this Part-1 run has finished; nothing to predict with")
        return [path / task for task in tasks]
    return [path]


def load_trained(path, device: torch.device, implementation: str = minbert.DEFAULT_IMPLEMENTATION) -> Trained:
    """The model of a run folder (config.json + best.pt) or of an exported model folder (tasks.json), running
    `implementation` (`auto`: the one for `device`, minbert.build)."""
    path = Path(path)
    if (path / "config.json").exists() and (path / TASKS_JSON).exists() and not (path / BEST).exists():
        return _from_model_folder(path, device, implementation)
    if not (path / "config.json").exists():
        raise UserError(f"{path}: not a run folder (no config.json) nor a model folder (no {TASKS_JSON})")
    return _from_run_folder(path, device, implementation)


def _with_declared_tasks(config: TrainConfig) -> TrainConfig:
    """Register the tasks the run's --task-file declared (read again from that file: a moved file is one error
    line naming it)."""
    declare_tasks(config.task_file)
    return config


def _from_run_folder(run_dir: Path, device, implementation: str) -> Trained:
    record = read_run_record(run_dir / "config.json", CheckpointError)
    if record.max_length is None:
        raise CheckpointError(f"{run_dir / 'config.json'}: not a run's record (no 'max_length')")
    config = _with_declared_tasks(TrainConfig.from_record(record.arguments))
    source, max_lengths = record.model, dict(record.max_length)
    best = run_dir / BEST
    if not best.exists():
        if (run_dir / MODEL_DIR / TASKS_JSON).exists():
            return _from_model_folder(run_dir / MODEL_DIR, device, implementation)
        more = (f"; it stopped before its first evaluation: continue it with train_multitask.py --resume {run_dir}"
                if (run_dir / CHECKPOINT).exists() else "")
        raise CheckpointError(f"{best}: no weights in the run folder{more}")
    tokenizer_folder = _tokenizer_folder(run_dir, source)
    architecture = ((source and source.architecture)
                    or minbert.BertConfig.from_json(tokenizer_folder / "config.json").to_dict())
    encoder = minbert.build_model(minbert.BertConfig(**{**architecture, "implementation": implementation}), device)
    model = multitask_model(config, encoder, config.task_list)
    try:
        model.load_state_dict(load_checkpoint(best)["model"])
    except (KeyError, TypeError, RuntimeError) as e:
        detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{best}: does not match the run's config.json ({detail})") from None
    return Trained(model.to(device).eval(), _tokenizer(tokenizer_folder, encoder), config, max_lengths, best,
                   config.data_dir)


def _tokenizer_folder(run_dir: Path, source: Optional[BaseModel]) -> Path:
    """The run's exported model folder when it has one (it travels with the run), else the base checkpoint's."""
    base = source.folder if source is not None else None
    for folder in (run_dir / MODEL_DIR, Path(base or "")):
        if folder.is_dir() and any((folder / f).exists() for f in minbert.loading.VOCAB_FILES):
            return folder
    raise CheckpointError(f"{run_dir}: the tokenizer is in neither {run_dir / MODEL_DIR} nor the base checkpoint's "
                          f"folder {base!r} (moved or deleted?)")


def _tokenizer(folder: Path, encoder: minbert.BertModel) -> minbert.Tokenizer:
    # Never more tokens than the model has positions, as tasks.inputs.prepare does.
    return minbert.Tokenizer.from_folder(folder, max_length=encoder.config.max_position_embeddings)


def _from_model_folder(folder: Path, device, implementation: str) -> Trained:
    described = read_json(folder / TASKS_JSON, CheckpointError, "model folder description")
    try:
        tasks = list(described["tasks"])
        config = _with_declared_tasks(TrainConfig.from_record({**described["options"], "tasks": ",".join(tasks)}))
        max_lengths = dict(described["max_length"])
        heads_file = folder / described["heads"]
    except (KeyError, TypeError) as e:
        raise CheckpointError(f"{folder / TASKS_JSON}: not a model folder's description (no {e})") from None
    encoder = minbert.from_pretrained(str(folder), implementation=implementation, device=device)
    model = multitask_model(config, encoder, tasks)
    if not heads_file.exists():
        raise CheckpointError(f"{heads_file}: no such file (the task heads)")
    try:
        model.heads.load_state_dict(read_state_dict(heads_file))
    except RuntimeError as e:
        raise CheckpointError(f"{heads_file}: does not match {TASKS_JSON} ({str(e).splitlines()[0][:200]})") from None
    return Trained(model.to(device).eval(), _tokenizer(folder, encoder), config, max_lengths,
                   Path(encoder.source.weights_file), None)


def course_inputs(trained: Trained, data_dir, splits, device, precision: str) -> RunInputs:
    """The run's tasks' course files of `splits`, tokenised as the run did, as training's inputs (tasks.inputs)."""
    folder = data_mod.resolve_data_dir(data_dir)
    data, record = {}, {}
    for task in trained.tasks:
        data[task], record[task] = {}, {}
        for split in splits:
            found = data_mod.read_split(folder, task, split, strict=trained.config.strict_data)
            record[task][split] = found.describe() if found is not None else None
            data[task][split] = (encode_split(found, trained.tokenizer, trained.config.pair_mode,
                                              trained.max_lengths[task]) if found is not None else None)
    return RunInputs(trained.model.encoder, trained.tokenizer, data, record, device, trained.tasks,
                     dict(trained.max_lengths), precision=precision, precision_requested=precision)


def inference_precision(requested: str, trained: Trained, device: torch.device) -> str:
    """auto: the run's own precision where this device computes it natively (its prediction files come out
    the same), else fp32; never an emulated bf16."""
    if requested != "auto":
        return minbert.resolve_precision(requested, device)
    run = trained.config.precision
    if run in ("bf16", "fp16") and not minbert.native(run, device):
        return "fp32"
    return minbert.resolve_precision(run, device)

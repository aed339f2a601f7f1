"""The multitask training loop, shared by `train_multitask.py`, `classifier.py` and `ablate.py`.

`prepare(config)` loads the checkpoint, the tokenizer and the tokenised data
once; `fit(config, inputs, outputs)` fine-tunes a copy of the encoder with the
task heads. The loop is small named steps over one `Run` built once: `build`,
`restore` (or `start`), `run_epoch` (`train_step` per step),
`evaluate_and_keep_best`, `finish`. Where results go is one `Outputs`
object: `RunFolder` leaves everything a run promises in its folder
(config.json, TensorBoard events, checkpoints latest and best, metrics.json,
the course's prediction files, the model in Hugging Face format), `InMemory`
(an ablation trial) writes nothing but TensorBoard curves (and, when asked,
the model) and keeps the best weights in memory. `Callback`s
watch a run (the console's progress, a benchmark's timers). Every file is
written atomically, and a killed run resumes from its last checkpoint with
the same result as an unbroken one.
"""
import copy
import dataclasses
import io
import json
import os
import pickle
import platform
import random
import signal
import subprocess
import sys
import time
import zipfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import minbert
from minbert import CheckpointError, RunFailure, UserError
from minbert.edits import resolve_freeze_until

from . import data as data_mod
from .distributed import (SINGLE, World, agreed_signal, all_reduce_mean_, barrier, device_for, gather_objects,
                          local_batch_indices)
from .encoded import EncodedSplit, encode_split, make_batch
from .export import MODEL_DIR, export_model
from .fileio import atomic_save_torch, atomic_write_json, remove_stale_temp_files
from .gradient_surgery import assign_flat_grad, dominant, flatten_grads, pcgrad
from .heads import MultitaskModel, task_spec
from .metrics import overall_score, raw_mean_score, score
from .predictions import write_predictions
from .registry import get_task
from .samplers import build_sampler
from .config import TrainConfig
from .samplers import Sampler
from .smart import Smart

CHECKPOINT = "checkpoint.pt"
PREVIOUS_CHECKPOINT = "checkpoint.prev.pt"
STAGED_CHECKPOINT = "checkpoint.next.pt"
BEST = "best.pt"


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
    extra: dict = field(default_factory=dict)
    world: World = SINGLE         # the processes torchrun started (tasks.distributed)
    precision: str = "fp32"       # what the run computes in: --precision resolved for this device
    precision_requested: str = "fp32"  # what --precision asked for (auto, bf16 or fp32)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device: unknown device {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name}: CUDA is not available on this machine")
    return device


def load_encoder(config: TrainConfig) -> minbert.BertModel:
    """The default model falls back to the embedded one with a warning; a named one never does."""
    return minbert.from_pretrained(config.model, fallback_to_embedded=config.model == minbert.DEFAULT_MODEL)


def prepare(config: TrainConfig, warn: Optional[Callable] = None, world: World = SINGLE) -> RunInputs:
    """The encoder, tokenizer and tokenised data of config's tasks, and where the run computes (device, precision)."""
    if not world.main:
        warn = _silent  # rank 0 reports the data problems, once
    encoder = load_encoder(config)
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
    device = device_for(world, resolve_device(config.device))
    # `auto` becomes the precision this device runs fast; config.json keeps both.
    return RunInputs(encoder, tokenizer, data, record, device, config.task_list, lengths, world=world,
                     precision=minbert.resolve_precision(config.precision, device),
                     precision_requested=config.precision)


def precision_note(inputs: RunInputs) -> str:
    """How the precision was chosen, for the run's first line."""
    native = minbert.native_bf16(inputs.device)
    if inputs.precision_requested == "auto":
        why = "native bf16" if native else "no native bf16 on this device: emulated bf16 trains 2-3x slower"
        return f"precision {inputs.precision} (auto: {why})"
    if inputs.precision == "bf16" and not native:
        return "precision bf16 (emulated on this device: 2-3x slower than --precision fp32)"
    return f"precision {inputs.precision}"


def _silent(message: str) -> None:
    pass


def ensure_data_dir(data_dir) -> Path:
    """The default data/ folder is filled from the course's repository when empty (needs internet)."""
    folder = data_mod.resolve_data_dir(data_dir)
    if data_dir is None and not (folder / "ids-sst-train.csv").exists():
        from .download import download_course_data
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
    keep = data_mod.subsample(range(len(split)), fraction, seed)
    return EncodedSplit(split.task, [split.ids[i] for i in keep], [split.encodings[i] for i in keep],
                        split.labels[keep] if split.labels is not None else None,
                        [split.lengths[i] for i in keep])


# ---------------------------------------------------------------------------- evaluation


@torch.no_grad()
def predict(model: MultitaskModel, split: EncodedSplit, tokenizer, device, batch_size: int,
            precision: str, world: World = SINGLE, label: Optional[str] = None,
            values: Optional[Callable] = None) -> list:
    """Predictions in the split's order; batches sorted by length so little is padding.

    Under torchrun the batches are dealt out to the ranks and the predictions gathered:
    every rank returns the whole list, the same as one process would. With a `label`, a
    terminal shows a bar (a CFIMDB evaluation at 512 tokens takes minutes on a CPU).
    `values` turns the head's outputs into what is returned per example (default: the task's
    predictions, as its prediction files hold them).
    """
    model.eval()
    values = values or task_spec(split.task, model.pair_mode, model.task_heads).predict
    order = sorted(range(len(split)), key=split.lengths.__getitem__)
    starts = range(0, len(order), batch_size)
    bar = _bar(label is not None and world.main and sys.stdout.isatty(), len(starts), 0, label or "")
    mine = {}
    for b, start in enumerate(starts):
        if bar is not None:
            bar.update(1)
        if b % world.size != world.rank:
            continue
        idx = order[start:start + batch_size]
        batch = make_batch(split, idx, tokenizer, device)
        batch.pop("labels", None)
        with autocast(device, precision):
            found = values(model(split.task, batch)).float().cpu().tolist()
        mine.update(zip(idx, found))
    if bar is not None:
        bar.close()
    out = [None] * len(split)
    for part in gather_objects(mine, world):
        for i, v in part.items():
            out[i] = v
    return out


def evaluate(model, inputs: RunInputs, batch_size: int, split: str = "dev", show: bool = False,
             predictions: Optional[dict] = None) -> dict:
    """The split's metrics per task and overall; each task's predictions also go into `predictions` if given."""
    metrics = {}
    for task in inputs.tasks:
        part = inputs.data[task][split]
        preds = predict(model, part, inputs.tokenizer, inputs.device, batch_size, inputs.precision, inputs.world,
                        label=f"{split} {task}" if show else None)
        if predictions is not None:
            predictions[task, split] = preds
        metrics[task] = score(get_task(task).metric, preds, part.labels.tolist())
    by_task = dict(metrics)
    metrics["overall"] = overall_score(by_task)        # the course's, which picks the best evaluation
    metrics["overall_raw"] = raw_mean_score(by_task)   # the report "Freeze Your Layers"'s, to compare with its table
    return metrics


def autocast(device: torch.device, precision: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


# ---------------------------------------------------------------------------- run record


def multitask_model(config: TrainConfig, encoder: minbert.BertModel, tasks) -> MultitaskModel:
    """The encoder with the heads the options ask for: one construction for training and for loading a run."""
    return MultitaskModel(encoder, tasks, config.pair_mode, config.pooling, dropout=config.head_dropout,
                          task_heads=config.task_heads)


def versions() -> dict:
    import tokenizers
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "tokenizers": tokenizers.__version__, "platform": platform.platform(), "cpu": cpu_model(),
           "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    out.update(source_commit(Path(__file__).resolve().parents[1]))
    return out


def cpu_model() -> str:
    """The CPU's model name as lscpu prints it: speeds differ by CPU kind, so every measurement names its own."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def source_commit(repo: Path) -> dict:
    """The commit the code was run from, and whether it had local changes; {} outside a git checkout.

    Asked of git itself rather than read from .git/, which is a file in a worktree and may keep
    its refs packed.
    """
    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout
    try:
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"minbert_commit": commit, "minbert_dirty": dirty}


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


def run_record(run: "Run", command_options: Optional[dict] = None) -> dict:
    """config.json: the options, model, data files, device, package versions and the run's shape."""
    config, inputs, model = run.config, run.inputs, run.model
    return {"command": sys.argv, "arguments": arguments_record(config, inputs, command_options), "seed": config.seed,
            "model": inputs.encoder.source.to_dict() if inputs.encoder.source else None,
            "data": inputs.data_record, "max_length": inputs.max_lengths, "device": str(inputs.device),
            "declared_tasks": declarations(inputs.tasks),
            "versions": versions(),
            "precision": {"requested": inputs.precision_requested, "used": inputs.precision,
                          "native_bf16": minbert.native_bf16(inputs.device)},
            "steps_per_epoch": run.steps_per_epoch, "total_steps": run.total_steps,
            "frozen_layers": model.frozen_layers, "sampler": run.sampler_name, **inputs.world.describe(),
            "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}


# ---------------------------------------------------------------------------- checkpoints


def rng_state() -> dict:
    np_state = np.random.get_state()
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "numpy": [np_state[0], torch.from_numpy(np_state[1].copy()), *np_state[2:]],
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def rng_states(world: World) -> list:
    """Every rank's `rng_state()`, in rank order. Sent as torch.save bytes: all_gather_object's own
    pickling of tensors fails on CPU in torch 2.13."""
    if not world.active:
        return [rng_state()]
    buffer = io.BytesIO()
    torch.save(rng_state(), buffer)
    return [torch.load(io.BytesIO(b), weights_only=True) for b in gather_objects(buffer.getvalue(), world)]


def set_rng_state(state: dict):
    torch.set_rng_state(state["torch"])
    random.setstate(tuple(_tuples(state["python"])))
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, keys.numpy(), *rest))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _tuples(x):
    return tuple(_tuples(i) for i in x) if isinstance(x, (list, tuple)) else x


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:160] if text else type(e).__name__


def _previous_offer(path: Path) -> str:
    previous = path.with_name(PREVIOUS_CHECKPOINT)
    return (f"; the previous good checkpoint is {previous} (rename it to {path.name} to resume from it)"
            if previous.exists() and path.name == CHECKPOINT else "")


def no_checkpoint_error(path: Path) -> CheckpointError:
    return CheckpointError(f"{path}: no checkpoint to resume from{_previous_offer(path)}")


def load_checkpoint(path: Path) -> dict:
    """Only tensors and plain containers: `weights_only` refuses anything that could run code.

    The zip archive's CRCs are checked first, so a truncated file or flipped bytes inside
    a tensor are reported instead of silently resuming from damaged weights.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
        if damaged is not None:
            raise ValueError(f"CRC mismatch in {damaged}")
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise no_checkpoint_error(path) from None
    except pickle.UnpicklingError:
        raise CheckpointError(f"{path}: refused: it holds Python objects other than tensors, and loading "
                              f"them could run code{_previous_offer(path)}") from None
    except Exception as e:
        raise CheckpointError(f"{path}: truncated or corrupted checkpoint ({_first_line(e)})"
                              f"{_previous_offer(path)}") from None


@contextmanager
def _writing(path: Path):
    """A failed write (disk full, permissions) stops the run in one line; the atomic writers
    have already left the file's previous version in place."""
    try:
        yield
    except OSError as e:
        raise RunFailure(f"cannot write {path}: {e.strerror or e}; its previous version is intact") from None


def save_checkpoint(out_dir: Path, state: dict):
    """The new checkpoint is complete on disk before the old one becomes checkpoint.prev.pt."""
    latest, staged = out_dir / CHECKPOINT, out_dir / STAGED_CHECKPOINT
    with _writing(latest):
        atomic_save_torch(staged, state)
        if latest.exists():
            os.replace(latest, out_dir / PREVIOUS_CHECKPOINT)
        os.replace(staged, latest)


# ---------------------------------------------------------------------------- training


class _Stop:
    """SIGINT/SIGTERM ask the loop to checkpoint and leave at the next step boundary."""

    def __init__(self):
        self.signal = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def _handle(self, signum, frame):
        if self.signal is not None:  # a second signal: give up at once
            raise KeyboardInterrupt
        self.signal = signum

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


class Interrupted(Exception):
    def __init__(self, signum, message):
        super().__init__(message)
        self.exit_code = 128 + signum


def build_model(config: TrainConfig, inputs: RunInputs, encoder: Optional[minbert.BertModel] = None) -> MultitaskModel:
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
    return model.to(inputs.device)


def make_optimizer(config: TrainConfig, model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if config.optimizer == "minbert":
        # the torch path's eps (torch.optim.AdamW's default), not the class's course default 1e-6
        return minbert.AdamW(groups, lr=config.lr, eps=1e-8)
    return torch.optim.AdamW(groups, lr=config.lr, fused=True)


def lr_lambda(total_steps: int, warmup: float, schedule: str = "linear"):
    """Linear warm-up then linear decay to 0, or (the course's Part 1) a constant rate."""
    if schedule == "constant":
        return lambda step: 1.0
    warm = max(1, int(total_steps * warmup))

    def f(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))
    return f


@dataclass
class TrainState:
    """Where a run is; every checkpoint keeps it as the JSON "progress"."""
    epoch: int = 0
    step_in_epoch: int = 0
    global_step: int = 0
    best: Optional[dict] = None                  # the history entry with the best overall dev score
    history: list = field(default_factory=list)  # one entry per evaluation: epoch, step, dev, elapsed_s
    nonfinite_skipped: int = 0

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


class Callback:
    """Watches a run (`fit(..., callbacks=[...])`): each hook gets the `Run`; override those needed."""

    def on_plan(self, run: "Run", plan: list) -> None:
        """An epoch's plan (one {task: indices} per step) is made, before its first step."""

    def on_step(self, run: "Run", info: StepInfo) -> None:
        """An optimizer step is done or skipped; run.state counts it already."""

    def on_epoch_end(self, run: "Run") -> None:
        """The last step of the epoch, of the run, or before an --eval-every evaluation is done; the evaluation
        (when due) follows."""

    def on_evaluate(self, run: "Run", metrics: dict, seconds: float) -> None:
        """Dev metrics, already in run.state.history; `seconds` is what the evaluation took."""


class Outputs(Callback):
    """Where a run's results go; as a callback it logs the run's curves to TensorBoard."""
    prints = False   # the run reports its progress on stdout (a command's run, not an ablation trial)
    writer = None    # TensorBoard SummaryWriter, when there is one

    def begin(self, run: "Run", resume: bool) -> None:
        """The run is built (and restored): open what the outputs need."""

    def checkpoint_path(self) -> Path:
        raise CheckpointError("nothing to resume from: this run keeps no checkpoints")

    def save_checkpoint(self, run: "Run") -> None:
        pass

    def keep_best(self, run: "Run") -> None:
        """The current weights have the best dev score so far."""

    def restore_best(self, run: "Run") -> None:
        """Put the kept best weights back into run.model."""

    def finish(self, run: "Run", result: dict) -> None:
        pass

    def stopped_note(self) -> str:
        return "nothing saved"

    def on_step(self, run, info):
        if self.writer is not None and info.losses is not None:
            for name, value in info.losses.items():
                self.writer.add_scalar(name, value, run.state.global_step)
            self.writer.add_scalar("train/lr", run.scheduler.get_last_lr()[0], run.state.global_step)

    def on_evaluate(self, run, metrics, seconds):
        if self.writer is not None:
            for name, value in metrics.items():
                if value is not None:
                    self.writer.add_scalar(f"dev/{name}", value, run.state.global_step)

    def add_hparams(self, hparams: dict, result: dict) -> None:
        self.writer.add_hparams(hparams, {f"hparam/{k}": v for k, v in result["best"].items() if v is not None},
                                run_name="hparams")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class RunFolder(Outputs):
    """A command's run: config.json, tensorboard/, checkpoint.pt, best.pt, metrics.json, predictions/ and, once
    finished, model/ (the best weights in Hugging Face format with the heads: tasks/export.py).

    Under torchrun every rank takes part in the collectives (RNG states, predictions); rank 0 alone writes.
    `command_options`: the command's own options, recorded with the training options in config.json.
    """
    prints = True

    def __init__(self, folder, command_options: Optional[dict] = None):
        self.folder = Path(folder)
        self.command_options = command_options
        self.writes = True

    def begin(self, run, resume):
        self.writes = run.inputs.world.main
        if not self.writes:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        if resume:
            remove_stale_temp_files(self.folder)  # half-written files of the killed process
        else:
            with _writing(self.folder / "config.json"):
                atomic_write_json(self.folder / "config.json", run_record(run, self.command_options))
        from torch.utils.tensorboard import SummaryWriter
        # Events after the checkpoint's step were logged by the killed process: TensorBoard drops them.
        self.writer = SummaryWriter(str(self.folder / "tensorboard"),
                                    purge_step=run.state.global_step + 1 if resume else None)

    def checkpoint_path(self) -> Path:
        return self.folder / CHECKPOINT

    def save_checkpoint(self, run):
        per_rank = rng_states(run.inputs.world)  # a collective: every rank takes part
        if not self.writes:
            return
        self.writer.flush()  # every event up to this step is on disk before the step is
        save_checkpoint(self.folder, {
            "model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(), "smart": run.smart.state_dict() if run.smart else None,
            "surgery_rng": json.dumps(run.surgery_rng.bit_generator.state), "progress": run.state.to_json(),
            "rng": per_rank[0], "rng_ranks": per_rank if run.inputs.world.active else None})

    def keep_best(self, run):
        if self.writes:
            with _writing(self.folder / BEST):
                atomic_save_torch(self.folder / BEST, {"model": run.model.state_dict(), "epoch": run.state.epoch + 1})

    def restore_best(self, run):
        barrier(run.inputs.world)  # rank 0 has written best.pt
        best = torch.load(self.folder / BEST, map_location="cpu", weights_only=True)
        run.model.load_state_dict(best["model"])

    def finish(self, run, result):
        with _writing(self.folder / "predictions"):
            write_all_predictions(run.model, run.inputs, self.folder / "predictions", run.config, show=True,
                                  known=run.best_predictions)
        if self.writes:
            # Before metrics.json, which tells classifier.py's --resume that the task is done.
            record = json.loads((self.folder / "config.json").read_text(encoding="utf-8"))
            with _writing(self.folder / MODEL_DIR):
                export_model(self.folder / MODEL_DIR, run.model, record, result, run.inputs.encoder.source.folder)
            with _writing(self.folder / "metrics.json"):
                atomic_write_json(self.folder / "metrics.json", result)
            self.add_hparams(_hparams(run), result)

    def stopped_note(self) -> str:
        return f"checkpoint saved; resume with --resume {self.folder}"


class InMemory(Outputs):
    """An ablation trial's outputs: no files, no checkpoints (a trial is cheap to rerun); the best weights
    are kept in memory, or with `final_weights` the model keeps its last ones (a sweep's trial reports its
    final evaluation). With `tensorboard`, the trial's curves go to that folder, and `hparams` with its
    best dev scores at the end. With `export_to`, the model it ends with is also written there as a model
    folder (tasks/export.py), as a finished run's RUN_DIR/model/."""

    def __init__(self, tensorboard=None, hparams: Optional[dict] = None, final_weights: bool = False,
                 export_to=None):
        self.tensorboard, self.hparams, self.final_weights = tensorboard, hparams, final_weights
        self.export_to = export_to
        self.best_weights = None

    def __repr__(self) -> str:
        return f"InMemory(tensorboard={str(self.tensorboard)!r})"

    def begin(self, run, resume):
        if self.tensorboard is not None:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(str(self.tensorboard))

    def keep_best(self, run):
        if not self.final_weights:
            self.best_weights = {k: v.detach().clone() for k, v in run.model.state_dict().items()}

    def restore_best(self, run):
        if not self.final_weights:
            run.model.load_state_dict(self.best_weights)

    def finish(self, run, result):
        if self.export_to is not None:
            with _writing(Path(self.export_to)):
                export_model(self.export_to, run.model, run_record(run), result, run.inputs.encoder.source.folder,
                             scores="final" if self.final_weights else "best")
        if self.writer is not None and self.hparams is not None:
            self.add_hparams(self.hparams, result)


@dataclass
class Run:
    """One fine-tuning, built once by `build`; only `state` (and the weights) move."""
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


def fit(config: TrainConfig, inputs: RunInputs, outputs, encoder: Optional[minbert.BertModel] = None,
        resume: bool = False, callbacks=()) -> dict:
    """Fine-tune and evaluate; returns the metrics (metrics.json's) and, under "model", the best evaluation's model
    (the final one for `InMemory(final_weights=True)`).

    `outputs`: a run folder (a path or a RunFolder), or InMemory. `encoder` replaces the pretrained one
    (an ablation's modified copy). `resume` continues from the folder's checkpoint. `callbacks` watch the
    run (see Callback).
    """
    if not isinstance(outputs, Outputs):
        outputs = RunFolder(outputs)
    run = build(config, inputs, outputs, encoder, callbacks)
    if resume:
        restore(run)
    else:
        start(run)
    distribute(run)
    outputs.begin(run, resume)
    try:
        with _Stop() as stop:
            run.started = time.time()
            while run.state.global_step < run.total_steps or not run.state.evaluated():
                run_epoch(run, stop)
                if evaluation_due(run) and not run.state.evaluated():
                    evaluate_and_keep_best(run)
                if epoch_done(run):
                    run.state.epoch += 1
                    run.state.step_in_epoch = 0
                outputs.save_checkpoint(run)
                stop_if_asked(run, agreed_signal(stop.signal, inputs.world))  # a signal during the evaluation
        result = finish(run)
    finally:
        outputs.close()
    result["model"] = run.model
    return result


def training_plan(config: TrainConfig, inputs: RunInputs) -> tuple:
    """The training splits (config's seeded fraction of each task's), the sampler's name and the sampler:
    what decides the steps of an epoch."""
    train = {t: subsample_split(inputs.data[t]["train"], config.data_fraction, config.seed) for t in inputs.tasks}
    sampler_name = "union" if config.surgery != "none" else config.sampler
    sampler = build_sampler(sampler_name, {t: s.lengths for t, s in train.items()}, config.batch_size,
                            config.seed, bucket=not config.no_bucketing, num_epochs=config.epochs)
    return train, sampler_name, sampler


def build(config: TrainConfig, inputs: RunInputs, outputs: Outputs, encoder: Optional[minbert.BertModel] = None,
          callbacks=()) -> Run:
    """A fresh run: model, data order, optimizer and schedule, seeded by config.seed."""
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    np.random.seed(config.seed)
    model = build_model(config, inputs, encoder)
    train, sampler_name, sampler = training_plan(config, inputs)
    per_epoch = sampler.steps_per_epoch()
    total = per_epoch * config.epochs if config.max_steps is None else min(config.max_steps, per_epoch * config.epochs)
    optimizer = make_optimizer(config, model)
    minbert.drop_cast_weights_on_step(optimizer, model)  # fused AdamW leaves no version bump to see
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total, config.warmup, config.lr_schedule))
    smart = Smart(model, config.smart_config(), config.pair_mode) if config.smart else None
    specs = {t: task_spec(t, config.pair_mode, config.task_heads) for t in inputs.tasks}
    console = [Console()] if outputs.prints and inputs.world.main else []
    return Run(config, inputs, model, train, sampler, sampler_name, per_epoch, total, optimizer, scheduler, smart,
               shared=[p for p in model.encoder.parameters() if p.requires_grad],
               surgery_rng=np.random.default_rng(config.seed),
               loss_fn=TaskLoss(model, specs, smart, inputs.precision),
               outputs=outputs, callbacks=[outputs, *console, *callbacks])


def start(run: Run) -> None:
    """A fresh start: under torchrun the same weights on every rank, a different dropout stream on each."""
    world = run.inputs.world
    if world.active:
        torch.manual_seed(int(np.random.SeedSequence([run.config.seed, world.rank]).generate_state(1)[0]))


def restore(run: Run) -> None:
    """Continue from the last checkpoint: weights, optimizer, schedule, SMART's EMA copy, every RNG, the position."""
    path = run.outputs.checkpoint_path()
    ckpt = load_checkpoint(path)
    world = run.inputs.world
    try:
        run.model.load_state_dict(ckpt["model"])
        run.optimizer.load_state_dict(ckpt["optimizer"])
        run.scheduler.load_state_dict(ckpt["scheduler"])
        if run.smart is not None:
            run.smart.load_state_dict(ckpt["smart"])
        run.surgery_rng.bit_generator.state = json.loads(ckpt["surgery_rng"])
        run.state = TrainState.from_json(ckpt["progress"])
        per_rank = ckpt.get("rng_ranks") or []
        set_rng_state(per_rank[world.rank] if world.active and len(per_rank) == world.size else ckpt["rng"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:  # another run's, or another version's
        raise CheckpointError(f"{path}: does not fit this run ({_first_line(e)})") from None


def distribute(run: Run) -> None:
    """Under torchrun, the loss is computed through DDP, which averages the gradients over the ranks."""
    device = run.inputs.device
    if run.inputs.world.active:
        minbert.fast.rows_backward(run.model, False)  # DDP averages only what autograd hands it
        # Each forward uses one task's head only, so the other heads are unused parameters.
        run.loss_fn = DistributedDataParallel(run.loss_fn, device_ids=[device.index] if device.type == "cuda" else None,
                                              find_unused_parameters=True)


def epoch_done(run: Run) -> bool:
    return run.state.step_in_epoch >= run.steps_per_epoch


def evaluation_due(run: Run) -> bool:
    """After the last step; then every --eval-every steps if set, else at every epoch's end."""
    state, every = run.state, run.config.eval_every
    if state.global_step >= run.total_steps:
        return True
    return state.global_step % every == 0 if every else epoch_done(run)


def pause_due(run: Run) -> bool:
    """After a step: training returns to the loop in `fit` at an epoch's end and where an evaluation is due."""
    return epoch_done(run) or evaluation_due(run)


def run_epoch(run: Run, stop: "_Stop") -> None:
    """Train from the state's position to the end of its epoch, of the run, or to the next evaluation;
    checkpoint when due or stopped."""
    state, every = run.state, run.config.checkpoint_every
    plan = run.sampler.plan(state.epoch)
    run.model.train()
    if run.config.freeze_until == "all":
        # A wholly frozen encoder is a fixed feature extractor: no dropout inside it, and its
        # forward takes the faster inference path (only the heads and their dropout train).
        run.model.encoder.eval()
    _notify(run, "on_plan", plan)
    while not epoch_done(run) and state.global_step < run.total_steps:
        step = plan[state.step_in_epoch]
        losses = train_step(run, step)
        if losses is None:
            state.nonfinite_skipped += 1
        else:
            run.scheduler.step()
            if run.smart is not None:
                run.smart.update_ema(state.global_step + 1, run.total_steps)
        state.step_in_epoch += 1
        state.global_step += 1
        _notify(run, "on_step", StepInfo(step, losses))
        at_end = pause_due(run)
        signum = agreed_signal(stop.signal, run.inputs.world)  # all ranks stop at the same step
        # At an epoch's or the run's end, or an evaluation, the checkpoint after it follows.
        if signum is not None or (every and state.global_step % every == 0 and not at_end):
            run.outputs.save_checkpoint(run)
            stop_if_asked(run, signum)
        if at_end:
            break
    _notify(run, "on_epoch_end")


def evaluate_and_keep_best(run: Run) -> dict:
    """Dev metrics of the current weights into the history; the outputs keep them if they are the best yet."""
    state = run.state
    clock = time.perf_counter()
    predictions = {}
    metrics = evaluate(run.model, run.inputs, run.config.eval_batch_size, show=run.outputs.prints,
                       predictions=predictions)
    seconds = time.perf_counter() - clock
    entry = {"epoch": state.epoch + 1, "step": state.global_step, "dev": metrics,
             "elapsed_s": round(time.time() - run.started, 1)}
    state.history.append(entry)
    _notify(run, "on_evaluate", metrics, seconds)
    if state.best is None or (metrics["overall"] or 0) > state.best["dev"]["overall"]:
        state.best = entry
        run.best_predictions = predictions  # the finished run's dev files, not predicted again
        run.outputs.keep_best(run)
    return metrics


def finish(run: Run) -> dict:
    """The result, with the best evaluation's weights back in the model; the outputs write their last files."""
    state, best = run.state, run.state.best
    result = {"final": state.history[-1]["dev"], "best": best["dev"], "best_epoch": best["epoch"],
              "best_step": best["step"], "history": state.history, "steps": state.global_step,
              "nonfinite_skipped": state.nonfinite_skipped}
    if best["step"] != state.global_step:
        run.outputs.restore_best(run)
    run.outputs.finish(run, result)
    return result


def stop_if_asked(run: Run, signum: Optional[int]) -> None:
    if signum is not None:
        name = signal.Signals(signum).name
        raise Interrupted(signum, f"stopped by {name} at step {run.state.global_step}; {run.outputs.stopped_note()}")


def _notify(run: Run, hook: str, *args) -> None:
    for callback in run.callbacks:
        method = getattr(callback, hook, None)  # a callback need not define every hook
        if method is not None:
            method(run, *args)


class Console(Callback):
    """A command's progress on stdout: a bar per epoch on a terminal (else a line every 30 s), the dev scores."""

    def __init__(self):
        self.bar = self.lines = None

    def on_plan(self, run, plan):
        state, terminal = run.state, sys.stdout.isatty()
        if self.lines is None and not terminal:
            self.lines = _ProgressLines(run.total_steps, state.global_step)
        self.bar = _bar(terminal, run.steps_per_epoch, state.step_in_epoch, f"epoch {state.epoch + 1}/{run.config.epochs}")

    def on_step(self, run, info):
        if self.bar is not None:
            self.bar.update(1)
        if self.lines is not None:
            self.lines.step(run.state.global_step, info.examples, info.losses)

    def on_epoch_end(self, run):
        if self.bar is not None:
            self.bar.close()

    def on_evaluate(self, run, metrics, seconds):
        entry = run.state.history[-1]
        print(f"epoch {entry['epoch']} step {entry['step']}: " +
              " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if v is not None) +
              f" ({entry['elapsed_s']:.0f}s)", flush=True)


class _ProgressLines:
    """Without a terminal (`nohup ... > log`), one line every `every` seconds instead of a bar."""

    def __init__(self, total: int, done: int, every: float = 30.0):
        self.total, self.every = total, every
        self.start_step, self.examples = done, 0
        self.started = self.last = time.time()

    def step(self, global_step: int, examples: int, losses: Optional[dict]):
        self.examples += examples
        now = time.time()
        if now - self.last < self.every:
            return
        self.last = now
        rate = (global_step - self.start_step) / (now - self.started)
        left = (self.total - global_step) / rate if rate > 0 else float("inf")
        shown = " ".join(f"{k.rsplit('/', 1)[-1]}={v:.4f}" for k, v in (losses or {}).items()
                         if k.startswith("train/loss/"))
        print(f"step {global_step}/{self.total} {shown} {self.examples / (now - self.started):.1f} ex/s, "
              f"{left / 60:.1f} min left in training", flush=True)


def _bar(show: bool, total: int, initial: int, desc: str):
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True, leave=False)


_HPARAMS = ("lr", "batch_size", "epochs", "sampler", "surgery", "smart", "freeze_until", "pair_mode",
            "pooling", "task_heads", "precision", "seed", "data_fraction", "model")


def _hparams(run: Run) -> dict:
    """The options TensorBoard's hparams table shows, with the precision used."""
    values = {**run.config.to_dict(), "precision": run.inputs.precision}
    return {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in values.items() if k in _HPARAMS}


class TaskLoss(nn.Module):
    """One task's loss on one batch, plus SMART's terms: the forward that DDP wraps.

    `weight` scales the batch's mean loss by the rank's share of the global batch
    (1 in a single process), and the logged values with it, so that their mean
    over ranks is the global batch's mean.
    """

    def __init__(self, model: MultitaskModel, specs: dict, smart: Optional[Smart], precision: str):
        super().__init__()
        self.model = model
        self.specs, self.smart, self.precision = specs, smart, precision

    def forward(self, task: str, batch: dict, weight: float = 1.0):
        labels = batch.pop("labels")
        device = labels.device
        with autocast(device, self.precision):
            outputs = self.model(task, batch)
            loss = self.specs[task].loss(outputs, labels)
            logs = {f"train/loss/{task}": loss.detach()}
            if self.smart is not None:
                for name, value in self.smart.regularisers(task, batch, outputs).items():
                    logs[f"smart/{name}/{task}"] = value.detach()
                    loss = loss + value
        if weight != 1.0:
            loss = loss * weight
            logs = {k: v * weight for k, v in logs.items()}
        return loss, logs


def train_step(run: Run, step: dict) -> Optional[dict]:
    """One optimizer step; returns the values to log, or None if the step was skipped (non-finite).

    Each task's batch runs forward and backward in turn (one graph in memory at a time). Under
    DDP, gradients are all-reduced once per step: the backward of the step's last task syncs,
    the others run under `no_sync` and accumulate. With gradient surgery every backward runs
    under `no_sync`, and each task's flattened encoder gradient is all-reduced (averaged over
    ranks) on its own before the projection, so PCGrad sees the global per-task gradients;
    the heads' gradients are all-reduced once at the end.
    """
    run.optimizer.zero_grad(set_to_none=True)
    surgery = run.config.surgery != "none"
    logs, task_grads = {}, {}
    for n, task in enumerate(step):
        task_logs = _task_backward(run, task, step[task], accumulate=surgery or n < len(step) - 1)
        bad = [v for v in task_logs.values() if not torch.isfinite(v)]
        if bad:
            return _nonfinite(run, f"loss ({bad[0].item()})", task)
        logs.update(task_logs)
        if surgery:
            task_grads[task] = all_reduce_mean_(flatten_grads(run.shared), run.inputs.world)
    if surgery:
        logs.update(_merge_task_gradients(run, task_grads))
    norm = minbert.clip_grad_norm_([p for p in run.model.parameters() if p.requires_grad], run.config.max_grad_norm)
    if not torch.isfinite(norm):  # a finite loss can still overflow in the backward pass
        return _nonfinite(run, f"gradient norm ({norm.item()})", ",".join(step))
    logs["train/grad_norm"] = norm
    run.optimizer.step()
    return {k: float(v) for k, v in logs.items()}


def _task_backward(run: Run, task: str, indices: list, accumulate: bool) -> dict:
    """One task's forward and backward on this rank's share of its batch; the values to log, averaged over ranks."""
    world = run.inputs.world
    local, weight = local_batch_indices(indices, world)
    batch = make_batch(run.train[task], local, run.inputs.tokenizer, run.inputs.device)
    with run.loss_fn.no_sync() if world.active and accumulate else nullcontext():
        loss, logs = run.loss_fn(task, batch, weight)
        if run.config.surgery != "none":
            for p in run.shared:
                p.grad = None
        loss.backward()  # even of a non-finite loss: DDP's all-reduce, once begun, must complete
    return _mean_over_ranks(logs, world)  # so every rank sees the same non-finite loss


def _merge_task_gradients(run: Run, task_grads: dict) -> dict:
    """Gradient surgery: the per-task encoder gradients combined into one (PCGrad or dominant), the heads'
    averaged over ranks; returns the values to log."""
    world, logs = run.inputs.world, {}
    if world.active:
        in_shared = {id(p) for p in run.shared}
        heads = [p for p in run.model.parameters() if p.grad is not None and id(p) not in in_shared]
        assign_flat_grad(heads, all_reduce_mean_(flatten_grads(heads), world))
    combine = pcgrad if run.config.surgery == "pcgrad" else (lambda g, rng: dominant(g))
    if len(task_grads) > 1:
        merged, stats = combine(task_grads, run.surgery_rng)
        logs["surgery/conflicts"] = stats.conflicts
        for (a, b), cos in stats.cosines.items():
            logs[f"surgery/cos/{a}-{b}"] = cos
    else:
        merged = next(iter(task_grads.values()))
    assign_flat_grad(run.shared, merged)
    return logs


def _mean_over_ranks(logs: dict, world: World) -> dict:
    """The loss values of all ranks' shares, as the global batch's means (one all-reduce)."""
    if not world.active:
        return logs
    values = all_reduce_mean_(torch.stack([v.float() for v in logs.values()]), world)
    return dict(zip(logs, values))


def _nonfinite(run: Run, what: str, task: str) -> None:
    """With --skip-nonfinite the step is dropped (None); otherwise the run stops, before any checkpoint
    could store the damage."""
    if not run.config.skip_nonfinite:
        raise RunFailure(f"non-finite {what} at step {run.state.global_step + 1} on task {task}; the last good "
                         f"checkpoint is kept (use --skip-nonfinite to skip such batches)")
    run.optimizer.zero_grad(set_to_none=True)
    return None


def write_all_predictions(model, inputs: RunInputs, folder: Path, config: TrainConfig, show: bool = False,
                          splits=("dev", "test"), known: Optional[dict] = None) -> dict:
    """Dev and test predictions of every task, under the course's names (Part 1's when
    `config.prediction_mode` names a Part-1 mode); returns {(task, split): predictions}.
    `known`: predictions already made by this model, {(task, split): list}, written as they are."""
    written = {}
    for task in inputs.tasks:
        for split in splits:
            part = inputs.data[task].get(split)
            if part is None:
                continue  # the reader already said, in one line, that the file is missing
            values = (known or {}).get((task, split))
            if values is None:
                values = predict(model, part, inputs.tokenizer, inputs.device, config.eval_batch_size,
                                 inputs.precision, inputs.world, label=f"{split} predictions {task}" if show else None)
            if inputs.world.main:
                write_predictions(folder, task, split, part.ids, values, config.prediction_mode)
            written[task, split] = values
    return written

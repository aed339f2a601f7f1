"""The multitask training loop, shared by `train_multitask.py` and `ablate.py`.

`prepare(args)` loads the checkpoint, the tokenizer and the tokenised data
once; `fit(args, inputs, out_dir)` fine-tunes a copy of the encoder with the
three heads and leaves in `out_dir` everything a run promises: config.json,
TensorBoard events, checkpoints (latest and best), metrics.json and the
course's prediction files. Every file is written atomically, and a killed
run resumes from its last checkpoint with the same result as an unbroken one.
"""
import copy
import io
import json
import math
import os
import pickle
import platform
import random
import signal
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
from .fileio import atomic_save_torch, atomic_write_json, remove_stale_temp_files
from .gradient_surgery import assign_flat_grad, dominant, flatten_grads, pcgrad
from .heads import MultitaskModel, task_spec
from .metrics import overall_score, score
from .predictions import write_predictions
from .registry import get_task
from .samplers import build_sampler
from .smart import Smart, SmartConfig

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


def load_encoder(args) -> minbert.BertModel:
    """The default model falls back to the embedded one with a warning; a named one never does."""
    return minbert.from_pretrained(args.model, fallback_to_embedded=args.model == minbert.DEFAULT_MODEL)


def prepare(args, warn: Optional[Callable] = None, world: World = SINGLE) -> RunInputs:
    if not world.main:
        warn = _silent  # rank 0 reports the data problems, once
    encoder = load_encoder(args)
    if args.freeze_until != "all":
        resolve_freeze_until(encoder, args.freeze_until)  # a bad K fails before any data work
    # Never more tokens than the model has positions, whatever its tokenizer_config.json claims.
    positions = encoder.config.max_position_embeddings
    tokenizer = minbert.Tokenizer.from_folder(encoder.source.folder, max_length=positions)
    data_dir = ensure_data_dir(args.data_dir)
    data, record, lengths = {}, {}, {}
    for task in args.task_list:
        lengths[task] = min(args.max_length or get_task(task).max_length, tokenizer.max_length)
        splits = data_mod.read_task(data_dir, task, strict=args.strict_data, warn=warn)
        record[task] = {s: (d.describe() if d is not None else None) for s, d in splits.items()}
        data[task] = {s: (encode_split(d, tokenizer, args.pair_mode, lengths[task]) if d is not None else None)
                      for s, d in splits.items()}
    device = device_for(world, resolve_device(args.device))
    resolve_run_precision(args, device)
    return RunInputs(encoder, tokenizer, data, record, device, tuple(args.task_list), lengths, world=world)


def resolve_run_precision(args, device: torch.device) -> None:
    """`--precision auto` becomes the precision this device runs fast; config.json keeps both."""
    args.precision_requested = getattr(args, "precision_requested", args.precision)
    args.precision = minbert.resolve_precision(args.precision, device)


def precision_note(args, device: torch.device) -> str:
    """How the precision was chosen, for the run's first line."""
    native = minbert.native_bf16(device)
    if args.precision_requested == "auto":
        why = "native bf16" if native else "no native bf16 on this device: emulated bf16 trains 2-3x slower"
        return f"precision {args.precision} (auto: {why})"
    if args.precision == "bf16" and not native:
        return "precision bf16 (emulated on this device: 2-3x slower than --precision fp32)"
    return f"precision {args.precision}"


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
            precision: str, world: World = SINGLE) -> list:
    """Predictions in the split's order; batches sorted by length so little is padding.

    Under torchrun the batches are dealt out to the ranks and the predictions gathered:
    every rank returns the whole list, the same as one process would.
    """
    model.eval()
    spec = task_spec(split.task, model.pair_mode)
    order = sorted(range(len(split)), key=split.lengths.__getitem__)
    mine = {}
    for b, start in enumerate(range(0, len(order), batch_size)):
        if b % world.size != world.rank:
            continue
        idx = order[start:start + batch_size]
        batch = make_batch(split, idx, tokenizer, device)
        batch.pop("labels", None)
        with autocast(device, precision):
            values = spec.predict(model(split.task, batch)).float().cpu().tolist()
        mine.update(zip(idx, values))
    out = [None] * len(split)
    for part in gather_objects(mine, world):
        for i, v in part.items():
            out[i] = v
    return out


def evaluate(model, inputs: RunInputs, precision: str, batch_size: int, split: str = "dev") -> dict:
    metrics = {}
    for task in inputs.tasks:
        part = inputs.data[task][split]
        preds = predict(model, part, inputs.tokenizer, inputs.device, batch_size, precision, inputs.world)
        metrics[task] = score(get_task(task).metric, preds, part.labels.tolist())
    metrics["overall"] = overall_score(metrics)
    return metrics


def autocast(device: torch.device, precision: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


# ---------------------------------------------------------------------------- run record


def versions() -> dict:
    import tokenizers
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "tokenizers": tokenizers.__version__, "platform": platform.platform(),
           "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    head = Path(__file__).resolve().parents[1] / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            ref = (head.parent / ref[5:]).read_text().strip()
        out["minbert_commit"] = ref
    except OSError:
        pass
    return out


def run_record(args, inputs: RunInputs, extra: Optional[dict] = None) -> dict:
    arguments = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    return {"command": sys.argv, "arguments": arguments, "seed": args.seed,
            "model": inputs.encoder.source.to_dict() if inputs.encoder.source else None,
            "data": inputs.data_record, "max_length": inputs.max_lengths, "device": str(inputs.device),
            "versions": versions(),
            "precision": {"requested": getattr(args, "precision_requested", args.precision), "used": args.precision,
                          "native_bf16": minbert.native_bf16(inputs.device)},
            **(extra or {})}


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


def build_model(args, inputs: RunInputs, encoder: Optional[minbert.BertModel] = None) -> MultitaskModel:
    encoder = copy.deepcopy(inputs.encoder if encoder is None else encoder)
    if args.freeze_until == "all":
        frozen = minbert.freeze_encoder(encoder)
    else:
        frozen = minbert.freeze_until(encoder, args.freeze_until)
        if args.freeze_until > encoder.num_layers:
            print(f"note: --freeze-until {args.freeze_until} is beyond the model's {encoder.num_layers} layers: "
                  f"the whole encoder is frozen (only the pooler and heads train; --freeze-until all freezes "
                  f"the pooler too)", file=sys.stderr)
    model = MultitaskModel(encoder, inputs.tasks, args.pair_mode, args.pooling, dropout=args.head_dropout)
    if args.dropout is not None:
        minbert.set_dropout(model, args.dropout)
    model.frozen_layers = frozen
    return model.to(inputs.device)


def make_optimizer(args, model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if args.optimizer == "minbert":
        # the torch path's eps (torch.optim.AdamW's default), not the class's course default 1e-6
        return minbert.AdamW(groups, lr=args.lr, eps=1e-8)
    return torch.optim.AdamW(groups, lr=args.lr, fused=True)


def lr_lambda(total_steps: int, warmup: float):
    warm = max(1, int(total_steps * warmup))

    def f(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))
    return f


def fit(args, inputs: RunInputs, out_dir, encoder: Optional[minbert.BertModel] = None,
        resume: bool = False, record_extra: Optional[dict] = None, quiet: bool = False,
        write_outputs: bool = True, writer=None, save_predictions: bool = True) -> dict:
    """Fine-tune and evaluate; returns the metrics also written to metrics.json.

    `encoder` replaces the pretrained one (an ablation's modified copy); `writer` is
    a TensorBoard SummaryWriter to log into instead of the run's own; with
    `write_outputs=False` nothing is written at all (no checkpoints, no resume).
    `result["model"]` holds the best epoch's weights, as best.pt does.
    """
    out_dir = Path(out_dir)
    world = inputs.world
    writes = write_outputs and world.main  # under torchrun only rank 0 writes files
    if writes:
        out_dir.mkdir(parents=True, exist_ok=True)
    device, tok = inputs.device, inputs.tokenizer
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    model = build_model(args, inputs, encoder)
    train = {t: subsample_split(inputs.data[t]["train"], args.data_fraction, args.seed) for t in inputs.tasks}
    sampler_name = "union" if args.surgery != "none" else args.sampler
    sampler = build_sampler(sampler_name, {t: s.lengths for t, s in train.items()}, args.batch_size,
                            args.seed, bucket=not args.no_bucketing, num_epochs=args.epochs)
    per_epoch = sampler.steps_per_epoch()
    total = per_epoch * args.epochs if args.max_steps is None else min(args.max_steps, per_epoch * args.epochs)
    optimizer = make_optimizer(args, model)
    minbert.drop_cast_weights_on_step(optimizer, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total, args.warmup))
    smart = Smart(model, _smart_config(args), args.pair_mode) if args.smart else None
    specs = {t: task_spec(t, args.pair_mode) for t in inputs.tasks}
    shared = [p for p in model.encoder.parameters() if p.requires_grad]
    surgery_rng = np.random.default_rng(args.seed)
    loss_fn = TaskLoss(model, specs, smart, args.precision)

    state = {"epoch": 0, "step_in_epoch": 0, "global_step": 0, "best": None, "history": [],
             "nonfinite_skipped": 0}
    if resume:
        ckpt = load_checkpoint(out_dir / CHECKPOINT)
        try:
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            if smart is not None:
                smart.load_state_dict(ckpt["smart"])
            surgery_rng.bit_generator.state = json.loads(ckpt["surgery_rng"])
            state = json.loads(ckpt["progress"])
            per_rank = ckpt.get("rng_ranks") or []
            set_rng_state(per_rank[world.rank] if world.active and len(per_rank) == world.size
                          else ckpt["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as e:  # another run's, or another version's
            raise CheckpointError(f"{out_dir / CHECKPOINT}: does not fit this run ({_first_line(e)})") from None
        if writes:
            remove_stale_temp_files(out_dir)  # half-written files of the killed process
    else:
        if world.active:  # same weights on every rank, a different dropout stream on each
            torch.manual_seed(int(np.random.SeedSequence([args.seed, world.rank]).generate_state(1)[0]))
        if writes:
            with _writing(out_dir / "config.json"):
                atomic_write_json(out_dir / "config.json", run_record(args, inputs, {
                    **(record_extra or {}), "steps_per_epoch": per_epoch, "total_steps": total,
                    "frozen_layers": model.frozen_layers, "sampler": sampler_name, **world.describe(),
                    "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}))
    if world.active:
        # Each forward uses one task's head only, so the other heads are unused parameters.
        loss_fn = DistributedDataParallel(loss_fn, device_ids=[device.index] if device.type == "cuda" else None,
                                          find_unused_parameters=True)

    own_writer = writer is None and writes
    if own_writer:
        from torch.utils.tensorboard import SummaryWriter
        # Events after the checkpoint's step were logged by the killed process: TensorBoard drops them.
        writer = SummaryWriter(str(out_dir / "tensorboard"),
                               purge_step=state["global_step"] + 1 if resume else None)

    def checkpoint():
        if not write_outputs:
            return
        per_rank = rng_states(world)  # a collective: every rank takes part
        if not writes:
            return
        if writer is not None:
            writer.flush()  # every event up to this step is on disk before the step is
        save_checkpoint(out_dir, {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "smart": smart.state_dict() if smart else None,
            "surgery_rng": json.dumps(surgery_rng.bit_generator.state), "progress": json.dumps(state),
            "rng": per_rank[0], "rng_ranks": per_rank if world.active else None})

    def stop_if_asked(signum):
        if signum is not None:
            name = signal.Signals(signum).name
            raise Interrupted(signum, f"stopped by {name} at step {state['global_step']}; "
                                      f"checkpoint saved; resume with --resume {out_dir}")

    def evaluated() -> bool:
        """The dev scores of the current step are in the history (a resumed finished run)."""
        return bool(state["history"]) and state["history"][-1]["step"] == state["global_step"]

    def log(text):
        if not quiet and world.main:
            print(text, flush=True)

    show_bars = sys.stdout.isatty() and not quiet and world.main
    best_weights = None
    started = time.time()
    progress = _ProgressLines(total, state["global_step"]) if not show_bars and not quiet and world.main else None
    try:
        with _Stop() as stop:
            while state["global_step"] < total or not evaluated():
                epoch = state["epoch"]
                plan = sampler.plan(epoch)
                model.train()
                bar = _bar(show_bars, per_epoch, state["step_in_epoch"], f"epoch {epoch + 1}/{args.epochs}")
                while state["step_in_epoch"] < per_epoch and state["global_step"] < total:
                    step = plan[state["step_in_epoch"]]
                    losses = train_step(args, model, loss_fn, optimizer, step, train, tok, device, shared,
                                        surgery_rng, world, state["global_step"])
                    if losses is None:
                        state["nonfinite_skipped"] += 1
                    else:
                        scheduler.step()
                        if smart is not None:
                            smart.update_ema()
                    state["step_in_epoch"] += 1
                    state["global_step"] += 1
                    if bar is not None:
                        bar.update(1)
                    if progress is not None:
                        progress.step(state["global_step"], sum(len(ix) for ix in step.values()), losses)
                    if writer is not None and losses is not None:
                        for name, value in losses.items():
                            writer.add_scalar(name, value, state["global_step"])
                        writer.add_scalar("train/lr", scheduler.get_last_lr()[0], state["global_step"])
                    at_end = state["step_in_epoch"] >= per_epoch or state["global_step"] >= total
                    due = args.checkpoint_every and state["global_step"] % args.checkpoint_every == 0
                    signum = agreed_signal(stop.signal, world)  # all ranks stop at the same step
                    # At an epoch's or the run's end the checkpoint after the evaluation follows.
                    if signum is not None or (due and not at_end):
                        checkpoint()
                        stop_if_asked(signum)
                if bar is not None:
                    bar.close()
                epoch_done = state["step_in_epoch"] >= per_epoch
                metrics = evaluate(model, inputs, args.precision, args.eval_batch_size)
                entry = {"epoch": epoch + 1, "step": state["global_step"], "dev": metrics,
                         "elapsed_s": round(time.time() - started, 1)}
                state["history"].append(entry)
                if writer is not None:
                    for name, value in metrics.items():
                        if value is not None:
                            writer.add_scalar(f"dev/{name}", value, state["global_step"])
                log(f"epoch {epoch + 1} step {state['global_step']}: " +
                    " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if v is not None) +
                    f" ({entry['elapsed_s']:.0f}s)")
                if state["best"] is None or (metrics["overall"] or 0) > state["best"]["dev"]["overall"]:
                    state["best"] = entry
                    if writes:
                        with _writing(out_dir / BEST):
                            atomic_save_torch(out_dir / BEST, {"model": model.state_dict(), "epoch": epoch + 1})
                    elif not write_outputs:  # nowhere to save it: the caller still gets the best model
                        best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
                if epoch_done:
                    state["epoch"] += 1
                    state["step_in_epoch"] = 0
                checkpoint()
                stop_if_asked(agreed_signal(stop.signal, world))  # a signal during the evaluation

        best = state["best"]
        result = {"final": state["history"][-1]["dev"], "best": best["dev"], "best_epoch": best["epoch"],
                  "best_step": best["step"], "history": state["history"], "steps": state["global_step"],
                  "nonfinite_skipped": state["nonfinite_skipped"]}
        if not write_outputs and best["step"] != state["global_step"]:
            model.load_state_dict(best_weights)
        if write_outputs:
            if best["step"] != state["global_step"]:
                barrier(world)  # rank 0 has written best.pt
                best_state = torch.load(out_dir / BEST, map_location="cpu", weights_only=True)
                model.load_state_dict(best_state["model"])
            if save_predictions:
                with _writing(out_dir / "predictions"):
                    write_all_predictions(model, inputs, out_dir / "predictions", args)
            if writes:
                with _writing(out_dir / "metrics.json"):
                    atomic_write_json(out_dir / "metrics.json", result)
            if own_writer:
                writer.add_hparams(_hparams(args), {f"hparam/{k}": v for k, v in best["dev"].items()
                                                    if v is not None}, run_name="hparams")
    finally:
        if own_writer:
            writer.close()
    result["model"] = model
    return result


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


def _hparams(args) -> dict:
    keep = ("lr", "batch_size", "epochs", "sampler", "surgery", "smart", "freeze_until", "pair_mode",
            "pooling", "precision", "seed", "data_fraction", "model")
    return {k: (v if isinstance(v, (int, float, str, bool)) else str(v))
            for k, v in vars(args).items() if k in keep}


def _smart_config(args) -> SmartConfig:
    return SmartConfig(lambda_s=args.smart_lambda_s, eps=args.smart_eps, sigma=args.smart_sigma,
                       eta=args.smart_eta, steps=args.smart_steps, mu=args.smart_mu, beta=args.smart_beta)


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


def train_step(args, model, loss_fn, optimizer, step: dict, train: dict, tok, device, shared,
               surgery_rng, world: World, global_step) -> Optional[dict]:
    """One optimizer step; returns the values to log, or None if the step was skipped (non-finite).

    Each task's batch runs forward and backward in turn (one graph in memory at a time). Under
    DDP, gradients are all-reduced once per step: the backward of the step's last task syncs,
    the others run under `no_sync` and accumulate. With gradient surgery every backward runs
    under `no_sync`, and each task's flattened encoder gradient is all-reduced (averaged over
    ranks) on its own before the projection, so PCGrad sees the global per-task gradients;
    the heads' gradients are all-reduced once at the end.
    """
    optimizer.zero_grad(set_to_none=True)
    surgery = args.surgery != "none"
    logs, task_grads = {}, {}
    tasks = list(step)
    for n, task in enumerate(tasks):
        indices, weight = local_batch_indices(step[task], world)
        batch = make_batch(train[task], indices, tok, device)
        accumulate = world.active and (surgery or n < len(tasks) - 1)
        with loss_fn.no_sync() if accumulate else nullcontext():
            loss, task_logs = loss_fn(task, batch, weight)
            if surgery:
                for p in shared:
                    p.grad = None
            loss.backward()  # even of a non-finite loss: DDP's all-reduce, once begun, must complete
        task_logs = _mean_over_ranks(task_logs, world)  # so every rank sees the same non-finite loss
        bad = [v for v in task_logs.values() if not torch.isfinite(v)]
        if bad:
            return _nonfinite(args, optimizer, f"loss ({bad[0].item()})", global_step, task)
        logs.update(task_logs)
        if surgery:
            task_grads[task] = all_reduce_mean_(flatten_grads(shared), world)
    if surgery:
        if world.active:
            in_shared = {id(p) for p in shared}
            heads = [p for p in model.parameters() if p.grad is not None and id(p) not in in_shared]
            assign_flat_grad(heads, all_reduce_mean_(flatten_grads(heads), world))
        combine = pcgrad if args.surgery == "pcgrad" else (lambda g, rng: dominant(g))
        if len(task_grads) > 1:
            merged, stats = combine(task_grads, surgery_rng)
            logs["surgery/conflicts"] = stats.conflicts
            for (a, b), cos in stats.cosines.items():
                logs[f"surgery/cos/{a}-{b}"] = cos
        else:
            merged = next(iter(task_grads.values()))
        assign_flat_grad(shared, merged)
    norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                          args.max_grad_norm)
    if not torch.isfinite(norm):  # a finite loss can still overflow in the backward pass
        return _nonfinite(args, optimizer, f"gradient norm ({norm.item()})", global_step, ",".join(step))
    logs["train/grad_norm"] = norm
    optimizer.step()
    return {k: float(v) for k, v in logs.items()}


def _mean_over_ranks(logs: dict, world: World) -> dict:
    """The loss values of all ranks' shares, as the global batch's means (one all-reduce)."""
    if not world.active:
        return logs
    values = all_reduce_mean_(torch.stack([v.float() for v in logs.values()]), world)
    return dict(zip(logs, values))


def _nonfinite(args, optimizer, what: str, global_step: int, task: str) -> None:
    """With --skip-nonfinite the step is dropped (None); otherwise the run stops, before any checkpoint
    could store the damage."""
    if not args.skip_nonfinite:
        raise RunFailure(f"non-finite {what} at step {global_step + 1} on task {task}; the last good "
                         f"checkpoint is kept (use --skip-nonfinite to skip such batches)")
    optimizer.zero_grad(set_to_none=True)
    return None


def write_all_predictions(model, inputs: RunInputs, folder: Path, args):
    """Dev and test predictions of every task, under the course's names (Part 1's when
    `args.prediction_mode` names a Part-1 mode)."""
    for task in inputs.tasks:
        for split in ("dev", "test"):
            part = inputs.data[task][split]
            if part is None:
                continue  # the reader already said, in one line, that the file is missing
            values = predict(model, part, inputs.tokenizer, inputs.device, args.eval_batch_size,
                             args.precision, inputs.world)
            if inputs.world.main:
                write_predictions(folder, task, split, part.ids, values, args.prediction_mode)

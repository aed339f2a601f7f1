"""Checkpoints: written so that a kill at any moment leaves a good one, read so that a damaged or foreign one
is refused in one line, and restored with every RNG so that a resumed run ends as an unbroken one would."""
import io
import json
import os
import random
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from minbert import CheckpointError, RunFailure

from ..distributed import World, gather_objects, rank_seed
from ..fileio import atomic_save_torch
from ..saved.checkpoint_files import CHECKPOINT, PREVIOUS_CHECKPOINT, STAGED_CHECKPOINT, first_line, load_checkpoint
from .graphs import settle_lr
from .state import Run, TrainState


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
    saved = state["cuda"]
    visible = torch.cuda.device_count() if saved and torch.cuda.is_available() else 0
    for index, cuda_state in enumerate(saved[:visible]):
        torch.cuda.set_rng_state(cuda_state, index)
    if len(saved) > visible:  # resumed with fewer GPUs visible than the run saved states for
        print(f"note: the checkpoint holds the CUDA RNG states of {len(saved)} GPUs and {visible} are visible "
              f"here: restored {visible}; dropout on the others will not repeat the unbroken run's",
              file=sys.stderr)


def restore_rng(ckpt: dict, world: World, seed: int, step: int) -> None:
    """Every RNG as the checkpoint saved it for this rank. Resumed under torchrun with another number of
    processes than the run saved states for, every rank starts from the saved main state and then draws its
    own dropout stream (`rank_seed` of the run's seed, the rank and the step), as a fresh start does: without
    it every rank would drop the same units."""
    per_rank = ckpt.get("rng_ranks")   # None from one process; absent from checkpoints before torchrun
    if world.active and per_rank is not None and len(per_rank) == world.size:
        set_rng_state(per_rank[world.rank])
        return
    set_rng_state(ckpt["rng"])
    if world.active:
        torch.manual_seed(rank_seed(seed, world.rank, step))  # seeds every CUDA device too


def _tuples(x):
    return tuple(_tuples(i) for i in x) if isinstance(x, (list, tuple)) else x


@contextmanager
def writing(path: Path):
    """A failed write (disk full, permissions) stops the run in one line; the atomic writers
    have already left the file's previous version in place."""
    try:
        yield
    except OSError as e:
        raise RunFailure(f"cannot write {path}: {e.strerror or e}; its previous version is intact") from None


def save_checkpoint(out_dir: Path, state: dict):
    """The new checkpoint is complete on disk before the old one becomes checkpoint.prev.pt."""
    latest, staged = out_dir / CHECKPOINT, out_dir / STAGED_CHECKPOINT
    with writing(latest):
        atomic_save_torch(staged, state)
        if latest.exists():
            os.replace(latest, out_dir / PREVIOUS_CHECKPOINT)
        os.replace(staged, latest)


def restore(run: Run) -> None:
    """Continue from the last checkpoint: weights, optimizer, schedule, fp16's loss scale, SMART's EMA copy, the
    averaged copies (--average), every RNG, the position."""
    if run.folder is None:
        raise CheckpointError("nothing to resume from: this run keeps no checkpoints")
    path = run.folder / CHECKPOINT
    ckpt = load_checkpoint(path)
    world = run.inputs.world
    try:
        run.model.load_state_dict(ckpt["model"])
        run.optimizer.load_state_dict(ckpt["optimizer"])
        run.scheduler.load_state_dict(ckpt["scheduler"])
        settle_lr(run.optimizer, run.scheduler, run.graphs, run.inputs.device)
        if run.smart is not None:
            run.smart.load_state_dict(ckpt["smart"])
        if run.averages is not None:
            run.averages.load_state_dict(ckpt["averages"])
        if ckpt.get("scaler"):  # fp16's loss scale and its growth count
            run.scaler.load_state_dict(ckpt["scaler"])
        run.surgery_rng.bit_generator.state = json.loads(ckpt["surgery_rng"])
        run.state = TrainState.from_json(ckpt["progress"])
        restore_rng(ckpt, world, run.config.seed, run.state.global_step)
    except (KeyError, TypeError, ValueError, RuntimeError) as e:  # another run's, or another version's
        raise CheckpointError(f"{path}: does not fit this run ({first_line(e)})") from None

"""Checkpoints: written so that a kill at any moment leaves a good one, read so that a damaged or foreign one
is refused in one line, and restored with every RNG so that a resumed run ends as an unbroken one would."""
import io
import json
import os
import pickle
import random
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from minbert import CheckpointError, RunFailure

from ..distributed import World, gather_objects
from ..fileio import atomic_save_torch
from .state import Run, TrainState

CHECKPOINT = "checkpoint.pt"
PREVIOUS_CHECKPOINT = "checkpoint.prev.pt"
STAGED_CHECKPOINT = "checkpoint.next.pt"
BEST = "best.pt"


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

"""A run folder's checkpoint files: their names, and reading one safely.

Training writes them (tasks/training/checkpoint.py); a trained run is rebuilt from them
(saved_run.py). Reading refuses anything that is not plain tensors, and a damaged file is
reported in one line, offering the previous good checkpoint where there is one.
"""
import pickle
import zipfile
from pathlib import Path

import torch

from minbert import CheckpointError

CHECKPOINT = "checkpoint.pt"
PREVIOUS_CHECKPOINT = "checkpoint.prev.pt"
STAGED_CHECKPOINT = "checkpoint.next.pt"
BEST = "best.pt"


def task_best_file(task: str) -> str:
    """--per-task-best: the weights of `task`'s best dev evaluation, beside best.pt (the overall best's)."""
    return f"best-{task}.pt"


def first_line(e: Exception) -> str:
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
        raise CheckpointError(f"{path}: truncated or corrupted checkpoint ({first_line(e)})"
                              f"{_previous_offer(path)}") from None

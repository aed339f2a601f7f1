"""Where a run computes and what it runs on: the device, autocast, the CPU's name and the package versions.

Shared by training, evaluation, the studies and the benchmarks: speeds differ by CPU kind, so every
measurement and every run record names the machine it was made on.
"""
import os
import platform
import subprocess
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from minbert import UserError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"--device: unknown device {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name}: CUDA is not available on this machine")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        count = torch.cuda.device_count()  # else "invalid device ordinal" deep in the first copy to it
        raise UserError(f"--device {name}: this machine has {count} CUDA device(s), "
                        f"cuda:0{f' to cuda:{count - 1}' if count > 1 else ''}")
    return device


def use_tf32(device: torch.device, allowed: bool) -> bool:
    """TF32 for this process's fp32 matmuls on a CUDA GPU (products with a 10-bit mantissa, sums in fp32):
    tensor-core speed for --precision fp32 and for what stays fp32 under autocast, on GPUs from Ampere on,
    where torch leaves it off by default. Set only on CUDA: on a CPU the same switch lets oneDNN lower fp32
    matmuls too. Returns whether TF32 is in effect."""
    if device.type != "cuda":
        return False
    torch.set_float32_matmul_precision("high" if allowed else "highest")
    return allowed and torch.cuda.get_device_capability(device) >= (8, 0)


def implementation_warning(device: torch.device, implementation: str) -> Optional[str]:
    """One line when the fast path runs on a GPU, where nothing of it was measured to pay."""
    if device.type != "cuda" or implementation != "fast":
        return None
    return ("warning: --implementation fast on CUDA: measured on CPUs only, and its attention under dropout is "
            "written out with fp32 probabilities (about 0.9 GB a layer at batch 32 x 512 tokens) where the "
            "reference's SDPA keeps none; the reference is the default on a GPU")


LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str):
    return torch.autocast(device.type, dtype=LOW_PRECISION.get(precision, torch.bfloat16),
                          enabled=precision in LOW_PRECISION)


def versions() -> dict:
    import tokenizers
    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "tokenizers": tokenizers.__version__, "platform": platform.platform(), "cpu": cpu_model(),
           "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    out.update(source_commit(Path(__file__).resolve().parents[1]))
    return out


def busy_time(intervals) -> float:
    """The length of the union of (start, end) intervals, in their unit: the time at least one of them ran
    (workers, shards or kernels that overlapped count once; a gap between them not at all)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


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

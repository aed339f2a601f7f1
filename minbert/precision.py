"""Which arithmetic to train in: a 16-bit format only where the hardware computes it natively.

bf16 autocast halves memory traffic and, on hardware with bf16 units (CUDA GPUs from
Ampere on, x86 CPUs with AMX-BF16 or AVX512-BF16, Arm CPUs with BF16), multiplies the
matmul rate: 6x fp32 on a Xeon core with AMX. Without those units torch emulates
bf16 matmuls through fp32 conversions: on a Cascade Lake Xeon (AVX-512, no BF16) a bf16
matmul runs at a fifth of the fp32 rate, and a minBERT training step in bf16 takes
2.2-2.9x as long as in fp32 (docs/speed.md). GPUs with tensor cores but no bf16 (compute
capability 7.x: V100, T4) compute fp16 at 8x their fp32 rate; fp16's narrow range needs a
gradient scaler in training (tasks/training/step.py). `auto` picks whichever is fast here.

bf16 units are not enough on a CPU: an Intel Xeon reporting AVX512-BF16 without AMX
multiplied bf16 at half its fp32 rate and trained a step 1.64x slower in bf16
(docs/measurements/2026-11-29-bf16-without-amx-xeon.md). So on a CPU `auto` also times
one matmul in both precisions, once a process, and keeps bf16 only where it wins.
"""
import functools
import time

import torch

from .errors import UserError

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
FP16_CAPABILITY = (7, 0)  # tensor cores (Volta); older GPUs' fp16 is no faster than fp32, or far slower
_CPU_BF16_FEATURES = ("amx_bf16", "avx512_bf16", "bf16", "sve_bf16")  # x86 and Arm names
# A CPU's bf16 matmuls must beat its fp32 ones by this much for `auto` to train in bf16. The machines
# measured sit far from it (bf16 matmul peak over fp32's: 0.2x emulated on a Cascade Lake, 0.5x the Xeon
# above, 4.3x a Zen 5, 7x the AMX Xeon: docs/measurements), so timing noise flips none of them.
CPU_BF16_GAIN = 1.2
_PROBE_SHAPE = (256, 768, 768)   # (m, k, n): a feed-forward matmul's shape, about 1-4 ms a pass


def native_bf16(device) -> bool:
    """True where bf16 matmuls run on bf16 hardware rather than being emulated in fp32."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        capabilities = torch.cpu.get_capabilities()
        return any(capabilities.get(name, False) is True for name in _CPU_BF16_FEATURES)
    return False


@functools.cache
def cpu_bf16_speedup() -> float:
    """This CPU's bf16 matmul rate over its fp32 one (>1: bf16 faster), measured once a process in ~0.1 s: the
    best of several alternated passes of each, so a busy moment slows both alike."""
    m, k, n = _PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=generator), torch.randn(k, n, generator=generator)
    pairs = {torch.float32: (a, b), torch.bfloat16: (a.bfloat16(), b.bfloat16())}
    best = dict.fromkeys(pairs, float("inf"))
    for _ in range(7):
        for dtype, (x, y) in pairs.items():
            start = time.perf_counter()
            for _ in range(4):
                x @ y
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.float32] / best[torch.bfloat16]


def bf16_pays(device) -> bool:
    """Whether `auto` trains in bf16 on `device`: native bf16, and on a CPU `CPU_BF16_GAIN` faster matmuls."""
    if not native_bf16(device):
        return False
    return torch.device(device).type != "cpu" or cpu_bf16_speedup() >= CPU_BF16_GAIN


def native_fp16(device) -> bool:
    """True on a CUDA GPU with tensor cores. On a CPU fp16 is never offered (refused by `resolve_precision`)."""
    device = torch.device(device)
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= FP16_CAPABILITY


def native(precision: str, device) -> bool:
    """Whether `device` computes `precision` natively (fp32 always)."""
    return {"bf16": native_bf16, "fp16": native_fp16}.get(precision, lambda d: True)(device)


def resolve_precision(requested: str, device) -> str:
    """`auto` -> bf16 where native and, on a CPU, faster (`bf16_pays`), else fp16 on a CUDA GPU with tensor
    cores, else fp32; an explicit choice is kept (an emulated one says so in the run's first line), except
    fp16 off CUDA, a UserError."""
    if requested not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested == "fp16" and torch.device(device).type != "cuda":
        raise UserError(f"--precision fp16 needs a CUDA GPU (here {torch.device(device).type}, which computes fp16 "
                        f"through fp32 conversions); use --precision auto, bf16 or fp32")
    if requested != "auto":
        return requested
    if bf16_pays(device):
        return "bf16"
    return "fp16" if native_fp16(device) else "fp32"

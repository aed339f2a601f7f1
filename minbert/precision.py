"""Which arithmetic to train in: a 16-bit format only where the hardware computes it natively.

bf16 autocast halves memory traffic and, on hardware with bf16 units (CUDA GPUs from
Ampere on, x86 CPUs with AMX-BF16 or AVX512-BF16, Arm CPUs with BF16), multiplies the
matmul rate: 6x fp32 on a Xeon core with AMX. Without those units torch emulates
bf16 matmuls through fp32 conversions: on a Cascade Lake Xeon (AVX-512, no BF16) a bf16
matmul runs at a fifth of the fp32 rate, and a minBERT training step in bf16 takes
2.2-2.9x as long as in fp32 (docs/speed.md). GPUs with tensor cores but no bf16 (compute
capability 7.x: V100, T4) compute fp16 at 8x their fp32 rate; fp16's narrow range needs a
gradient scaler in training (tasks/training/step.py). `auto` picks whichever is fast here.
"""
import torch

from .errors import UserError

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
FP16_CAPABILITY = (7, 0)  # tensor cores (Volta); older GPUs' fp16 is no faster than fp32, or far slower
_CPU_BF16_FEATURES = ("amx_bf16", "avx512_bf16", "bf16", "sve_bf16")  # x86 and Arm names


def native_bf16(device) -> bool:
    """True where bf16 matmuls run on bf16 hardware rather than being emulated in fp32."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        capabilities = torch.cpu.get_capabilities()
        return any(capabilities.get(name, False) is True for name in _CPU_BF16_FEATURES)
    return False


def native_fp16(device) -> bool:
    """True on a CUDA GPU with tensor cores. On a CPU fp16 is never offered (refused by `resolve_precision`)."""
    device = torch.device(device)
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= FP16_CAPABILITY


def native(precision: str, device) -> bool:
    """Whether `device` computes `precision` natively (fp32 always)."""
    return {"bf16": native_bf16, "fp16": native_fp16}.get(precision, lambda d: True)(device)


def resolve_precision(requested: str, device) -> str:
    """`auto` -> bf16 where native, else fp16 on a CUDA GPU with tensor cores, else fp32; an explicit choice
    is kept (an emulated one says so in the run's first line), except fp16 off CUDA, a UserError."""
    if requested not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested == "fp16" and torch.device(device).type != "cuda":
        raise UserError(f"--precision fp16 needs a CUDA GPU (here {torch.device(device).type}, which computes fp16 "
                        f"through fp32 conversions); use --precision auto, bf16 or fp32")
    if requested != "auto":
        return requested
    if native_bf16(device):
        return "bf16"
    return "fp16" if native_fp16(device) else "fp32"

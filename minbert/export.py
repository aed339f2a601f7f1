"""Write a minBERT encoder, or a masked-language model, as a Hugging Face BERT checkpoint folder.

The folder is what `from_pretrained` reads back and what `transformers.BertModel.from_pretrained`
and `AutoTokenizer.from_pretrained` read: `config.json` (the architecture, `model_type` bert),
`model.safetensors` and the tokenizer files the model was loaded with (`vocab.txt`,
`tokenizer_config.json`, ...). Parameter names need no translation on the way out: `model.py`
names its modules as transformers' `BertModel` does, so `state_dict()` keys are that class's
checkpoint keys; `loading.hf_key_to_ours` only undoes the other spellings a checkpoint may use on
the way in (the `bert.` prefix of `BertFor*` classes, TF's LayerNorm gamma/beta).

A `BertForMaskedLM` (mlm.py) is written as transformers' class of that name: its keys (`bert.*`, `cls.*`) as they
are, the tied decoder tensors left out (they are the word embeddings and the head's bias; transformers ties
them again on loading, and safetensors refuses tensors that share memory), `architectures` ["BertForMaskedLM"].
Such a folder is also an encoder folder: `from_pretrained` strips `bert.` and skips `cls.*`.
"""
import dataclasses
import json
from pathlib import Path

from torch import nn

from .mlm import TIED, BertForMaskedLM
from .model import BertModel

WEIGHTS = "model.safetensors"
# Every tokenizer file a BERT checkpoint folder may hold; those the source folder has are copied.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def hf_config(model: BertModel | BertForMaskedLM) -> dict:
    """transformers' BertConfig fields for this model (its layer count as it is now: edits can drop layers)."""
    config = dataclasses.replace(model.config, num_hidden_layers=model.num_layers).to_dict()
    config.pop("implementation")  # how minBERT runs its forward, not part of the architecture
    architecture = "BertForMaskedLM" if isinstance(model, BertForMaskedLM) else "BertModel"
    return {"architectures": [architecture], "model_type": "bert", "position_embedding_type": "absolute",
            **config, "torch_dtype": "float32"}


def safetensors_of(module: nn.Module) -> bytes:
    """The module's tensors as a safetensors file, fp32, under its state_dict() keys (for the encoder,
    BertModel's key names; for an MLM model, BertForMaskedLM's, without the tied copies)."""
    from safetensors.torch import save
    tensors = {key: tensor.detach().float().contiguous().cpu() for key, tensor in module.state_dict().items()
               if not (isinstance(module, BertForMaskedLM) and key in TIED)}
    return save(tensors, metadata={"format": "pt"})


def save_pretrained(model: BertModel | BertForMaskedLM, folder, tokenizer_folder, write_bytes) -> list:
    """Write config.json, model.safetensors and the tokenizer files into `folder`; returns the paths.

    `tokenizer_folder`: where the model's tokenizer files are (the folder it was loaded from).
    `write_bytes(path, data)` writes one file; callers pass an atomic writer so that a killed
    process never leaves a half-written file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = [write_bytes(folder / "config.json", (json.dumps(hf_config(model), indent=2) + "\n").encode()),
               write_bytes(folder / WEIGHTS, safetensors_of(model))]
    for name in TOKENIZER_FILES:
        source = Path(tokenizer_folder) / name
        if source.exists() and source.resolve() != (folder / name).resolve():
            written.append(write_bytes(folder / name, source.read_bytes()))
    return written


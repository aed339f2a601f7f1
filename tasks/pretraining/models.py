"""The masked-language model a pretraining run starts from: a checkpoint's (`--from`), or a new one drawn at
one of Turc et al. (2019)'s sizes or from a config file (`--init-config`) with a checkpoint's vocabulary."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

import minbert
from minbert import BertConfig, CheckpointError, UserError

from ..saved.model_folder import read_pretraining

# name -> (layers, hidden size): Turc et al. 2019, "Well-Read Students Learn Better" (BERT-Tiny ... BERT-Medium),
# and BERT-Base; heads = hidden / 64, intermediate = 4 x hidden, as theirs.
SIZES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768)}
DEFAULT_VOCABULARY = "minilm"  # the embedded model's vocabulary: bert-base-uncased's 30,522 WordPieces


def sized_config(name: str, vocab_size: int) -> BertConfig:
    layers, hidden = SIZES[name]
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=hidden // 64, intermediate_size=4 * hidden)


def init_config(name_or_file: str, vocab_size: int) -> BertConfig:
    """A size's config, or a config.json file's (Hugging Face BertConfig fields); the vocabulary's size wins."""
    if name_or_file in SIZES:
        config = sized_config(name_or_file, vocab_size)
    else:
        path = Path(name_or_file)
        if not path.is_file():
            raise UserError(f"--init-config {name_or_file}: neither a size ({', '.join(SIZES)}) nor a "
                            f"config.json file")
        config = BertConfig.from_json(path)
        if config.vocab_size != vocab_size:
            config = dataclasses.replace(config, vocab_size=vocab_size)
    return config


def load_start(from_model: str, implementation: str, device) -> tuple:
    """(model, its tokenizer's folder, its record) of a checkpoint: its MLM head when it has one."""
    folder = Path(from_model).expanduser()
    if folder.is_dir() and not (folder / "model.safetensors").exists() and (folder / "model" / "config.json").exists():
        raise CheckpointError(f"--from {from_model}: a run folder; its model is {folder / 'model'}")
    model = minbert.mlm_from_pretrained(from_model, implementation=implementation, device=device)
    return model, Path(model.source.folder), {"from": model.source.to_dict()}


def draw_start(size: str, vocabulary: str, implementation: str, device, seed: int) -> tuple:
    """(a new model of `size`, the vocabulary's folder, its record), drawn from `seed` as BERT initialises."""
    folder, how = minbert.resolve(vocabulary)
    tokenizer = minbert.Tokenizer.from_folder(folder)
    config = dataclasses.replace(init_config(size, len(tokenizer)), implementation=implementation)
    torch.manual_seed(seed)
    model = minbert.build_mlm_model(config, device=device)
    record = {"init_config": size, "config": model.config.to_dict(), "vocabulary": {"requested": vocabulary,
              "folder": str(folder), "resolved_from": how, "size": len(tokenizer)}}
    return model, Path(folder), record


def lineage(start, init_config, sources: list) -> dict:
    """What a pretrained model is made of, written into each model folder it exports (pretraining.json):
    the checkpoint `start` it continued (a minbert ModelSource; and that checkpoint's own lineage, where
    pretrain.py made it) or, `start` None, the size `init_config` drawn anew, and the text it was trained on
    (the corpus's Sources). A run fine-tuned from the folder records it, and prepare_submit.py reads it to
    tell bert-base-uncased continued on the course's training sets from any other model."""
    if start is None:
        began = {"init_config": init_config}
    else:
        began = {"from": {"name": start.name, "requested": start.requested,
                          "resolved_from": start.resolved_from, "weights_sha256": start.weights_sha256}}
        parent = read_pretraining(start.folder)
        if parent is not None:
            began["from_pretraining"] = parent.lineage
    corpus = [{"kind": s.kind, "name": s.name, "path": s.path, "sha256": s.sha256} for s in sources]
    return {**began, "corpus": corpus}

"""A trained model as a folder others can use: `RUN_DIR/model/`.

The encoder is a Hugging Face BERT checkpoint (`minbert.export`: config.json,
model.safetensors with BertModel's key names, the tokenizer files), so
`transformers`, `--model RUN_DIR/model` and `minbert.from_pretrained` all read
it. This project's task heads go beside it: `heads.safetensors` (one
`TASK.weight`/`TASK.bias` pair per head) and `tasks.json`, which says what each
head reads and the options needed to run them (pair mode, pooling, max
lengths), so `saved_run.load_trained` can rebuild the whole model from the
folder alone. A `README.md` model card says how it was made. A siamese run
also gets sentence-transformers' module files (mean pooling, as it trained).
`tasks.json` is written last: a folder without it is incomplete.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert.export import safetensors_of, save_pretrained

from ..config import TrainConfig
from ..fileio import atomic_write_bytes, atomic_write_json, atomic_write_text
from ..heads import MultitaskModel
from ..registry import get_task
from .model_card import model_card
from .run_record import RunRecord, known_fields
from .run_result import RunResult

MODEL_DIR = "model"
HEADS_FILE = "heads.safetensors"
TASKS_JSON = "tasks.json"
PRETRAINING_JSON = "pretraining.json"  # pretrain.py's record in each model it writes: step, tokens, lineage
FORMAT = 1
# The options a head needs besides its weights (TrainConfig names), recorded in tasks.json.
HEAD_OPTIONS = ("pair_mode", "pooling", "task_heads", "head_dropout", "eval_batch_size", "prediction_mode",
                "precision")


def export_model(folder, model: MultitaskModel, record: RunRecord, result: RunResult, tokenizer_folder,
                 scores: str = "best") -> Path:
    """Write the model folder; `record` is the run's config.json, `result` its metrics, `scores` which of them
    ("best" or "final") the exported weights earned."""
    folder = Path(folder)
    save_pretrained(model.encoder, folder, tokenizer_folder, atomic_write_bytes)
    atomic_write_bytes(folder / HEADS_FILE, safetensors_of(model.heads))
    description, options = describe_heads(model, record.max_length), TrainConfig.from_record(record.arguments)
    siamese = model.pair_mode == "siamese"
    if siamese:
        write_sentence_transformers_files(folder, model.encoder.config.hidden_size,
                                          max(description["max_length"].values()))
    atomic_write_text(folder / "README.md", model_card(record, result, description["tasks"], siamese))
    atomic_write_json(folder / TASKS_JSON, {
        "format": FORMAT, "made_by": "minbert-multitask", "encoder": "model.safetensors", "heads": HEADS_FILE,
        "options": {k: getattr(options, k) for k in HEAD_OPTIONS}, **description,
        "dev": result.scores(scores)})
    return folder


def describe_heads(model: MultitaskModel, max_lengths: Optional[dict]) -> dict:
    """tasks.json's "tasks" (per task: its head, classes, what it reads, its tensors) and "max_length" (the
    run's recorded ones; each task's default where it recorded none)."""
    tensors = {}
    for key in model.heads.state_dict():
        tensors.setdefault(key.split(".")[0], []).append(key)
    tasks = {}
    for task in model.tasks:
        cfg = get_task(task)
        tasks[task] = {"head": cfg.head_kind, "num_classes": cfg.num_classes, "label_range": list(cfg.label_range),
                       "text_columns": list(cfg.text_columns), "reads": _reads(model, task),
                       "tensors": tensors.get(task, [])}
    recorded = max_lengths if max_lengths is not None else {}
    return {"tasks": tasks, "max_length": {t: recorded.get(t, get_task(t).max_length) for t in model.tasks}}


def _reads(model: MultitaskModel, task: str) -> str:
    """What a head's input is, in words, for people reading tasks.json."""
    cfg = get_task(task)
    high = cfg.label_range[1]
    if cfg.is_pair and model.pair_mode == "siamese":
        if cfg.kind.siamese_cosine:
            return f"no parameters: {high} * max(cosine(u, v), 0) of the mean-pooled sentences u, v"
        return "linear on [u, v, |u - v|, u * v] of the mean-pooled sentences u, v"
    vector = {"mean": "the mean of the token states", "pooler": "BERT's pooler output",
              "cls-token": "the [CLS] token's state"}[model.pooling]
    sequence = "[CLS] a [SEP] b [SEP]" if cfg.is_pair else "[CLS] a [SEP]"
    return f"linear on {vector} of {sequence}{cfg.kind.output_note(cfg)}"


def write_sentence_transformers_files(folder: Path, hidden_size: int, max_length: int) -> None:
    """modules.json (the encoder, then pooling) and 1_Pooling/config.json (mean pooling), with the
    run's max length in sentence_bert_config.json, for `SentenceTransformer(folder)`."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    atomic_write_text(folder / "modules.json", json.dumps(modules, indent=2) + "\n")
    atomic_write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": hidden_size, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    atomic_write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})


def pretraining_of(folder) -> dict | None:
    """pretrain.py's record of how the model in `folder` was made (its pretraining.json), or None for a model
    no pretrain.py run wrote (or an unreadable record, which tells nothing)."""
    try:
        return json.loads((Path(folder) / PRETRAINING_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Pretraining:
    """pretraining.json (pretrain.py's outputs): the step and tokens the model was saved at, the rung's token
    budget (--save-at), its held-out evaluation and its lineage; a key a record lacks reads None."""
    made_by: Optional[str] = None
    step: Optional[int] = None
    tokens: Optional[int] = None
    budget: Optional[int] = None
    held_out: Optional[dict] = None
    lineage: Optional[dict] = None

    @classmethod
    def from_json(cls, data: dict) -> "Pretraining":
        return cls(**known_fields(cls, data))


def read_pretraining(folder) -> Optional[Pretraining]:
    """pretraining_of's record, typed."""
    made = pretraining_of(folder)
    return None if made is None else Pretraining.from_json(made)

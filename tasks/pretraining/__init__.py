"""Masked-language-model pretraining (`pretrain.py`): a job of the training loop, not a loop of its own.

    corpus.py      the text: --corpus files and the --tasks' training splits, as documents of lines, hashed
    tokenised.py   each source tokenised once, cached by the hash of its content and tokenizer
    packing.py     documents packed into [CLS] ... [SEP] sequences of --max-length; the held-out share
    prepared.py    the corpus as a run uses it: read, tokenised, packed, split, recorded
    masking.py     BERT's dynamic masking (15%; 80/10/10), whole-word masking
    models.py      the model to start from: --from a checkpoint, or --init-config a size drawn anew
    job.py         MaskedLMJob: what tasks.training's `fit` drives (model, plan, loss, batches, evaluation)
    outputs.py     the run folder: config.json, the final model, the --save-at ladder, tokens/s
    options.py     the command line's flags and checks
    command.py     pretrain.py's command: parse or --resume, build, fit, report
    identity.py    a model named by what it is (name, weights' hash, recipe, masked accuracy), never by a path

Docs: docs/pretraining.md.
"""
from .command import parse_pretrain_command, pretrain, pretrain_command
from .identity import REBUILT, Model, identify, name_from_path
from .job import MLM, MaskedLMJob
from .masking import Masking
from .outputs import INFO_FILE, MODEL_DIR, ladder_folder

__all__ = ["INFO_FILE", "MLM", "MODEL_DIR", "REBUILT", "MaskedLMJob", "Masking", "Model", "identify", "ladder_folder",
           "name_from_path", "parse_pretrain_command", "pretrain", "pretrain_command"]

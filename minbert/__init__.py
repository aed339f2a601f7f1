"""minBERT: a from-scratch BERT that loads real checkpoints."""
import os

# Before torch starts OpenMP: with the default (active) policy, threads spin-wait for a core
# another process holds, 3-25x slower on a shared 2-core machine (bench/README.md). Overridable.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from .adamw import AdamW
from .config import BertConfig
from .errors import CheckpointError, DataError, RunFailure, UserError
from .loading import DEFAULT_MODEL, EMBEDDED_NAMES, ModelSource, from_pretrained, resolve
from .model import BertModel, EncoderOutput
from .precision import PRECISIONS, native_bf16, resolve_precision
from .surgery import (freeze_encoder, freeze_until, permute_layers, reinit_embeddings, reinit_heads, reinit_layers,
                      reinit_layers_from, set_dropout, truncate_layers)
from .tokenizer import Tokenizer

__all__ = ["AdamW", "BertConfig", "BertModel", "EncoderOutput", "CheckpointError", "DataError",
           "UserError", "RunFailure", "DEFAULT_MODEL", "EMBEDDED_NAMES", "ModelSource", "from_pretrained", "resolve",
           "freeze_encoder", "freeze_until", "permute_layers", "reinit_embeddings", "reinit_heads", "reinit_layers",
           "reinit_layers_from", "set_dropout", "truncate_layers", "Tokenizer", "PRECISIONS", "native_bf16",
           "resolve_precision"]

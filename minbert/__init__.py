"""minBERT: a from-scratch BERT that loads real checkpoints."""
from .adamw import AdamW
from .build import IMPLEMENTATION_CHOICES, build_mlm_model, build_model, resolve_implementation
from .clip import clip_grad_norm_
from .config import DEFAULT_IMPLEMENTATION, BertConfig
from .edits import (
    REINIT_POLICIES,
    freeze_encoder,
    freeze_until,
    permute_layers,
    reinit_embeddings,
    reinit_heads,
    reinit_layers,
    reinit_layers_from,
    set_dropout,
    truncate_layers,
)
from .errors import CheckpointError, DataError, RunFailure, UserError
from .loading import DEFAULT_MODEL, EMBEDDED_NAMES, ModelSource, from_pretrained, mlm_from_pretrained, resolve
from .mlm import IGNORE_INDEX, BertForMaskedLM, MaskedLMOutput
from .model import BertModel, EncoderOutput
from .precision import (
    CPU_BF16_GAIN,
    PRECISIONS,
    cpu_bf16_speedup,
    native,
    native_bf16,
    native_fp16,
    resolve_precision,
)
from .tokenizer import Tokenizer

__all__ = ["AdamW", "clip_grad_norm_", "BertConfig", "BertModel", "EncoderOutput", "build_model", "CheckpointError",
           "DataError", "UserError", "RunFailure", "DEFAULT_MODEL", "EMBEDDED_NAMES", "ModelSource",
           "from_pretrained", "resolve", "REINIT_POLICIES", "freeze_encoder", "freeze_until", "permute_layers",
           "reinit_embeddings", "reinit_heads", "reinit_layers", "reinit_layers_from", "set_dropout",
           "truncate_layers", "Tokenizer", "PRECISIONS", "CPU_BF16_GAIN", "cpu_bf16_speedup", "native",
           "native_bf16", "native_fp16", "resolve_precision",
           "DEFAULT_IMPLEMENTATION", "IMPLEMENTATION_CHOICES", "resolve_implementation", "BertForMaskedLM",
           "MaskedLMOutput", "IGNORE_INDEX", "build_mlm_model", "mlm_from_pretrained"]

"""The model's shape, read from a checkpoint's `config.json`.

Everything size-dependent in the model comes from here, so the embedded
6 x 384 MiniLM and the course's 12 x 768 bert-base-uncased load through the
same code.
"""
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .errors import CheckpointError, read_json

IMPLEMENTATIONS = ("auto", "fast", "reference")
# The one default of every model builder and command line (--implementation): `auto`, which `build.py` resolves
# to the fast path on a CPU and the reference elsewhere.
DEFAULT_IMPLEMENTATION = "auto"


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    # How the forward pass runs, with the same modules and parameters: "fast" (fast.py: padding
    # skipped, cheaper dropout, cast-once evaluation weights), "reference" (model.py: plain padded BERT,
    # SDPA attention) or "auto" (build.py: fast on a CPU, else the reference). `build_model` and
    # `from_pretrained` read it; `BertModel(config)` is the reference whatever it says.
    implementation: str = DEFAULT_IMPLEMENTATION

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise CheckpointError(
                f"config: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}")
        if self.hidden_act not in ACTIVATIONS:
            raise CheckpointError(f"config: unsupported hidden_act {self.hidden_act!r} "
                                  f"(supported: {', '.join(ACTIVATIONS)})")
        if self.implementation not in IMPLEMENTATIONS:
            raise CheckpointError(f"config: unknown implementation {self.implementation!r} "
                                  f"(known: {', '.join(IMPLEMENTATIONS)})")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_json(cls, path) -> "BertConfig":
        path = Path(path)
        raw = read_json(path, CheckpointError, "config.json")
        if raw.get("model_type", "bert") != "bert":
            raise CheckpointError(f"{path}: model_type {raw['model_type']!r} is not a BERT model")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in raw.items() if k in known and v is not None}
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise CheckpointError(f"{path}: only absolute position embeddings are supported")
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise CheckpointError(f"{path}: {e}") from None

    def to_dict(self) -> dict:
        return asdict(self)


ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")

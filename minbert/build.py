"""The one place that chooses which implementation a model runs.

`model.py` is the reference and knows of no other implementation; `fast.py` builds on it. Models
are made here (and through `from_pretrained`, which calls `build_model`), so that nothing else,
the reference least of all, needs to import the fast path.

`auto`, the default of every builder and command line (`DEFAULT_IMPLEMENTATION`, declared once beside
the choices in config.py), is the fast path on a CPU, where it is measured faster (docs/speed.md),
and the reference elsewhere: the fast path's token regrouping synchronises host and device several times a forward
and its block sizes are tuned for oneDNN, and it has not been benchmarked on a GPU, whereas the
reference's attention is torch's fused `scaled_dot_product_attention` on CUDA.
"""
from dataclasses import replace

import torch

from .config import IMPLEMENTATIONS, BertConfig
from .errors import UserError
from .fast import use_fast_path
from .fast_mlm import use_fast_mlm
from .mlm import BertForMaskedLM
from .model import BertModel

IMPLEMENTATION_CHOICES = IMPLEMENTATIONS  # auto, fast, reference


def resolve_implementation(requested: str, device="cpu") -> str:
    """`auto` -> "fast" on a CPU, "reference" on any other device; an explicit choice is kept."""
    if requested not in IMPLEMENTATION_CHOICES:
        raise UserError(f"--implementation must be one of {', '.join(IMPLEMENTATION_CHOICES)}, got {requested!r}")
    if requested != "auto":
        return requested
    return "fast" if torch.device(device).type == "cpu" else "reference"


def build_model(config: BertConfig, device="cpu") -> BertModel:
    """A freshly initialised model of `config`'s architecture running `config.implementation`, resolved for
    `device` (where the model will run; it is built on the CPU) when it is `auto`.

    "reference": a plain `BertModel`. "fast": the same model given the fast path's forwards in place
    (`use_fast_path`), so the parameters, their initial values and the state dict are the same. The
    model's `config.implementation` is the one it runs.
    """
    config = replace(config, implementation=resolve_implementation(config.implementation, device))
    model = BertModel(config)
    return use_fast_path(model) if config.implementation == "fast" else model


def build_mlm_model(config: BertConfig, device="cpu") -> BertForMaskedLM:
    """A freshly initialised masked-language model (`mlm.py`), chosen as `build_model` chooses: "fast" gives the
    encoder and the head the fast forwards of `fast.py` and `fast_mlm.py` in place, the same parameters."""
    config = replace(config, implementation=resolve_implementation(config.implementation, device))
    model = BertForMaskedLM(config)
    return use_fast_mlm(model) if config.implementation == "fast" else model

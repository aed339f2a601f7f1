"""The one place that chooses which implementation a model runs.

`model.py` is the reference and knows of no other implementation; `fast.py` builds on it. Models
are made here (and through `from_pretrained`, which calls `build_model`), so that nothing else,
the reference least of all, needs to import the fast path.
"""
from .config import BertConfig
from .fast import use_fast_path
from .model import BertModel


def build_model(config: BertConfig) -> BertModel:
    """A freshly initialised model of `config`'s architecture running `config.implementation`.

    "reference": a plain `BertModel`. "fast": the same model given the fast path's forwards in place
    (`use_fast_path`), so the parameters, their initial values and the state dict are the same.
    """
    model = BertModel(config)
    return use_fast_path(model) if config.implementation == "fast" else model

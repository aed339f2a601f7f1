"""The layer ratios' null baseline as the findings read it: the kept ratios of an equal relative perturbation of
every layer (measured by `python -m tasks.ablation.perturbation`, whose docstring says how; each random direction's
ratio computed from its curves and floored as `perturbation.ratio` says)."""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..ablation.perturbation import FLOOR, PAIRS_PATH, PATH, RATIOS, curve_ratio, layers, ratio

# the names the findings, measures and report read here, wherever they are defined
__all__ = ("CAVEAT", "FLOOR", "PAIRS_PATH", "PATH", "RATIOS", "Null", "layers", "load", "ratio", "replicates")

# where the null is measured in another form than the line's effect
CAVEAT = {"hao-seeds-consistent-low": "perturbed against pretrained: the seed-vs-seed form (two perturbed copies "
                                      "against each other) is the follow-up's"}


@dataclass(frozen=True)
class Null:
    """A kept null baseline as the findings read it: the perturbation's file (its seeds' curves, its size)."""
    # each random direction's size, a share of each weight's norm (0: only pairs kept)
    relative: float = 0.0
    # per random direction (pair of directions in the pair form): {curve: values}
    curves: tuple = ()
    pairs: Optional["Null"] = None  # the pair form, where kept beside it (PAIRS_PATH's name)

    @classmethod
    def from_json(cls, data: dict, pairs: Optional["Null"] = None) -> "Null":
        return cls(data["relative"], tuple(s["curves"] for s in data["seeds"]), pairs)


def replicates(null: Optional[Null], curve: str, upper: str, lower: str, n: int) -> list:
    """The kept null's ratio of `curve` (upper / lower - 1), one per random direction ([] without it)."""
    return [curve_ratio(curves, curve, upper, lower,
                        n) for curves in (null.curves if null else ()) if curve in curves]


def load(path: Path = PATH) -> Optional[Null]:
    """The kept null baseline, or None; its pair form, where kept beside it (PAIRS_PATH's name), as its
    `pairs`."""
    path = Path(path)
    single = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    pairs = path.with_name(PAIRS_PATH.name)
    pairs = Null.from_json(json.loads(pairs.read_text(encoding="utf-8"))) if pairs.exists() else None
    if single is None:
        return Null(pairs=pairs) if pairs else None
    return Null.from_json(single, pairs)

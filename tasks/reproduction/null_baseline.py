"""The layer ratios' null baseline as the findings read it: the kept ratios of an equal relative perturbation of
every layer (measured by `python -m tasks.ablation.perturbation`, whose docstring says how; each random direction's
ratio computed from its curves and floored as `perturbation.ratio` says)."""
import json
from pathlib import Path

from ..ablation.perturbation import FLOOR, PAIRS_PATH, PATH, RATIOS, curve_ratio, layers, ratio

# the names the findings, measures and report read here, wherever they are defined
__all__ = ("CAVEAT", "FLOOR", "PAIRS_PATH", "PATH", "RATIOS", "layers", "load", "ratio", "replicates")

# where the null is measured in another form than the line's effect
CAVEAT = {"hao-seeds-consistent-low": "perturbed against pretrained: the seed-vs-seed form (two perturbed copies "
                                      "against each other) is the follow-up's"}


def replicates(null: dict, curve: str, upper: str, lower: str, n: int) -> list:
    """The kept null's ratio of `curve` (upper / lower - 1), one per random direction ([] without it)."""
    return [curve_ratio(s["curves"], curve, upper, lower, n) for s in (null or {}).get("seeds", ())
            if curve in (s.get("curves") or {})]


def load(path: Path = PATH):
    """The kept null baseline, or None; its pair form, where kept beside it (PAIRS_PATH's name), under "pairs"."""
    path = Path(path)
    single = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    pairs = path.with_name(PAIRS_PATH.name)
    if not pairs.exists():
        return single
    return {**(single or {}), "pairs": json.loads(pairs.read_text(encoding="utf-8"))}

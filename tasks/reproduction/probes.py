"""The probe run's scores, the best probe layer (chosen on held-out training rows, never on dev), and the measure of
Tamkin's 'not necessary' half, which re-draws that layer alone (follow-up tamkin-not-necessary).

Probe layer L is the output of the first L transformer layers (0: the embeddings'), so "the best probe layer
re-drawn" is transformer layer L - 1 re-drawn, every other layer pretrained; the 'not sufficient' half keeps
layers 0..L-1 pretrained and re-draws the rest (measures.tamkin_probe_not_sufficient).
"""
import math
from typing import Optional

import numpy as np

from ..ablation.statistics import paired_interval
from .verdicts import Row

ONE_LAYER = "one-layer"     # the follow-up's reinit-large sweep: the best probe layer re-drawn, and the full model


def probe_scores(results, ctx, layer: int, pooling: str, fraction: float, metric: str = "dev") -> dict:
    """{seed: the primary task's probe score} of one layer and pooling: on dev, or on the held-out share of the
    training rows ("heldout") at the penalty the probe chose on it (the probe study's info.holdout_score)."""
    task, config = ctx.tasks["primary"], f"layer={layer},pooling={pooling}"
    if metric == "dev":
        return results.values("probe", "probe", f"dev/{task}", config, fraction)
    return {r.seed: r.info["holdout_score"][task] for r in results.select("probe", "probe", config, fraction)}


def nothing_to_test() -> dict:
    """The estimate of a row with nothing to test (no interval, n 0)."""
    return {"n": 0, "mean": math.nan, "std": None, "ci95_low": None, "ci95_high": None}


def best_probe(results, ctx, fraction: float) -> tuple:
    """(layer, pooling) with the best mean held-out training score: chosen without the dev set."""
    candidates = [(layer, p) for layer in range(ctx.n + 1) for p in ("mean", "cls-token")
                  if probe_scores(results, ctx, layer, p, fraction, "heldout")]
    if not candidates:
        return None, None
    return max(candidates, key=lambda c: np.mean(list(probe_scores(results, ctx, *c, fraction, "heldout").values())))


def layer_to_redraw(results, ctx) -> tuple:
    """(the transformer layer whose output is the best probe layer at the large fraction, None where there is none
    to re-draw; why not, '' where there is one)."""
    best, _ = best_probe(results, ctx, ctx.scale.large)
    if best is None:
        return None, "no kept probe results at the large fraction: run python reproduce.py --only probe first"
    if best == 0:
        return None, "the best probe layer is the embeddings' output (probe layer 0): no transformer layer to re-draw"
    return best - 1, ""


def tamkin_probe_not_necessary(results, ctx, sweep: str = ONE_LAYER) -> list:
    """The full model (k = n) minus only the best probe layer re-drawn, paired by seed, at the large fraction, both
    arms from the follow-up's own reinit-large sweep (block=L:1 is layer L alone re-drawn, every other pretrained)."""
    layer, why = layer_to_redraw(results, ctx)
    large, metric = ctx.scale.large, f"dev/{ctx.tasks['primary']}"
    if layer is None:
        return [Row(why, nothing_to_test())]
    full = results.values("reinit-large", sweep, metric, f"from={ctx.n}", large)
    redrawn = results.values("reinit-large", sweep, metric, f"block={layer}:1", large)
    found: Optional[dict] = paired_interval(full, redrawn) if full and redrawn else None
    return [Row(f"k={ctx.n} minus only layer {layer} re-drawn (probe layer {layer + 1}, the best) at {large:g}",
                found)]

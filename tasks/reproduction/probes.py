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
    training rows ("heldout") at the penalty the probe chose on it."""
    task = ctx.tasks["primary"]
    out = {}
    for r in results.select("probe", "probe", f"layer={layer},pooling={pooling}", fraction):
        if metric == "dev":
            value = (r.get("dev") or {}).get(task)
        else:  # the held-out share of the training rows, at the penalty the probe chose on it
            info = r.get("info") or {}
            value = (info.get("holdout_score") or {}).get(task)
            if value is None:  # results written before holdout_score: the held-out score at the chosen penalty
                value = (info.get("holdout") or {}).get(task, {}).get(f"{(info.get('penalty') or {}).get(task, 0):g}")
        if value is not None:
            out[r["seed"]] = value
    return out


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
        return None, "no probe results at the large fraction (the probe experiment's kept run)"
    if best == 0:
        return None, "the best probe layer is the embeddings' output (probe layer 0): no transformer layer to re-draw"
    return best - 1, ""


def tamkin_probe_not_necessary(results, ctx, sweep: str = ONE_LAYER) -> list:
    """The full model (k = n) minus only the best probe layer re-drawn, paired by seed, at the large fraction, both
    arms from the follow-up's own reinit-large sweep (block=L:1 is layer L alone re-drawn, every other pretrained)."""
    layer, why = layer_to_redraw(results, ctx)
    large, metric = ctx.scale.large, f"dev/{ctx.tasks['primary']}"
    if layer is None:
        return [Row(why, {"n": 0, "mean": math.nan, "std": None, "ci95_low": None, "ci95_high": None})]
    full = results.values("reinit-large", sweep, metric, f"from={ctx.n}", large)
    redrawn = results.values("reinit-large", sweep, metric, f"block={layer}:1", large)
    found: Optional[dict] = paired_interval(full, redrawn) if full and redrawn else None
    return [Row(f"k={ctx.n} minus only layer {layer} re-drawn (probe layer {layer + 1}, the best) at {large:g}",
                found)]

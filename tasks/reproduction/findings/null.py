"""The layer-ratio lines re-declared against the null baseline (follow-up hao-null-perturbation, protocol 2).

Hao et al.'s JS and SVCCA ratios and Singh & Giovanardi's L2 ratio were first read against zero; an equal relative
perturbation of every layer (`tasks/reproduction/null_baseline.py`) already gives a ratio, since each layer's output
feeds the next (Hao et al. say so of SVCCA: "the output representation of higher layers undergoes more
transformations, so the change of SVCCA distance in higher layers is more dramatic") and L2 follows each layer's
weight norm. Here each line's effect is the fine-tuned ratio minus the null's, per seed against the null's random
directions (Welch: the null's spread is in the interval), and its SESOI is the first declaration's, now read above
what depth and norms alone give. The papers state no figure in their text (Hao et al. Figs. 1-2 and Singh &
Giovanardi Fig. 3 are plots without numbers), so no SESOI is taken from them. The seed-vs-seed and
dataset-vs-dataset lines need the null in their own form (two perturbed copies compared), not measured yet: their
row is pending.
"""
from dataclasses import replace

from . import hao, singh

_BY_ID = {f.id: f for f in (*hao.FINDINGS, *singh.FINDINGS)}
LABEL = "hao-null-perturbation"
_ABOVE = (" above the null: the fine-tuned ratio minus that of an equal relative perturbation of every layer (a "
          "change favouring no layer), which the first declaration's SESOI must exceed so that the excess is "
          "fine-tuning's own, not depth's or the weight norms'")


def _against(fid: str, tested: str, **keywords):
    f = _BY_ID[fid]
    return replace(f, protocol=2, sesoi_reason=f.sesoi_reason + _ABOVE, tested=tested, measure="against_null",
                   keywords=keywords, pilot=())


def _pending(fid: str, what: str):
    f = _BY_ID[fid]
    what += " (the null in pair form, two perturbed copies compared: python -m tasks.reproduction.null_baseline " \
            "has no pair mode yet)"
    return replace(f, protocol=2, tested=f"{what}: pending", measure="pending", pilot=(),
                   keywords=dict(what=what, follow_up=LABEL))


AGAINST_NULL = (
    _against("hao-attention-last", "mean JS top third / bottom third - 1 per seed at fraction 0.25, minus the "
             "null's per random direction (Welch)", curve="attention_js", upper="top", lower="bottom",
             label="JS top third / bottom third - 1"),
    _against("hao-svcca-intermediate-last", "mean SVCCA middle and top thirds / bottom third - 1 per seed at 0.25, "
             "minus the null's per random direction (Welch)", curve="svcca", upper="middle+top", lower="bottom",
             label="SVCCA middle and top / bottom - 1"),
    _against("singh-later-layers-move", "mean L2 top third / bottom third - 1 per seed at 0.03 and at 0.25, minus "
             "the null's per random direction (Welch): both rows must hold", curve="weight_l2", upper="top",
             lower="bottom", label="L2 top third / bottom third - 1", fractions=("small", "large")),
    _pending("hao-seeds-consistent-low", "seed-vs-seed ratios minus the null's"),
    _pending("hao-datasets-consistent-low", "dataset-vs-dataset ratios minus the null's"),
)

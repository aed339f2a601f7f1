"""The layer-ratio lines as declared since issue 54 (a revision after their data, findings/history.py): against the
null baseline.

Hao et al.'s JS and SVCCA ratios and Singh & Giovanardi's L2 ratio were first read against zero; an equal relative
perturbation of every layer (`tasks/ablation/perturbation.py`) already gives a ratio, since each layer's output
feeds the next (Hao et al. say so of SVCCA: "the output representation of higher layers undergoes more
transformations, so the change of SVCCA distance in higher layers is more dramatic") and L2 follows each layer's
weight norm. Here each line's effect is the fine-tuned ratio minus the null's, per seed against the null's random
directions (Welch: the null's spread is in the interval), and its SESOI is the first declaration's, now read above
what depth and norms alone give. The papers state no figure in their text (Hao et al. Figs. 1-2 and Singh &
Giovanardi Fig. 3 are plots without numbers), so no SESOI is taken from them. The seed-vs-seed and
dataset-vs-dataset lines compare two fine-tuned encoders with each other, so their null is its pair form: two copies
perturbed in independent directions, compared with each other the same way (`perturbation.py --pairs`); their rows
are pending until it is kept. For every model: each results folder's own null (null_baseline.py).
"""
from dataclasses import replace

from .. import measures
from .hao import FINDINGS as HAO
from .singh import FINDINGS as SINGH

_BY_ID = {f.id: f for f in (*HAO, *SINGH)}
_ABOVE = (" above the null: the fine-tuned ratio minus that of an equal relative perturbation of every layer (a "
          "change favouring no layer), which the first declaration's SESOI must exceed so that the excess is "
          "fine-tuning's own, not depth's or the weight norms'")


def _against(fid: str, tested: str, **keywords):
    f = _BY_ID[fid]
    return replace(f, sesoi_reason=f.sesoi_reason + _ABOVE, tested=tested, measure=measures.against_null,
                   keywords=keywords, pilot=())


PAIRS = "python -m tasks.ablation.perturbation --pairs 5"


def _against_pairs(fid: str, tested: str, label: str, source: str):
    """The line's ratios minus the null's pair form (measures.against_pair_null); pending until it is kept."""
    what = f"{label} minus the null's pair form: not kept yet ({PAIRS})"
    f = _against(fid, tested + ", minus the null's pair form (two copies perturbed in independent directions, "
                 "compared with each other) per pair of directions (Welch): both rows must hold",
                 curves=("svcca", "attention_js"), source=source, label=label, what=what, follow_up=PAIRS)
    return replace(f, measure=measures.against_pair_null)


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
    _against_pairs("hao-seeds-consistent-low", "seed-vs-seed SVCCA and attention JS, top third / bottom third - 1 "
                   "per pair of seeds at fraction 0.25 (jackknife)", "seed-vs-seed top / bottom - 1", "seeds"),
    _against_pairs("hao-datasets-consistent-low", "dataset-vs-dataset SVCCA and attention JS, top third / bottom "
                   "third - 1 per seed at fraction 0.25", "dataset-vs-dataset top / bottom - 1", "datasets"),
)

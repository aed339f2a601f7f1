"""When each line's rule (its rows, SESOI, interval model, direction) was declared, and every change to it since.

A rule is declared before its data when the commit that last changed it precedes the first sitting of every kept
run its first-run line reads (the sittings' dates: kept.py). A change after the data is a `Revision`: dated, with
what changed and what the line read before it; the report says so per line and counts those lines apart, and the
confirmatory run (follow_ups.CONFIRMATORY, registered before it trains) decides them on fresh seeds.
tests/tasks/reproduction/test_history.py checks each commit's date against git where the history is at hand.

Found by `git log -p` over the findings' modules (tasks/ablation/findings.py until 37497ff), measures.py,
statistics.py and verdicts.py from the first declaration on; wording, measure names and power keys are not the rule.
"""
from ..verdicts import Revision

DECLARED = Revision("2026-11-25 18:46", "964a14c", "declared: the five papers' findings with their SESOIs, measures "
                    "and the verdict rule", "")

# 0de79d3: intervals that carry a shared reference's noise, TOST at 90% for equivalences, each side of a several-row
# line at the level its claim needs; 4705a00: every part of a quote a row or a line, the heads' SESOI re-declared.
_INTERVALS = ("2026-11-26 10:39", "0de79d3")
_PARTS = ("2026-11-26 10:47", "4705a00")
_TOST = "equivalence read on the 90% interval (TOST) instead of the 95% one"
_SIDES = ("several rows: each side at the level its claim needs (intersection-union one way, Bonferroni the "
          "other) instead of every row widened to 1 - 0.05 / rows for both")
_HEADS = ("the seed the unit (n = 3) instead of the head (n = heads), so the shared reference's noise is in the "
          "interval")
_HEADS_SESOI = "the SESOI cut from 0.005 to 0.003, from the paper's own layer means"
TODAY = ("2026-11-28 17:09", "a3fdb20")   # issue 54's item 3: the ratio lines against their null
_NULL = ("effect = the model's ratio minus its own null's (tasks.ablation.perturbation: an equal relative "
         "perturbation of every layer), the null's spread in the interval (Welch), the floor as declared; "
         "was the ratio against zero")

REVISIONS = {
    "tamkin-permute": (Revision(*_INTERVALS, "interval model: seeds and orders in a two-level crossed model instead "
                                "of the random order as the unit", "reproduced, +0.046 [+0.038, +0.054]"),),
    "college-heads-top-help": (Revision(*_INTERVALS, _HEADS, "not reproduced (the head the unit, SESOI 0.005)"),
                               Revision(*_PARTS, _HEADS_SESOI, "undecided (the seed the unit, SESOI 0.005)")),
    "college-heads-bottom-hurt": (Revision(*_INTERVALS, _HEADS, "not reproduced (the head the unit, SESOI 0.005)"),
                               Revision(*_PARTS, _HEADS_SESOI, "undecided (the seed the unit, SESOI 0.005)")),
    "freeze-marginal-sst-quora": (Revision(*_INTERVALS, f"{_TOST}; {_SIDES}", "inconclusive"),),
    "freeze-surgery-no-effect": (Revision(*_INTERVALS, _TOST, "inconclusive"),),
    "freeze-smart-multitask": (Revision(*_INTERVALS, _TOST, "inconclusive"),),
    "college-intermediate-task": (Revision(*_INTERVALS, _SIDES, "reproduced"),),
    "college-not-monotone": (Revision(*_INTERVALS, _SIDES, "inconclusive"),),
    "singh-probe-peak": (Revision(*_INTERVALS, _SIDES, "inconclusive"),),
    "singh-probe-needs-more": (Revision(*_INTERVALS, _SIDES, "inconclusive"),),
    "freeze-cross-encoding": (Revision(*_INTERVALS, _SIDES, "not reproduced"),),
    "singh-later-layers-move": (
        Revision(*_PARTS, "a row at fraction 0.03 beside 0.25, both must hold", "not reproduced (0.25 alone)"),
        Revision(*TODAY, _NULL, "not reproduced against zero: minilm -0.103 [-0.127, -0.080], mini-20M -0.040 "
                 "[-0.100, +0.021]")),
    "hao-seeds-consistent-low": (
        Revision(*_PARTS, "attention JS a row beside SVCCA, both must hold", "reproduced (SVCCA alone)"),
        Revision(*TODAY, _NULL + " (its pair form: two perturbed copies compared)", "reproduced against zero: "
                 "minilm +6.189 [+3.929, +8.450], mini-20M +1.337 [+0.013, +2.662]")),
    "hao-datasets-consistent-low": (
        Revision(*_PARTS, "attention JS a row beside SVCCA, both must hold", "reproduced (SVCCA alone)"),
        Revision(*TODAY, _NULL + " (its pair form)", "reproduced against zero: minilm +7.779 [+6.421, +9.138], "
                 "mini-20M +1.468 [+0.685, +2.251]")),
    "hao-attention-last": (Revision(*TODAY, _NULL, "reproduced against zero: minilm +16.770 [+13.703, +19.837], "
                                    "mini-20M +2.960 [+1.183, +4.737]"),),
    "hao-svcca-intermediate-last": (Revision(*TODAY, _NULL, "reproduced against zero: minilm +9.401 [+8.544, "
                                             "+10.257], mini-20M +3.444 [+2.771, +4.117]"),),
}

# lines declared after the first run began (4705a00); the report compares the date with their data's
ADDED = {fid: Revision(*_PARTS, "declared: a part of a quote as a line of its own", "") for fid in (
    "college-not-constant", "singh-abstract-supervised", "tamkin-probe-not-necessary", "freeze-smart-alone",
    "hao-datasets-domains")}


def declared(fid: str) -> Revision:
    """The declaration a line's history starts from: the first one, or the commit that added it."""
    return ADDED.get(fid, DECLARED)

"""Which model the paper's setting resembles, per finding: declared before a second model's runs, so that where
the two models' verdicts disagree (compare.py) the report says which one speaks for the paper, and why.

The papers fine-tuned BERT-base: pretrained by masked language modelling on general text, strongly (its
pretrained layers are worth a lot over re-drawn ones), never trained on sentence pairs. Neither model here is
that. The first, all-MiniLM-L6-v2, is strong but was trained contrastively on sentence pairs (Quora and NLI
among them) and sits at its STS ceiling before fine-tuning. The second, the ladder's largest rung
(`pretrain.py`, 20M tokens of the course's text), shares BERT's objective and never saw a pair, but its
pretraining is weak: 0.347 held-out masked accuracy, and no measurable gain over untrained weights on SST
(docs/measurements/2026-11-26-h200-pretraining-budget-study.md). So each line names the property its claim
rests on and the model that has it.
"""
from dataclasses import replace

STRONG = ("the embedded model: the claim is about the size of what pretrained layers give, and BERT's give a "
          "lot, as the embedded model's do; the MLM rung's pretraining gave no measurable gain over untrained "
          "weights, so a line about that gain cannot show on it")
PAIRS = ("the MLM model: the claim rests on the model not having been trained on sentence pairs (BERT was not, "
         "nor was the MLM rung), while the embedded model was trained contrastively on Quora and NLI pairs")
OBJECTIVE = ("the MLM model: the claim is about how an MLM-pretrained network's layers behave (its upper layers "
             "specialised to the pretraining objective), BERT's objective and the MLM rung's, not the embedded "
             "model's sentence-pair objective (the rung has 4 layers: a third is one or two)")

RESEMBLES = {
    # Tamkin et al.
    "tamkin-data-size": STRONG, "tamkin-probe-not-sufficient": OBJECTIVE, "tamkin-probe-not-necessary": OBJECTIVE,
    "tamkin-probe-align": OBJECTIVE, "tamkin-permute": STRONG, "tamkin-blocks-sst": STRONG,
    # Singh & Giovanardi
    "singh-scarce": STRONG, "singh-data-size": STRONG, "singh-task-dependence": PAIRS,
    "singh-later-layers-move": OBJECTIVE, "singh-early-invariant": OBJECTIVE, "singh-more-data-moves-more": OBJECTIVE,
    "singh-abstract-supervised": STRONG, "singh-probe-peak": OBJECTIVE, "singh-probe-needs-more": OBJECTIVE,
    # Hao et al.
    "hao-attention-last": OBJECTIVE, "hao-svcca-intermediate-last": OBJECTIVE, "hao-restore-low": OBJECTIVE,
    "hao-seeds-consistent-low": OBJECTIVE, "hao-datasets-consistent-low": OBJECTIVE,
    # BERT goes to college
    "college-intermediate-task": PAIRS, "college-downstream-smaller-drop": STRONG, "college-not-monotone": OBJECTIVE,
    "college-not-constant": OBJECTIVE, "college-heads-top-help": OBJECTIVE, "college-heads-bottom-hurt": OBJECTIVE,
    # Freeze your layers
    "freeze-improves-sts": PAIRS, "freeze-marginal-sst-quora": PAIRS, "freeze-surgery-no-effect": PAIRS,
    "freeze-smart-sts": PAIRS, "freeze-smart-multitask": PAIRS, "freeze-cross-encoding": PAIRS,
    "freeze-smart-alone": PAIRS,
}


def declare(findings: list) -> list:
    """The paper module's findings with their `setting_resembles` from RESEMBLES (untestable ones keep "")."""
    return [replace(f, setting_resembles=RESEMBLES.get(f.id, f.setting_resembles)) for f in findings]

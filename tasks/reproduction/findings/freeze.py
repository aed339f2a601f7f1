"""Gorti & Thiesmeyer, "Freeze Your Layers" (CS224N default project: the multitask minBERT).

Their setting: minBERT (bert-base-uncased weights), SST-5, Quora, STS; sentences encoded one at a time
(pooled [CLS]), their heads (STS: 5 relu(cos(W1 u, W2 v))), learning rate 1e-4, 9 epochs; final model:
every layer frozen but the last three and the pooler. Their figures are single runs.
"""
from dataclasses import replace

from .. import arms
from ..verdicts import Finding

PAPER = "002_d220c808c256bba9.txt"
TITLE = "Gorti & Thiesmeyer, Freeze Your Layers"
SETTING = "minBERT (bert-base-uncased), SST-5 / Quora / STS, siamese encoding, lr 1e-4, 9 epochs"
COURSE = "python reproduce.py --scale paper --model bert-base-uncased"
NEAR_CEILING = ("Weak: zero-shot STS is already 0.838, so freezing keeps a model near its ceiling; a gain or loss "
                "here is about this model, not about overfitting bert-base.")

NO_SMART = ("There was no improvement for the other tasks in isolation, and no improvement when doing multi-task "
            "finetuning.")

FINDINGS = [
    Finding(
        "freeze-improves-sts", PAPER, "The most important reason behind the improvement for this task was the "
        "decision to freeze layers of minBERT during training.", SETTING + "; STS dev 0.551 -> 0.690",
        "the top three layers trained (the rest frozen) against every layer trained", "STS dev Pearson", 0.02,
        "0.02 Pearson is 0.01 of the course's overall score, the smallest gain a leaderboard shows",
        "top third trained minus every layer trained, siamese pairs with the paper's STS head, fraction 0.25",
        NEAR_CEILING, experiment="freeze", measure=arms.arms,
        keywords=dict(experiment="freeze", a="top", b="all", roles=("similarity",), what="top third minus all"),
        elsewhere=COURSE + " --only freeze", pilot=("freeze STS",)),
    Finding(
        "freeze-marginal-sst-quora", PAPER, "freezing minBERT layers had marginal effect on the sentiment "
        "analysis and paraphrase detection tasks, but improved performance on semantic textual similarity.",
        SETTING, "frozen against trained, per task", "dev accuracy", 0.01,
        "equivalence margin of one point of accuracy: 'marginal'",
        "SST and Quora: top third trained minus every layer trained, each within -/+ 0.01 (both rows)",
        "Quora is weak: the model was trained on Quora duplicates.", experiment="freeze", measure=arms.arms,
        keywords=dict(experiment="freeze", a="top", b="all", roles=("primary", "pair"), what="top third minus all"),
        kind="equivalence",
        combine="all", pilot=("reinit at 0.25",)),
    Finding(
        "freeze-surgery-no-effect", PAPER, "Gradient surgery did not have a substantial impact on performance, "
        "and was discarded.", SETTING + "; their surgery projects onto the dominant task's gradient",
        "multitask training with and without gradient surgery", "dev overall score", 0.01,
        "equivalence margin 0.01 of the overall score",
        "multitask, siamese pairs with the paper's heads: --surgery dominant minus none, paired by seed, within "
        "-/+ 0.01",
        "Carried: a property of the optimiser on these three tasks.", experiment="methods", measure=arms.method_change,
        keywords=dict(sweep="multitask", method="dominant", label="dominant minus none (overall)"), kind="equivalence"),
    Finding(
        "freeze-smart-sts", PAPER, "SMART regularization improved performance on the semantic textual similarity "
        "head when that head was finetuned in isolation.", SETTING, "STS alone, with and without SMART",
        "STS dev Pearson", 0.02, "as for freezing: 0.01 of the overall score",
        "STS alone, siamese with the paper's head: --smart minus without, paired by seed", NEAR_CEILING,
        experiment="methods", measure=arms.method_change,
        keywords=dict(sweep="sts", method="smart", role="similarity", label="STS alone: SMART minus without"),
        pilot=("freeze STS",)),
    Finding(
        "freeze-smart-multitask", PAPER, NO_SMART, SETTING, "multitask with and without SMART",
        "dev overall score", 0.01, "equivalence margin 0.01 of the overall score",
        "the multitask half: multitask, siamese pairs with the paper's heads: --smart minus without, paired by "
        "seed, within -/+ 0.01 (SST and Quora alone: freeze-smart-alone)",
        "Carried in kind.", experiment="methods", measure=arms.method_change,
        keywords=dict(sweep="multitask", method="smart", label="multitask: SMART minus without"), kind="equivalence"),
    Finding(
        "freeze-cross-encoding", PAPER, "concatenating the sentence pairs for the paraphrase detection and "
        "semantic textual similarity tasks before inputting into minBERT had a large impact on performance.",
        SETTING + "; their dev scores 0.881 (Quora) and 0.865 (STS) after the change",
        "pairs as one sequence against each sentence encoded alone", "dev accuracy (Quora), Pearson (STS)", 0.02,
        "two points: 'a large impact' was 0.06-0.17",
        "cross-encoded minus siamese (the paper's heads), Quora and STS (both rows)",
        "Against the model: it was trained as a bi-encoder, so its siamese start is strong and cross-encoding "
        "must be learned within the budget.", experiment="pairs", measure=arms.arms,
        keywords=dict(experiment="pairs", a="cross", b="siamese", roles=("similarity", "pair"),
                      what="cross minus siamese"),
        combine="all"),
    Finding(
        "freeze-smart-alone", PAPER, NO_SMART, SETTING, "SST alone and Quora alone, with and without SMART",
        "dev accuracy", 0.01, "equivalence margin of one point of accuracy, as the multitask half",
        "the 'other tasks in isolation' half: SST alone and Quora alone, --smart minus without, paired by seed, "
        "each within -/+ 0.01", "Carried in kind.", experiment="methods", measure=arms.pending, kind="equivalence",
        combine="all", protocol=2, pilot=("reinit at 0.25",),
        keywords=dict(what="SST alone and Quora alone: SMART minus without", follow_up="smart-alone")),
]

# The 'other tasks in isolation' half as the follow-up smart-alone measures it: its own methods sweeps
SMART_ALONE = replace(
    next(f for f in FINDINGS if f.id == "freeze-smart-alone"), measure=arms.methods_alone,
    keywords=dict(method="smart", roles=("primary", "pair"), label="SMART minus without"),
    tested="the 'other tasks in isolation' half: SST alone and Quora alone (a methods sweep each, siamese with the "
           "paper's heads, fraction 0.25), --smart minus without, paired by seed, each task's 90% interval within "
           "-/+ 0.01 (TOST): both rows must hold (intersection-union)")

"""Tamkin, Singh, Giovanardi, Goodman (2020), "Investigating Transferability in Pretrained Language Models".

The stored text holds the abstract, the TL;DR and the figure captions only; every finding quotes them.
Their setting throughout: BERT-base (12 layers), GLUE tasks (CoLA, SST-2, QNLI, ...) subsampled to 500 to
5k+ examples, the whole model fine-tuned end to end after the edit, 95% CIs over trials.
"""
from dataclasses import replace

from .. import arms, measures, probes
from ..verdicts import Finding

PAPER = "003_ff14ca6f37d4b1dc.txt"
TITLE = "Tamkin et al. 2020, Investigating Transferability in Pretrained Language Models"
GLUE = ("python reproduce.py --scale paper --model bert-base-uncased --task-file glue.json "
        "--tasks primary=sst2,second=qnli")
NEITHER = ("layers with high probing performance on downstream GLUE tasks are neither necessary nor sufficient for "
           "high accuracy on those tasks.")
PROBES = "BERT-base, GLUE, probes of each frozen layer against partial reinitialisation at several data sizes"

FINDINGS = [
    Finding(
        "tamkin-data-size", PAPER,
        "parameters that provide tremendous performance improvement when data is plentiful may provide negligible "
        "benefits in data-scarce settings.",
        "BERT-base, GLUE tasks subsampled (Fig. 2: several dataset sizes), layers >= k re-initialised then "
        "fine-tuned", "the gain from keeping layers pretrained, at a large finetuning set against a small one",
        "dev accuracy (SST)", 0.02,
        "2 points of SST-5 accuracy: about the seed-to-seed spread of one fine-tuning at 120 steps (pilot sd "
        "0.017), and 'tremendous' against 'negligible' should differ by far more",
        "gain of pretrained layers third..top (k=n minus k=n/3) at fraction 0.25 minus the same gain at 0.03, per "
        "seed", "The direction is a property of transfer with any pretrained encoder, so the model can carry it; "
        "its sentence-level contrastive training may make its upper layers useful already with little data, "
        "which works against the paper.", experiment="reinit-large", measure=measures.tamkin_data_size,
        pilot=("reinit at 0.25", "reinit at 0.03"), sesoi_from_pilot=True),
    Finding(
        "tamkin-probe-not-sufficient", PAPER, NEITHER, PROBES,
        "fine-tuning with the layers up to the best-probing one kept pretrained against the full model",
        "dev accuracy (SST)", 0.01,
        "one point of accuracy: the smallest gap a user would act on; the claim is qualitative",
        "the 'not sufficient' half: full model (k=n) minus layers 0..b-1 pretrained and the rest re-drawn "
        "(k=b), b the best probe layer chosen on the probes' held-out share of the training data, fraction 0.25",
        "Its probes are unusually strong (mean-pooled contrastive features), so b may be the top layer, which "
        "leaves nothing to test (inconclusive, said so). 'Not necessary' is its own line "
        "(tamkin-probe-not-necessary).", experiment="probe", measure=measures.tamkin_probe_not_sufficient,
        pilot=("reinit at 0.25",)),
    Finding(
        "tamkin-probe-not-necessary", PAPER, NEITHER, PROBES,
        "the best-probing layer alone re-drawn against the full model", "dev accuracy (SST)", 0.01,
        "one point of accuracy, as the 'not sufficient' half",
        "the 'not necessary' half: full model minus the model with only the best probe layer b re-drawn, within "
        "-/+ 0.01 (re-drawing it costs less than a point), fraction 0.25",
        "Carried in kind; the follow-up tamkin-not-necessary trains the sweep that re-draws one layer.",
        experiment="probe",
        measure=arms.pending, kind="equivalence", protocol=2, pilot=("reinit at 0.25",),
        keywords=dict(what="only the best probe layer re-drawn minus the full model",
                      follow_up="tamkin-not-necessary")),
    Finding(
        "tamkin-probe-align", PAPER,
        "as finetuning dataset size decreases, the curves align more closely with probing performance at each "
        "layer.", "BERT-base, GLUE, Fig. 2: reinitialisation curves at several subsample sizes against the probing "
        "curve", "how closely the fine-tuning curve over k follows the probing curve over layers, small against "
        "large data", "Pearson correlation across k = 0..n", 0.1,
        "0.1 of correlation: with 7 points per curve a smaller change is within one curve's noise",
        "per seed, corr(fine-tuning at k, probe at layer k) at fraction 0.03 minus at 0.25",
        "Carried: it compares two curves of the same model. Seven points make the correlation coarse.",
        experiment="probe", measure=measures.tamkin_probe_align),
    Finding(
        "tamkin-permute", PAPER, "Changing the order of pretrained layers harms finetuning performance "
        "significantly.", "BERT-base, GLUE tasks at 5k examples, random permutations of the 12 layers, each "
        "fine-tuned (Fig. 4)", "original order against random orders", "dev accuracy (SST)", 0.01,
        "one point of accuracy; the paper's loss is several points",
        "original order minus each random order at each seed, averaged over seeds and orders; the interval a "
        "two-level crossed model over seeds and orders (the seeds' and the orders' spread both in it; n = seeds)",
        "Carried: any layered encoder whose layers learned to feed each "
        "other. Six layers give fewer distinct orders than twelve.", experiment="permute",
        measure=measures.tamkin_permute,
        pilot=("permute",)),
    Finding(
        "tamkin-blocks-sst", PAPER,
        "Early layers provide the most QNLI gains, but middle ones yield an added boost for CoLA and SST-2.",
        "BERT-base, 5k examples, consecutive three-layer blocks re-initialised or preserved (Fig. 3)",
        "the middle block preserved (every other layer re-drawn) against every layer re-drawn", "dev accuracy (SST)",
        0.01, "one point of accuracy: the paper's 'added boost' is of that order or more",
        "SST: middle third preserved (keep) minus every layer re-drawn, fraction 0.25; QNLI and CoLA need "
        "--task-file", "The SST half is carried (a sentence task). The QNLI half needs QNLI: Quora is another "
        "pair task, and one this model was trained on.", experiment="blocks", measure=measures.tamkin_blocks,
        untestable="QNLI and CoLA are not in the course data", elsewhere=GLUE + " --only blocks",
        pilot=("reinit at 0.25",)),
]

# The 'not necessary' half as the follow-up tamkin-not-necessary measures it: its own reinit-large sweep
NOT_NECESSARY = replace(
    next(f for f in FINDINGS if f.id == "tamkin-probe-not-necessary"), experiment="reinit-large",
    measure=probes.tamkin_probe_not_necessary, keywords={},
    tested="the 'not necessary' half: full model minus the model with only the best probe layer re-drawn (probe "
           "layer b is the output of layers 0..b-1: layer b-1 alone re-drawn, every other pretrained; b chosen on "
           "the probes' held-out share of the training data), both arms in the follow-up's own reinit sweep at "
           "fraction 0.25, paired by seed, the 90% interval within -/+ 0.01 (TOST)",
    model_note="Carried in kind. The sweep's block scheme also trains its complement (only that layer pretrained) "
               "and every layer re-drawn; the measure reads neither.")

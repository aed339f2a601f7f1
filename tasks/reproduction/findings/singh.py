"""Singh & Giovanardi, "How much does pre-trained information help? Partially re-initializing BERT during
fine-tuning to analyze the contribution of layers" (CS224N custom project).

Their setting: BERT-base (12 layers), SST-2, QNLI and CoLA at 1%, 10% and 100% of the training data,
3 epochs at 2e-5 (2,000 iterations an epoch), partial reinitialisation of layers >= k (linear weights only),
probes on frozen truncated models, L2 distance of the output sub-layer's dense weight.
"""
from .. import measures
from ..verdicts import Finding

PAPER = "001_3cd4a3a1567cb7f4.txt"
TITLE = "Singh & Giovanardi, How much does pre-trained information help?"
SETTING = "BERT-base, SST-2 / QNLI / CoLA at 1%, 10%, 100% of the training data, 3 epochs at 2e-5"
ON_GLUE = "python reproduce.py --scale paper --model bert-base-uncased --task-file glue.json"
GLUE = ON_GLUE + " --tasks primary=sst2,second=qnli"

LAYERS_MOVE = ("We also find that the parameters of the later layers get overwritten more during fine-tuning, while "
               "the earlier layers remain largely invariant.")

FINDINGS = [
    Finding(
        "singh-scarce", PAPER, "We explored the influence of data and found that pre-training helps when data is "
        "scarce.", SETTING, "the pretrained model against every layer re-drawn, at the smallest data size",
        "dev accuracy (SST)", 0.02, "two points of accuracy: far below the paper's gains, above seed noise",
        "pretrained (k=n) minus every layer re-drawn (k=0), fraction 0.03 (256 sentences)",
        "Carried: any pretrained encoder should beat random weights on 256 sentences.",
        experiment="reinit-small", measure=measures.singh_scarce, pilot=("reinit at 0.03",), sesoi_from_pilot=True),
    Finding(
        "singh-data-size", PAPER, "As training data size increases, the performance gains from the pre-trained "
        "information of each layer are lower, subject to the nature of the task.", SETTING,
        "the gain of the pretrained layers at small data against large data", "dev accuracy (SST)", 0.02,
        "two points of accuracy, as for tamkin-data-size, which predicts the opposite sign for the upper layers",
        "gain of every layer pretrained (k=n minus k=0) at fraction 0.03 minus at 0.25, per seed",
        "Carried for SST; with a fixed step budget the larger fraction is seen less often, see the report's "
        "budget note.", experiment="reinit-large", measure=measures.singh_data_size,
        pilot=("reinit at 0.25", "reinit at 0.03"), sesoi_from_pilot=True),
    Finding(
        "singh-task-dependence", PAPER, "the importance of middle-layers\u2019 pre-trained information is task "
        "dependant: while it increases performance in SST-2, it fails to provide a positive contribution in QNLI.",
        SETTING, "the gain from the middle layers on SST-2 against QNLI at ~670 examples",
        "dev accuracy", 0.02, "two points of accuracy in the difference of two gains",
        "gain of the middle third (k=2n/3 minus k=n/3) on SST minus on the second task (Quora by default; QNLI "
        "with --task-file), fraction 0.03",
        "Weak here: the model was trained on Quora duplicates, so its layers already hold Quora; QNLI is the "
        "paper's contrast.", experiment="task-dependence",
        measure=measures.singh_task_dependence, elsewhere=GLUE + " --only task-dependence"),
    Finding(
        "singh-later-layers-move", PAPER, LAYERS_MOVE, SETTING,
        "L2 distance of the output dense weight, pretrained vs fine-tuned, across layers (Fig. 3)",
        "L2 distance ratio", 0.10,
        "the top third moving at least 10% more than the bottom third: less is within the spread across layers",
        "mean L2 of the top third / mean L2 of the bottom third - 1, per seed, at fraction 0.03 and at 0.25 (the "
        "paper: 'in all experiments, the curves are upward trending'): both rows must hold",
        "Carried: a weight-space measure of any fine-tuning; absolute L2 depends on the model's width.",
        experiment="dynamics", measure=measures.layer_ratio, combine="all",
        keywords=dict(curve="weight_l2", upper="top", lower="bottom", label="L2 top third / bottom third - 1",
                      fractions=("small", "large"))),
    Finding(
        "singh-early-invariant", PAPER, LAYERS_MOVE, SETTING,
        "L2 distance of the output dense weight per layer (Fig. 3)", "L2 distance ratio", 0.5,
        "'largely invariant' read as: the bottom third moves at most half as far as the top third (the paper "
        "gives no threshold; this is ours, fixed before the run)",
        "1 - mean L2 of the bottom third / mean L2 of the top third, per seed, fraction 0.25",
        "Carried, as above.", experiment="dynamics",
        measure=measures.singh_early_invariant),
    Finding(
        "singh-more-data-moves-more", PAPER, "With more training data, the parameters are transformed more.",
        SETTING + " (more data is also more steps there)", "L2 distance at 1% / 10% / 100% of the data",
        "L2 distance ratio", 0.10, "10% more movement with 8 times the data",
        "mean L2 over layers at fraction 0.25 / at 0.03 - 1, per seed (one step cap at both, each trial stopped "
        "on its own plateau: the steps each trained are in the line's disclosure)",
        "Carried, but the cpu scale's one cap removes the paper's 'more steps' half (follow-up equal-epochs).",
        experiment="dynamics", measure=measures.singh_more_data),
    Finding(
        "singh-abstract-supervised", PAPER, "In general, we see that when there is less training data, there is "
        "more reliance on pre-trained weights, which leads to large performance gains over a fully supervised "
        "model with more training data.", SETTING, "the pretrained model on little data against a model without "
        "pre-training on more data", "dev accuracy (SST)", 0.02,
        "two points of accuracy, as singh-scarce: 'large performance gains'",
        "pretrained (k=n) at fraction 0.03 minus every layer re-drawn (k=0) at 0.25 (8 times the data), paired "
        "by seed", "Carried: any pretrained encoder against random weights.", experiment="reinit-large",
        measure=measures.singh_abstract, pilot=("reinit at 0.25", "reinit at 0.03"), protocol=2),
    Finding(
        "singh-probe-peak", PAPER, "Probing reaches a lower peak accuracy than partial re-initialization",
        SETTING, "the best probe against fine-tuning", "dev accuracy (SST)", 0.01, "one point of accuracy",
        "fine-tuned pretrained model minus the best probe (layer and pooling chosen on the probes' held-out "
        "training share), at 0.03 and 0.25 (both rows must hold)",
        "Weak: its mean-pooled features are unusually good for a linear model (it was trained to make them so); "
        "a probe close to fine-tuning says more about the model than about the paper.", experiment="probe",
        measure=measures.singh_probe_peak,
        combine="all"),
    Finding(
        "singh-probe-needs-more", PAPER, "we showed that with partial re-initialization, the model needs less "
        "pre-trained information in order to exhibit a significant increase in performance.", SETTING,
        "how many pretrained layers each method needs for its jump", "share of the gain", 0.1,
        "a tenth of the gain from the embeddings to the best",
        "share of the gain reached with layers 0..n/3-1: fine-tuning (k=n/3 between k=0 and k=n) minus probing "
        "(layer n/3 between layer 0 and the best layer), per seed, at 0.03 and 0.25 (both)",
        "Weak, as above; shares divide by a probe gain that is small for this model.", experiment="probe",
        measure=measures.singh_probe_needs_more,
        combine="all"),
    Finding(
        "singh-cola-linear", PAPER, "we see surprising results for CoLA, with a fairly linear drop in performance "
        "with increasing partial reinitialization.", SETTING, "the CoLA reinitialisation curve's shape",
        "MCC", 0.05, "the curve's departure from a line, 0.05 MCC", "not tested here",
        "CoLA is not in the course data.", untestable="needs CoLA (--task-file)",
        elsewhere=ON_GLUE + " --tasks primary=cola --only reinit-large"),
]

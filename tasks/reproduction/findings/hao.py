"""Hao, Dong, Wei, Xu (2020), "Investigating Learning Dynamics of BERT Fine-Tuning" (AACL).

Their setting: BERT-large (24 layers, 16 heads), MNLI / RTE / SST-2 / MRPC at their full size, 3-5 epochs at
1e-5 to 3e-5; attention JS divergence and SVCCA distance per layer on the dev set, pretrained vs fine-tuned,
seed vs seed and dataset vs dataset. "Last layers" there are the top few of 24; here the top third.
"""
from .. import measures
from ..verdicts import Finding

PAPER = "004_7ef1d0237fc670fe.txt"
TITLE = "Hao et al. 2020, Investigating Learning Dynamics of BERT Fine-Tuning"
SETTING = "BERT-large (24 layers), MNLI / RTE / SST-2 / MRPC, full data, 3-5 epochs at 1e-5..3e-5"
CONCLUSION = ("We conclude that BERT fine-tuning mainly changes the attention mode of the last layers and modifies "
              "the feature extraction mode of the intermediate and last layers.")
SMALL_MODEL = ("Carried in kind (any fine-tuned encoder); six layers make 'last' and 'low' coarse, and a sentence "
               "encoder's top layers were already shaped for sentence-level use.")

DATASETS = ("python reproduce.py --scale paper --model bert-large-uncased --task-file glue.json "
            "--tasks primary=rte,second=mnli --only datasets")

FINDINGS = [
    Finding(
        "hao-attention-last", PAPER, CONCLUSION, SETTING, "attention JS divergence per layer, pretrained vs "
        "fine-tuned (Fig. 1)", "JS divergence ratio", 1.0,
        "'changes drastically' against 'do not change seriously': the top third at least twice the bottom third",
        "mean JS of the top third / mean JS of the bottom third - 1, per seed, SST at fraction 0.25",
        SMALL_MODEL, experiment="dynamics", measure=measures.layer_ratio,
        keywords=dict(curve="attention_js", upper="top", lower="bottom", label="JS top third / bottom third - 1")),
    Finding(
        "hao-svcca-intermediate-last", PAPER, CONCLUSION, SETTING, "SVCCA distance per layer, pretrained vs "
        "fine-tuned (Fig. 2)", "SVCCA distance ratio", 0.5,
        "the intermediate and last layers' representations change at least 1.5 times the low layers'",
        "mean SVCCA distance of the middle and top thirds / of the bottom third - 1, per seed, fraction 0.25",
        SMALL_MODEL, experiment="dynamics", measure=measures.layer_ratio,
        keywords=dict(curve="svcca", upper="middle+top", lower="bottom", label="SVCCA middle and top / bottom - 1")),
    Finding(
        "hao-restore-low", PAPER, "whether the low layers (0-10) are replaced with their original values or not, "
        "it has little effect on the final output representation.", SETTING,
        "SVCCA distance of the last layer's output after restoring one layer's pretrained values (Fig. 3)",
        "SVCCA distance ratio", 0.5, "restoring a top-third layer moves the output at least 1.5 times as much as "
        "restoring a bottom-third one", "mean restore distance of the top third / of the bottom third - 1, per "
        "seed", SMALL_MODEL, experiment="restore", measure=measures.hao_restore),
    Finding(
        "hao-seeds-consistent-low", PAPER, "Across different random seeds and different datasets, we observe that "
        "the changes of low layers (0-9th layer) are generally consistent", SETTING,
        "SVCCA distance between two fine-tunings from different seeds, per layer (Fig. 5)", "SVCCA distance ratio",
        0.5, "two seeds differ at least 1.5 times more in the top third than in the bottom third",
        "seed-vs-seed SVCCA and attention JS (Figs. 4-5), each the mean of the top third / of the bottom third - "
        "1, per pair of seeds (jackknife over seeds): both rows must hold", SMALL_MODEL, experiment="dynamics",
        measure=measures.layer_ratios, combine="all",
        keywords=dict(curves=("svcca", "attention_js"), upper="top", lower="bottom", group="seed-vs-seed",
                      label="seed-vs-seed top / bottom - 1")),
    Finding(
        "hao-datasets-consistent-low", PAPER, "Across different random seeds and different datasets, we observe "
        "that the changes of low layers (0-9th layer) are generally consistent", SETTING,
        "SVCCA distance between models fine-tuned on two datasets, per layer (Fig. 7)", "SVCCA distance ratio",
        0.5, "as for seeds", "dataset-vs-dataset SVCCA and attention JS (Figs. 6-7; SST against the second task), "
        "top third / bottom third - 1: both rows must hold",
        "Weak for Quora: the model was trained on it before; RTE / MNLI / MRPC need --task-file.",
        experiment="datasets", measure=measures.hao_datasets, combine="all",
        elsewhere=DATASETS),
    Finding(
        "hao-datasets-domains", PAPER, "Figure 6 and Figure 7 demonstrate that no matter two datasets are from the "
        "same domain or the different domain, the attention mode and the feature extraction mode of low layers "
        "(0-7 layer) are consistent", SETTING + "; same domain RTE / MNLI, different MRPC / RTE and MRPC / SST-2 "
        "(Section 5.2)", "dataset-vs-dataset distances for a same-domain and a different-domain pair",
        "SVCCA and JS ratios", 0.5, "as for seeds", "not tested here",
        "The course data has no two datasets of one domain and task format.",
        untestable="needs a same-domain pair (RTE and MNLI, --task-file)",
        elsewhere=DATASETS, protocol=2),
]

"""The five papers' headline findings, one declaration each (`verdicts.Finding`), dated (history.py).

One module per paper; each finding quotes its paper's sentence exactly
(tests/tasks/reproduction/test_findings.py checks it against ../shared/papers/) and names its measure
(measures.py) with its keywords. `FINDINGS` lists them in
the report's order, `PAPERS` names each paper's file, `PAGES` the report page of its details. A changed protocol
or extra seeds is a new declaration (the same quote, `protocol` + 1, its own id), run as a follow-up beside the
first: the first's verdict stays the headline. history.py dates each line's declaration and every change to its rule
since; the layer-ratio lines read against their null (null.py) since issue 54, a revision said as such.
"""
from dataclasses import replace

from . import college, freeze, hao, history, null, singh, tamkin

PAPERS = {m.PAPER: m.TITLE for m in (tamkin, singh, hao, college, freeze)}
PAGES = {m.PAPER: m.__name__.rsplit(".", 1)[1] for m in (tamkin, singh, hao, college, freeze)}
CLAIMS = {   # the front page's short name of each claim
    "tamkin-data-size": "pretrained upper layers help more with more data",
    "tamkin-probe-not-sufficient": "the best probe layer is not sufficient", "tamkin-probe-not-necessary":
    "the best probe layer is not necessary", "tamkin-probe-align": "with less data, fine-tuning follows probing",
    "tamkin-permute": "permuting the layers hurts", "tamkin-blocks-sst": "the middle block helps SST",
    "singh-scarce": "pretraining helps on scarce data", "singh-data-size": "the gain shrinks with more data",
    "singh-task-dependence": "middle layers help SST more than the pair task",
    "singh-later-layers-move": "later layers move more (L2)", "singh-early-invariant": "early layers barely move",
    "singh-more-data-moves-more": "more data moves the weights more",
    "singh-abstract-supervised": "pretrained on little data beats scratch on more",
    "singh-probe-peak": "probing peaks below fine-tuning", "singh-probe-needs-more":
    "fine-tuning needs fewer pretrained layers", "singh-cola-linear": "CoLA drops linearly",
    "hao-attention-last": "attention changes in the last layers", "hao-svcca-intermediate-last":
    "features change in middle and last layers", "hao-restore-low": "restoring low layers matters little",
    "hao-seeds-consistent-low": "low layers agree across seeds", "hao-datasets-consistent-low":
    "low layers agree across datasets", "hao-datasets-domains": "low layers agree whatever the domain",
    "college-intermediate-task": "an intermediate task can help", "college-downstream-smaller-drop":
    "re-drawing top layers costs less", "college-not-monotone": "the reinit curve is not monotone",
    "college-not-constant": "the reinit curve's steps differ", "college-heads-top-help": "re-drawing a top head helps",
    "college-heads-bottom-hurt": "re-drawing bottom heads hurts", "college-heads-4-9": "heads 4 and 9 matter",
    "college-wnli": "WNLI as intermediate task", "freeze-improves-sts": "freezing lower layers helps STS",
    "freeze-marginal-sst-quora": "freezing changes SST and Quora little", "freeze-surgery-no-effect":
    "gradient surgery has no effect", "freeze-smart-sts": "SMART helps STS", "freeze-smart-multitask":
    "SMART has no effect in multitask", "freeze-cross-encoding": "cross-encoding pairs helps",
    "freeze-smart-alone": "SMART has no effect on each task alone",
}
_AGAINST_NULL = {f.id: f for f in null.AGAINST_NULL}   # the ratio lines, revised to read against their null
FINDINGS = [replace(_AGAINST_NULL.get(f.id, f), claim=CLAIMS[f.id], declared=history.declared(f.id),
                    revisions=history.REVISIONS.get(f.id, ()))
            for f in (*tamkin.FINDINGS, *singh.FINDINGS, *hao.FINDINGS, *college.FINDINGS, *freeze.FINDINGS)]
BY_ID = {f.id: f for f in FINDINGS}
assert len(BY_ID) == len(FINDINGS), "finding ids must be unique"

"""A model's verdicts from its kept runs: the findings each run is judged on (a follow-up's re-declarations in
place of the first's), every line's verdict with its power from the model's own pilot, and the counts the README
shows. report.py writes them."""
from . import kept, power
from .findings import FINDINGS
from .follow_ups import FIRST, FOLLOW_UPS
from .verdicts import NOT_RUN, NOT_TESTABLE, VERDICTS, judge

ORDER = (*VERDICTS, NOT_RUN, NOT_TESTABLE)


def declared(label: str) -> list:
    """The findings a run is judged on: a follow-up's re-declarations (`FollowUp.declares`) in place of the first's."""
    own = {f.id: f for f in (FOLLOW_UPS[label].declares if label in FOLLOW_UPS else ())}
    return [own.get(f.id, f) for f in FINDINGS]


def verdicts(runs: dict, ctx, null=None, pilot=power.PILOT_SD) -> dict:
    """{run label: {finding id: Verdict}} for the first run, each follow-up with kept results and each that re-reads
    a kept run (trains nothing); `null` the layer ratios' null baseline (null_baseline.load) that measures against
    it read, `pilot` the model's own pilot sds (power.py; None: its power is not computed)."""
    labels = [FIRST, *sorted(set(runs) - {FIRST})]
    out = {}
    for label in labels + [x for x, f in FOLLOW_UPS.items() if f.reads in runs and x not in labels]:
        follow = FOLLOW_UPS.get(label)
        results = kept.results_for(runs, follow.reads if follow and follow.reads else label)
        results.null = null
        out[label] = {}
        for f in declared(label):
            if follow and (follow.reads or follow.declares) and f.id not in follow.findings:
                continue
            if label != FIRST and not (follow and follow.reads) and f.experiment not in runs.get(label, {}):
                continue
            rows, reads = [], ()
            if f.experiment is not None and results.has(f.experiment):
                results.read.clear()
                rows = f.measure(results, ctx, **f.keywords)
                reads = tuple((e, results.source.get(e, FIRST)) for e in
                              sorted(results.read, key=lambda e: (e != f.experiment, e)))
                # a follow-up's line that would read an experiment the follow-up changes from another run (its
                # trials of it not kept yet) mixes two protocols: it waits until they are
                if follow and not follow.reads and any(e in follow.experiments and s != label for e, s in reads):
                    continue
            out[label][f.id] = power.apply(judge(f, label, rows), ctx.scale, pilot)
            out[label][f.id].reads = reads
    return out


def counts_of(found: dict) -> dict:
    """{verdict: lines} of one run's lines (the first's: the headline)."""
    return {v: sum(x.outcome == v for x in found.values()) for v in ORDER}


def counts_line(counts: dict) -> str:
    """'37 findings, first run: 8 reproduced, ...', in the verdicts' order whatever the dict's."""
    return f"{sum(counts.values())} findings, first run: " + ", ".join(
        f"{counts[v]} {v}" for v in ORDER if v in counts) + "."

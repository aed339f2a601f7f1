"""A model's verdicts from its kept runs: the findings each run is judged on (a follow-up's re-declarations in
place of the first's), every line's verdict with its power from the model's own pilot, what decides it, and the
counts the README shows. report.py writes them."""
from . import kept, power
from .findings import FINDINGS
from .follow_ups import FIRST, FOLLOW_UPS
from .lines import decides, disclosure
from .verdicts import NOT_RUN, NOT_TESTABLE, VERDICTS, judge


def declared(label: str) -> list:
    """The findings a run is judged on: a follow-up's re-declarations (`FollowUp.declares`) in place of the first's."""
    follow = FOLLOW_UPS.get(label)
    own = {f.id: f for f in (follow.declares if follow else ())}
    return [own.get(f.id, f) for f in FINDINGS]


def labels_of(runs: dict) -> list:
    """The first run, each follow-up with kept results, and each that re-reads a kept run (trains nothing)."""
    kept_labels = [FIRST, *sorted(set(runs) - {FIRST})]
    return kept_labels + [label for label, f in FOLLOW_UPS.items()
                          if f.reads and f.reads in runs and label not in kept_labels]


def verdicts(runs: dict, ctx, null=None, pilot=power.PILOT_SD) -> dict:
    """{run label: {finding id: Verdict}} for the first run and each follow-up that has results (or re-reads some);
    `null` the layer ratios' null baseline (null_baseline.load) that measures against it read, `pilot` the model's
    own pilot sds (power.py; None: its power is not computed)."""
    out = {}
    for label in labels_of(runs):
        follow = FOLLOW_UPS.get(label)
        results = kept.results_for(runs, follow.reads if follow and follow.reads else label)
        results.null = null
        covered = set(runs.get(label, {}))
        out[label] = {}
        for f in declared(label):
            if follow and (follow.reads or follow.declares) and f.id not in follow.findings:
                continue
            if label != FIRST and not (follow and follow.reads) and f.experiment not in covered:
                continue
            if f.experiment is None or not results.has(f.experiment):
                out[label][f.id] = power.apply(judge(f, label, []), ctx.scale, pilot)
            else:
                results.read.clear()
                rows = f.measure(results, ctx, **f.keywords)
                reads = tuple((e, results.source.get(e, FIRST)) for e in
                              sorted(results.read, key=lambda e: (e != f.experiment, e)))
                if mixes(follow, label, reads):
                    continue
                out[label][f.id] = power.apply(judge(f, label, rows), ctx.scale, pilot)
                out[label][f.id].reads = reads
    return out


def mixes(follow, label: str, reads: tuple) -> bool:
    """Whether a follow-up's line would read an experiment the follow-up changes from another run (its trials of
    that experiment not kept yet): such a line mixes two protocols, so it waits until they are."""
    if follow is None or follow.reads:
        return False
    return any(e in follow.experiments and source != label for e, source in reads)


def explain(runs: dict, by_run: dict) -> dict:
    """{run label: {finding id: (disclosure, what decides it)}} from the kept trials each line read."""
    out = {}
    for label, found in by_run.items():
        results = kept.results_for(runs, label)
        out[label] = {}
        for fid, v in found.items():
            experiment = v.finding.experiment
            reads = v.reads or ((experiment, label if experiment in runs.get(label, {}) else FIRST),)
            metas = {e: (source, runs[source][e][0] if e in runs.get(source, {}) else None) for e, source in reads}
            out[label][fid] = (disclosure(results, v.finding, metas), decides(v))
    return out


def counts_of(by_run: dict) -> dict:
    """{verdict: lines} of the first run."""
    return {v: sum(x.outcome == v for x in by_run.get(FIRST, {}).values())
            for v in (*VERDICTS, NOT_RUN, NOT_TESTABLE)}


def counts_line(counts: dict) -> str:
    """'37 findings, first run: 8 reproduced, ...', in the verdicts' order whatever the dict's."""
    order = [v for v in (*VERDICTS, NOT_RUN, NOT_TESTABLE) if v in counts]
    return f"{sum(counts.values())} findings, first run: " + ", ".join(f"{counts[v]} {v}" for v in order) + "."

"""A model's verdicts from its kept runs: the findings each run is judged on (a follow-up's re-declarations in
place of the first's), every line's verdict with its power from the model's own pilot, and the counts the README
shows. report.py writes them."""
from pathlib import Path
from typing import Optional

from . import experiments, kept, plan, power
from .findings import FINDINGS
from .follow_ups import FIRST, FOLLOW_UPS
from .verdicts import NOT_RUN, NOT_TESTABLE, VERDICTS, judge

ORDER = (*VERDICTS, NOT_RUN, NOT_TESTABLE)


def declared(label: str) -> list:
    """The findings a run is judged on: a follow-up's re-declarations (`FollowUp.declares`) in place of the first's."""
    own = {f.id: f for f in (FOLLOW_UPS[label].declares if label in FOLLOW_UPS else ())}
    return [own.get(f.id, f) for f in FINDINGS]


def verdicts(runs: kept.KeptRuns, ctx, null=None, pilot=power.PILOT_SD) -> dict:
    """{run label: {finding id: Verdict}} for the first run, each follow-up with kept results and each that re-reads
    a kept run (trains nothing); `null` the layer ratios' null baseline (null_baseline.load) that measures against
    it read, `pilot` the model's own pilot sds (power.py; None: its power is not computed)."""
    labels = [FIRST, *sorted(set(runs) - {FIRST})]
    out, day = {}, plan.seeds_a_gpu_day(ctx) if pilot is not None else {}
    for label in labels + [x for x, f in FOLLOW_UPS.items() if f.reads in runs and x not in labels]:
        follow = FOLLOW_UPS.get(label)
        results = kept.results_for(runs, follow.reads if follow and follow.reads else label)
        results.null = null
        out[label] = {}
        for f in (f for f in declared(label) if _judged_on(f, label, follow, runs)):
            measured = _measure(f, label, follow, results, ctx)
            if measured is not None:
                out[label][f.id] = power.apply(judge(f, label, measured[0]), ctx.scale, pilot, day.get(f.experiment))
                out[label][f.id].reads = measured[1]
    return out


def _judged_on(f, label: str, follow, runs: kept.KeptRuns) -> bool:
    """Whether the run `label` has a line for `f`: the first always; a follow-up that re-reads, re-declares or is
    registered its own findings only; one that trains the findings of the experiments it kept."""
    if follow and (follow.reads or follow.declares or follow.registered) and f.id not in follow.findings:
        return False
    return label == FIRST or bool(follow and follow.reads) or f.experiment in runs.of(label)


def _measure(f, label: str, follow, results, ctx):
    """(rows, reads) of the line, or None where a follow-up's line would read an experiment the follow-up changes
    from another run (its trials of it not kept yet): that mixes two protocols, so it waits until they are."""
    if f.experiment is None or not results.has(f.experiment):
        return [], ()
    results.read.clear()
    rows = f.measure(results, ctx, **f.keywords)
    reads = tuple((e, results.source.get(e, FIRST)) for e in sorted(results.read, key=lambda e: (e != f.experiment, e)))
    if follow and not follow.reads and any(e in follow.experiments and s != label for e, s in reads):
        return None
    return rows, reads


def decided(by_run: dict, label: str) -> dict:
    """{finding id: Verdict} of the run `label`'s lines that its kept results judged (none before they exist)."""
    return {fid: v for fid, v in by_run.get(label, {}).items() if v.outcome != NOT_RUN}


def headline(by_run: dict, cut: frozenset = frozenset()) -> dict:
    """{finding id: its headline Verdict}: a registered confirmatory run's (FollowUp.registered) for the lines
    it registered, once it judges them on finished experiments (`cut`: the (label, experiment) pairs kept
    unfinished: part of the registered seeds is a look before the run's end), the first run's standing as
    their pilot; else the first run's."""
    out = dict(by_run[FIRST])
    for label, follow in FOLLOW_UPS.items():
        if follow.registered:
            out.update({fid: v for fid, v in decided(by_run, label).items()
                        if fid in follow.findings and not reads_cut(v, cut)})
    return out


def reads_cut(v, cut: frozenset) -> bool:
    """Whether the verdict `v` reads trials of an experiment its run kept unfinished (`headline`'s `cut`)."""
    return any((label, experiment) in cut for experiment, label in v.reads)


def finished_looks(by_run: dict, cut: frozenset) -> dict:
    """`by_run` less a registered run's verdicts on experiments it kept unfinished (`headline`'s `cut`): the
    front page shows no look before a confirmatory run's end (the line's page does, marked unfinished)."""
    return {label: {fid: v for fid, v in found.items()
                    if not (label in FOLLOW_UPS and FOLLOW_UPS[label].registered and reads_cut(v, cut))}
            for label, found in by_run.items()}


def registered(fid: str, by_run: dict, model: str, cut: frozenset = frozenset()) -> str:
    """'confirmatory run registered DATE, not yet run' (or ', unfinished': `headline`'s `cut`) for a line
    a run registered for `model` does not head yet."""
    for follow in FOLLOW_UPS.values():
        if not (follow.registered and follow.model in ("", model) and fid in follow.findings):
            continue
        v = decided(by_run, follow.label).get(fid)
        if v is None or reads_cut(v, cut):
            state = "not yet run" if v is None else "unfinished"
            return f"{follow.label} run registered {follow.registered}, {state}"
    return ""


def counts_of(found: dict) -> dict:
    """{verdict: lines} of one run's lines (the first's: the headline)."""
    return {v: sum(x.outcome == v for x in found.values()) for v in ORDER}


def counts_line(counts: dict) -> str:
    """'37 findings, headline: 8 reproduced, ...' (each line's headline verdict: judging.headline), in the verdicts'
    order whatever the dict's."""
    return f"{sum(counts.values())} findings, headline: " + ", ".join(
        f"{counts[v]} {v}" for v in ORDER if v in counts) + "."


def pilot_of(results_dir: Path, model: str) -> Optional[dict]:
    """{PILOT_SD key: sd} of the model's own pilot run (RESULTS/pilot-run: 3 seeds, trials of at most 120 steps,
    before any declared run; docs/reproduction/README.md): each key's largest per-unit sd among the first-run rows
    of the findings that declare that key alone, so rows sharing a key that differ in spread call a line
    underpowered rather than flatter it; a key no row measured has no sd. PILOT_SD for the embedded model; None
    without a pilot run."""
    runs = kept.load(Path(results_dir) / power.PILOT_DIR)
    if FIRST not in runs:
        return power.PILOT_SD if model == power.PILOT_MODEL else None
    run = next(iter(runs.of(FIRST).values())).run
    kept.check_one_setting(runs, run.scale, model)
    ctx = experiments.Context(run.layers, experiments.SCALES[run.scale], run.tasks, model=run.model)
    found, sds = verdicts(runs, ctx, None, None)[FIRST], {}
    for f in (f for f in FINDINGS if len(f.pilot) == 1 and f.id in found):
        for e in (r.estimate for r in found[f.id].rows if r.estimate and (r.estimate.n or 0) >= 2):
            if e.std is not None:
                sds[f.pilot[0]] = max(sds.get(f.pilot[0], 0.0), e.std)
    return sds or None

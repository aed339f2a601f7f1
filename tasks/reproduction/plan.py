"""What each declared follow-up would cost, from the kept runs' own wall times: the first run of each of its
experiments, scaled by its seeds and its steps (`python reproduce.py --plan` prints it; the report lists it).

A follow-up trains its experiments' trials again at its own settings: its minutes are the kept first run's wall
minutes x (its seeds / the first's) x (its steps a trial / the first's mean steps a trial). Its steps: the cap
where it turns the plateau off (`plateau_patience` 0), epochs x the kept trials' steps an epoch where it trains
epochs (`trial_steps` 0), else the first run's. A follow-up that trains sweeps of its own in place of the
experiment's (`Experiment.controls`) scales it once more, by its sweeps' estimated cost over the experiment's
(`experiments.sweeps_seconds`: their trials at the step costs). The kept sittings ran with two one-thread workers
on two cores (AMD EPYC, Zen 4 and Zen 5); another machine scales them.

The rule misses what a follow-up changes besides steps and seeds (a trial's fixed costs, evaluations, larger
evaluation sets), so `calibration` holds it against the follow-ups already kept whole on a CPU: the plan prints
how far their real wall times fell from what the rule gives them, and a follow-up with runs of its own among them
gets its pending minutes at their median ratio too (`own_fit`).
"""
from typing import Optional

import numpy as np

from minbert import UserError

from .curves import sitting_kind, trained_earlier, unfinished
from .experiments import EXPERIMENTS, ROLES, Context, sweeps_seconds
from .follow_ups import FIRST
from .kept import trained_where

STEPS_PER_EPOCH_AT_QUARTER = 121  # SST at fraction 0.25, batch 16 (the kept trials' budget.steps_per_epoch)


def _steps(records: list) -> Optional[float]:
    steps = [r["steps"] for r in records if r.get("steps")]
    return float(np.mean(steps)) if steps else None


def _per_epoch(records: list) -> float:
    known = [(r.get("budget") or {}).get("steps_per_epoch") for r in records]
    known = [k for k in known if k]
    if known:
        return float(np.mean(known))
    fractions = [r.get("data_fraction") or 0.25 for r in records]
    return STEPS_PER_EPOCH_AT_QUARTER * float(np.mean(fractions)) / 0.25


def _new_steps(follow, records: list, cap: int, kept_steps: float) -> float:
    changes = dict(follow.changes)
    if changes.get("trial_steps") == 0 and changes.get("epochs"):
        return changes["epochs"] * _per_epoch(records)
    if changes.get("plateau_patience") == 0:
        return float(changes.get("trial_steps") or cap)
    return kept_steps


def minutes(follow, runs: dict, scale) -> dict:
    """{experiment: estimated minutes (None: no kept first run to scale)} of the follow-up's experiments."""
    cap = dict(scale.budget).get("trial_steps") or 0
    out = {}
    for name in follow.experiments:
        kept = runs.get(FIRST, {}).get(name)
        if not kept:
            out[name] = None
            continue
        meta, sweeps = kept
        wall = sum(s["wall_time_s"] for s in meta.get("sittings", [])) / 60
        records = [r for rs in sweeps.values() for r in rs]
        seeds = len(follow.seeds) / len(meta["seeds"]) if follow.seeds else 1.0
        kept_steps = _steps(records)
        steps = _new_steps(follow, records, cap, kept_steps) / kept_steps if kept_steps else 1.0
        out[name] = wall * seeds * steps * own_share(follow, name, meta, runs, scale)
    return out


def calibration(follow_ups: dict, runs: dict, scale) -> list:
    """[(label, experiment, estimated minutes, real minutes)] of each follow-up kept whole whose every sitting
    trained its own trials on a CPU (a GPU's or another process's trials say nothing of a CPU's minutes)."""
    out = []
    for label, by_experiment in runs.items():
        follow = follow_ups.get(label)
        if label == FIRST or follow is None or follow.reads:
            continue
        estimates = minutes(follow, runs, scale)
        for name, (meta, sweeps) in sorted(by_experiment.items()):
            sittings = meta.get("sittings") or []
            on_cpu = sittings and all(sitting_kind(s) == "cpu" and set(s.get("trained_on") or {}) <= {"cpu"}
                                      and trained_earlier(s) == 0 for s in sittings)
            if on_cpu and not unfinished(meta, sweeps) and estimates.get(name):
                out.append((label, name, estimates[name], sum(s["wall_time_s"] for s in sittings) / 60))
    return out


def calibration_line(follow_ups: dict, runs: dict, scale) -> str:
    """How the kept CPU follow-ups' real minutes compared with the rule's ('' when none is kept)."""
    pairs = calibration(follow_ups, runs, scale)
    if not pairs:
        return ""
    pairs = sorted(pairs, key=lambda p: p[3] / p[2])
    ratios = [real / est for *_, est, real in pairs]
    low, high = pairs[0], pairs[-1]
    return (f"the {len(pairs)} follow-up runs kept whole on a CPU took {ratios[0]:.1f}x-{ratios[-1]:.1f}x the "
            f"minutes this rule gives them (median {float(np.median(ratios)):.1f}x; least {low[0]} {low[1]}, "
            f"most {high[0]} {high[1]})")


def own_fit(label: str, fits: list, total: float) -> str:
    """The follow-up's pending minutes at the median ratio its own runs kept whole on a CPU took over the rule: a
    follow-up's changes (a lower rate, a cap) cost the same again in its other experiments, which the rule misses."""
    ratios = [real / est for own, _, est, real in fits if own == label]
    if not ratios:
        return ""
    ratio = float(np.median(ratios))
    return (f", ~{total * ratio:.0f} min at the {ratio:.1f}x (median) its {len(ratios)} "
            f"run{'s' if len(ratios) > 1 else ''} kept whole on a CPU took over this rule")


def own_share(follow, name: str, meta: dict, runs: dict, scale) -> float:
    """The follow-up's own sweeps' estimated cost over its experiment's (1 where it trains the experiment's): both
    at the kept run's depth, tasks and seeds."""
    experiment = EXPERIMENTS[name]
    if follow.label not in dict(experiment.controls):
        return 1.0
    ctx = Context(meta["layers"], scale, meta["tasks"], model=meta["model"])
    own, _ = sweeps_seconds(experiment.sweeps_for(ctx, follow.label, runs), ctx, meta["seeds"])
    return own / sweeps_seconds(experiment.sweeps(ctx), ctx, meta["seeds"])[0]


def blocker(follow, runs: dict, scale) -> str:
    """What a follow-up needs before it can run ('' when nothing): its declared `needs`, or why its own sweeps cannot
    be built from the kept runs yet (e.g. no probe run to read the best layer from)."""
    if follow.needs:
        return follow.needs
    kept_first = runs.get(FIRST, {})
    for name in (e for e in follow.experiments if follow.label in dict(EXPERIMENTS[e].controls)):
        meta = (kept_first.get(name) or next(iter(kept_first.values()), ({},)))[0]
        try:
            ctx = Context(meta.get("layers", 0), scale, meta.get("tasks") or dict(ROLES))   # a run.json has both
            EXPERIMENTS[name].sweeps_for(ctx, follow.label, runs)
        except UserError as e:
            return str(e)
    return ""


def status(follow, runs: dict) -> tuple:
    """(experiments it has run, experiments still pending: not run, or kept unfinished)."""
    kept = runs.get(follow.label, {})
    done = [e for e in follow.experiments if e in kept and not unfinished(*kept[e])]
    return done, [e for e in follow.experiments if e not in done]


def resume_on(meta: dict) -> str:
    """How an unfinished kept run resumes: on the weights its sittings record (a rerun skips its finished trials)."""
    weights = sorted(trained_where(meta)[1])
    return f": rerun it from weights {', '.join(weights)}, which skips its finished trials" if weights else \
        ": the rerun skips its finished trials"


def lines(follow_ups: dict, runs: dict, scale, model: str = "") -> list:
    """One line per declared follow-up: its pending experiments, their estimated minutes, its command (with
    `--model MODEL` for a second model, whose own kept runs `runs` are)."""
    flag = f"--model {model} " if model else ""
    fits = calibration(follow_ups, runs, scale)
    out = []
    for label, follow in follow_ups.items():
        if follow.reads:
            where = "reads" if follow.reads in runs else "will read, once kept,"
            out.append(f"{label} (declared, no training: it {where} the run '{follow.reads}' of "
                       f"{', '.join(follow.experiments)}; the report gives its verdicts): python reproduce.py "
                       f"{flag}--report-only")
            continue
        done, pending = status(follow, runs)
        if not pending:
            continue
        blocked = blocker(follow, runs, scale)
        cost = {e: None for e in follow.experiments} if blocked else minutes(follow, runs, scale)
        total = sum(m for e, m in cost.items() if e in pending and m is not None)
        each = ", ".join((f"{e} ~{cost[e]:.0f} min" if cost[e] is not None else e if blocked
                          else f"{e} (no kept run to scale)")
                         + (f" (kept unfinished{resume_on(runs[label][e][0])})"
                            if e in runs.get(label, {}) else "") for e in pending)
        ran = f"; ran already: {', '.join(done)}" if done else ""
        blocked = f"; needs first: {blocked}" if blocked else ""
        known = any(cost[e] is not None for e in pending)
        whole = f"~{total:.0f} min in all" if known else "no kept first run to scale its minutes from"
        whole += own_fit(label, fits, total) if known else ""
        out.append(f"{label} (declared, pending: {each}; {whole}{ran}{blocked}): python "
                   f"reproduce.py {flag}--follow-up {label} --only {','.join(pending)}")
    return out

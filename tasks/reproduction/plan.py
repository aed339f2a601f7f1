"""What an experiment or a declared follow-up would cost: its trials x the steps a trial x the seconds a step.

The trials are those its sweeps list at its seeds (the sweep API; nothing is loaded). The steps a trial: the
scale's expected steps (`Scale.expected_steps`), or a follow-up's own: its cap where it turns the plateau off, its
epochs x SST's steps an epoch where it trains epochs; a transfer trial (or its equal-steps arm) trains twice the
steps, and probes and comparisons of saved models train none. The seconds a step are one measured constant per
scale and kind of device (SECONDS_PER_STEP): the median over the kept runs of a run's span, from its first trial's
start to its last trial's end, over its trials' steps, so a trial's fixed costs and the workers or shards that ran
at once are in it. Multitask and SMART steps cost about twice the median, another machine otherwise.
"""
from typing import Optional

from minbert import UserError

from ..ablation.study import Shape
from .curves import unfinished
from .experiments import EXPERIMENTS, seeds_of
from .sweeps import Setting, listed_trials

# docs/measurements/2026-11-28-reproduction-seconds-per-step.md (`python tools/seconds_per_step.py`): 30 kept runs
# with two one-thread workers on two cores (AMD EPYC), 7 with ten shards at once on one NVIDIA H200.
SECONDS_PER_STEP = {("cpu", "cpu"): 0.23, ("cpu", "cuda"): 0.014}
STEPS_PER_EPOCH_AT_QUARTER = 121   # SST at fraction 0.25, batch 16, less the held-out tenth (the kept trials')


def steps_a_trial(trial, scale, changes: dict) -> float:
    """The steps one listed trial trains at the scale with a follow-up's `changes` ({} for the declared run)."""
    if trial.mode == "probe" or trial.params.get("kind") in ("seeds", "tasks"):
        return 0.0
    stages = 2 if trial.params.get("via") or trial.params.get("steps") == 2 else 1
    if changes.get("trial_steps") == 0 and changes.get("epochs"):
        return stages * changes["epochs"] * STEPS_PER_EPOCH_AT_QUARTER * trial.fraction / 0.25
    if changes.get("plateau_patience") == 0:
        return stages * (changes.get("trial_steps") or dict(scale.budget)["trial_steps"])
    return stages * scale.expected_steps


def minutes(specs: list, ctx, seeds, changes: tuple = (), device: str = "cpu") -> Optional[float]:
    """Minutes of the trials `specs` list at `seeds`: trials x steps x SECONDS_PER_STEP; None where no rate was
    measured for the scale and device."""
    rate = SECONDS_PER_STEP.get((ctx.scale.name, device))
    if rate is None:
        return None
    setting, shape = Setting(model=ctx.model, task_file=ctx.task_file), Shape(ctx.n, ctx.heads)
    steps = sum(steps_a_trial(trial, ctx.scale, dict(changes)) for spec in specs
                for trial in listed_trials(spec, setting, list(seeds), shape))
    return steps * rate / 60


def experiment_minutes(experiment, ctx, device: str = "cpu") -> Optional[float]:
    """The declared run's minutes."""
    return minutes(experiment.sweeps(ctx), ctx, seeds_of(experiment, ctx.scale), (), device)


def follow_up_minutes(follow, name: str, ctx, runs: dict, device: str = "cpu") -> Optional[float]:
    """The follow-up's minutes on one of its experiments: its own sweeps where it trains them (`controls`, built
    from the kept `runs`: UserError, one line, where they cannot be yet), at its seeds and with its changes."""
    experiment = EXPERIMENTS[name]
    specs = experiment.sweeps_for(ctx, follow.label, runs)
    return minutes(specs, ctx, follow.seeds or seeds_of(experiment, ctx.scale), follow.changes, device)


def status(follow, runs: dict) -> tuple:
    """(experiments it has run, experiments still pending: not run, or kept unfinished)."""
    kept = runs.get(follow.label, {})
    done = [e for e in follow.experiments if e in kept and not unfinished(*kept[e])]
    return done, [e for e in follow.experiments if e not in done]


def lines(follow_ups: dict, runs: dict, ctx, model: str = "", device: str = "cpu") -> list:
    """One line per declared follow-up still pending: its experiments, their estimated minutes, its command (with
    `--model MODEL` for a second model, whose own kept runs `runs` are)."""
    flag = f"--model {model} " if model else ""
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
        try:
            cost, blocked = {e: follow_up_minutes(follow, e, ctx, runs, device) for e in pending}, ""
        except UserError as e:
            cost, blocked = dict.fromkeys(pending), str(e)
        each = ", ".join(e + (f" ~{cost[e]:.0f} min" if cost[e] is not None else "")
                         + (" (kept unfinished: a rerun skips its finished trials)" if e in runs.get(label, {}) else "")
                         for e in pending)
        known = [m for m in cost.values() if m is not None]
        whole = f"; ~{sum(known):.0f} min in all" if known else "" if blocked else "; no measured rate for it"
        ran = f"; ran already: {', '.join(done)}" if done else ""
        needs = f"; needs first: {blocked}" if blocked else ""
        out.append(f"{label} (declared, pending: {each}{whole}{ran}{needs}): python reproduce.py {flag}--follow-up "
                   f"{label} --only {','.join(pending)}")
    return out


"""What an experiment or a declared follow-up would cost: its trials x the steps a trial x the seconds a step.

The trials are those its sweeps list at its seeds (nothing is loaded). The steps a trial: the scale's expected
steps, or a follow-up's own (its cap where it turns the plateau off, its epochs x SST's steps an epoch); a transfer
trial trains twice the steps, probes and comparisons of saved models none. The seconds a step: one figure
per scale and kind of device, the median over the embedded model's kept runs (`seconds_per_step`);
multitask and SMART steps cost about twice that, another machine otherwise.
"""
import functools
import statistics
from datetime import datetime, timedelta
from pathlib import Path
from typing import Optional

from minbert import UserError

from .curves import unfinished
from .experiments import EXPERIMENTS, seeds_of
from .kept import KeptRuns, device_kind, load
from .sweeps import listed_trials

# The embedded model's kept runs (reproduce.py's default --results), found from the code, not the
# working folder.
MEASURED = Path(__file__).resolve().parents[2] / "docs" / "reproduction" / "results"
STEPS_PER_EPOCH_AT_QUARTER = 121   # SST at fraction 0.25, batch 16, less the held-out tenth (the kept trials')
GPU_DAY_MINUTES = 24 * 60          # "a GPU day": what power.py calls past this scale's reach


def run_rate(records: list) -> Optional[tuple]:
    """(kind of device, seconds a step) of one kept run's trials: the span from its first trial's start
    (its `finished_at` less its `wall_time_s`) to its last trial's end, over their fine-tuning steps (both
    stages of a transfer trial), so a trial's fixed costs and the workers or shards that ran at once are in
    it. None where a trial lacks its times, none trained, or they trained on two kinds of device."""
    if not records or any(not r.finished_at or r.wall_time_s is None for r in records):
        return None
    ends = [datetime.strptime(r.finished_at, "%Y-%m-%dT%H:%M:%SZ") for r in records]
    starts = [end - timedelta(seconds=r.wall_time_s) for end, r in zip(ends, records)]
    steps = sum(r.total_steps or 0 for r in records)
    kinds = {device_kind(r) or "?" for r in records}
    if not steps or len(kinds) != 1:
        return None
    return kinds.pop(), (max(ends) - min(starts)).total_seconds() / steps


@functools.cache
def seconds_per_step(results_dir: Path = MEASURED) -> dict:
    """{(scale, kind of device): the median of `run_rate` over the kept runs in `results_dir`}: read at
    plan and report time, so a run kept there moves the estimate; {} where the folder is absent. Each run's
    rate: docs/measurements/2026-11-28-reproduction-seconds-per-step.md."""
    rates = {}
    for by_experiment in load(results_dir).values():
        for run, sweeps in by_experiment.values():
            found = run_rate([r for records in sweeps.values() for r in records])
            if found:
                rates.setdefault((run.scale, found[0]), []).append(found[1])
    return {key: statistics.median(values) for key, values in rates.items()}


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


def experiment_minutes(experiment, ctx, device: str = "cpu", follow=None, runs=None) -> Optional[float]:
    """Minutes of the experiment's declared run, or of the follow-up `follow`'s on it (its own sweeps where it trains
    them, built from the kept `runs`: UserError, one line, where they cannot be yet; its seeds and changes): trials
    x steps x `seconds_per_step`; None where no rate was measured for the scale and device."""
    rate = seconds_per_step().get((ctx.scale.name, device))
    if rate is None:
        return None
    specs = experiment.sweeps_for(ctx, follow.label, runs) if follow else experiment.sweeps(ctx)
    seeds = list((follow and follow.seeds_for(experiment.name)) or seeds_of(experiment, ctx.scale))
    steps = sum(steps_a_trial(trial, ctx.scale, dict(follow.changes if follow else ())) for spec in specs
                for trial in listed_trials(spec, ctx, seeds))
    return steps * rate / 60


def seeds_a_gpu_day(ctx) -> dict:
    """{experiment: the seeds of it, and of the experiments its findings read, that one GPU day trains at the measured
    rate (ten shards on one H200)}; {} where no rate was measured for the scale."""
    rate = seconds_per_step().get((ctx.scale.name, "cuda"))
    if rate is None:
        return {}
    per_seed = {}
    for e in EXPERIMENTS.values():
        seeds = seeds_of(e, ctx.scale)
        per_seed[e.name] = sum(steps_a_trial(trial, ctx.scale, {}) for spec in e.sweeps(ctx)
                               for trial in listed_trials(spec, ctx, seeds)) / len(seeds)
    steps = {e.name: per_seed[e.name] + sum(per_seed[x] for x in e.needs) for e in EXPERIMENTS.values()}
    return {name: int(GPU_DAY_MINUTES * 60 / (x * rate)) for name, x in steps.items() if x}


def lines(follow_ups: dict, runs: KeptRuns, ctx, flags: str = "", device: str = "cpu") -> list:
    """One line per declared follow-up still pending: its experiments, their estimated minutes, its command (with
    `flags`, e.g. the --results folder whose kept runs `runs` are)."""
    command = "python reproduce.py " + flags
    out = []
    for label, follow in follow_ups.items():
        if follow.reads:
            out.append(f"{label} (declared, no training: it re-reads the run '{follow.reads}' of "
                       f"{', '.join(follow.experiments)}; the report gives its verdicts): {command}--report-only")
            continue
        kept = runs.of(label)
        done = [e for e in follow.experiments if e in kept and not unfinished(*kept[e])]
        pending = [e for e in follow.experiments if e not in done]
        if not pending:
            continue
        try:
            cost, blocked = {e: experiment_minutes(EXPERIMENTS[e], ctx, device, follow, runs) for e in pending}, ""
        except UserError as e:
            cost, blocked = dict.fromkeys(pending), f"; needs first: {e}"
        each = ", ".join(e + (f" ~{cost[e]:.0f} min" if cost[e] is not None else "")
                         + (" (kept unfinished: a rerun skips its finished trials)" if e in kept else "")
                         for e in pending)
        known = [m for m in cost.values() if m is not None]
        whole = f"; ~{sum(known):.0f} min in all" if known else "" if blocked else "; no measured rate for it"
        ran = f"; ran already: {', '.join(done)}" if done else ""
        out.append(f"{label} (declared, pending: {each}{whole}{ran}{blocked}): {command}--follow-up {label} "
                   f"--only {','.join(pending)}")
    return out

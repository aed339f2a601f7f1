"""What an experiment or a declared follow-up would cost: each listed trial's seconds on the machine, summed.

The trials are those its sweeps list at its seeds (nothing is loaded). A trial that fine-tunes costs its steps
(the scale's expected steps, or a follow-up's own: its cap where it turns the plateau off, its epochs x SST's
steps an epoch; a transfer trial trains twice the steps) x the seconds a step; a trial that trains nothing
(`STEPLESS`: a probe, a comparison of two saved models) the seconds a trial of its kind took. Both come from
the kept runs' trial records at plan and report time (`measured`: medians per scale, kind of device and
precision; where none is named, the precision most kept runs trained in), so a run kept there moves the
estimate. A stepless kind untimed on a device costs nothing.
"""
import functools
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

from minbert import UserError

from ..machine import busy_time
from .curves import unfinished
from .experiments import EXPERIMENTS, seeds_of
from .kept import KeptRuns, device_kind, load, trial_spans
from .sweeps import listed_trials, protocol

# The embedded model's kept runs (reproduce.py's default --results), found from the code, not the
# working folder.
MEASURED = Path(__file__).resolve().parents[2] / "docs" / "reproduction" / "results"
STEPS_PER_EPOCH_AT_QUARTER = 121   # SST at fraction 0.25, batch 16, less the held-out tenth (the kept trials')
GPU_DAY_MINUTES = 24 * 60          # "a GPU day": what power.py calls past this scale's reach
STEPLESS = ("probe", "seeds", "tasks")   # a probe; comparisons of two seeds' or two tasks' saved models


def trial_kind(trial) -> str:
    """"steps" for a trial that fine-tunes, else its kind in `STEPLESS` (a listed trial or a kept line)."""
    if trial.mode == "probe":
        return "probe"
    kind = trial.params.get("kind")
    return kind if kind in STEPLESS else "steps"


@dataclass(frozen=True)
class Rate:
    """The seconds a fine-tuning step (its trial's evaluations and fixed costs in it; None where none
    fine-tuned) and a trial of each stepless kind ({kind: seconds}), for the machine."""
    step: Optional[float]
    trial: dict


class RunRate(NamedTuple):
    """One kept run's `Rate`, and where its trials trained."""
    device: str                 # "cpu", "cuda"
    precision: str              # "bf16", "fp32", ...; "" where the trials did not record it
    rate: Rate


def shares(records: list) -> list:
    """Each trial's seconds of the machine: its wall time x the run's busy time (`machine.busy_time`) / their
    summed wall time. Workers or shards that ran at once share it; the hours between sittings are out."""
    share = busy_time(trial_spans(records)) / sum(r.wall_time_s for r in records)
    return [r.wall_time_s * share for r in records]


def run_rate(records: list) -> Optional[RunRate]:
    """One kept run's `RunRate`: a step, the fine-tuning trials' `shares` over their steps (both stages of a
    transfer trial); a stepless kind, its trials' mean share. None where a trial lacks its times, or the
    trials trained on two kinds of device or in two precisions."""
    if not records or any(not r.finished_at or r.wall_time_s is None for r in records):
        return None
    kinds, precisions = {device_kind(r) or "?" for r in records}, {r.precision for r in records}
    if len(kinds) != 1 or len(precisions) != 1 or not sum(r.wall_time_s for r in records):
        return None
    by_kind = {}
    for r, seconds in zip(records, shares(records)):
        by_kind.setdefault(trial_kind(r), []).append((r, seconds))
    trained = by_kind.pop("steps", [])
    steps = sum(r.total_steps or 0 for r, _ in trained)
    step = sum(seconds for _, seconds in trained) / steps if steps else None
    trial = {kind: statistics.fmean(seconds for _, seconds in found) for kind, found in by_kind.items()}
    return RunRate(kinds.pop(), precisions.pop(), Rate(step, trial))


@functools.cache
def run_rates(results_dir: Path = MEASURED) -> tuple:
    """(scale, `RunRate`) of each kept run in `results_dir` that gives one; () where the folder is absent.
    Each run's: docs/measurements/2026-11-29-reproduction-planner-stepless-trials.md."""
    found = []
    for by_experiment in load(results_dir).values():
        for run, sweeps in by_experiment.values():
            rate = run_rate([r for records in sweeps.values() for r in records])
            if rate:
                found.append((run.scale, rate))
    return tuple(found)


def usual_precision(scale: str, device: str, results_dir: Path = MEASURED) -> str:
    """The precision most kept runs at `scale` on `device` that give a seconds a step trained in ("" where
    none was kept): what an estimate that names no precision reads, rather than a median over machines as
    unlike as bf16 and fp32 ones. A probe-only run gives no step, so it cannot make `measured` read None."""
    found = Counter(r.precision for s, r in run_rates(results_dir)
                    if s == scale and r.device == device and r.rate.step is not None)
    return max(sorted(found), key=found.__getitem__) if found else ""


def measured(scale: str, device: str, precision: str = "", results_dir: Path = MEASURED) -> Optional[Rate]:
    """The median `Rate` of the kept runs at `scale` on `device` ("cpu", "cuda") in `precision` ("": the
    `usual_precision` there); None where none gave a seconds a step."""
    precision = precision or usual_precision(scale, device, results_dir)
    rates = [r.rate for s, r in run_rates(results_dir)
             if s == scale and r.device == device and r.precision == precision]
    steps = [r.step for r in rates if r.step is not None]
    if not steps:
        return None
    trial = {kind: statistics.median(r.trial[kind] for r in rates if kind in r.trial)
             for kind in STEPLESS if any(kind in r.trial for r in rates)}
    return Rate(statistics.median(steps), trial)


def steps_a_trial(trial, scale, settings: dict) -> float:
    """The steps one listed trial trains at the scale under its sweep's `settings` (`sweeps.protocol`: the
    sweep's own, the scale's budget and plateau, a follow-up's changes, the later winning)."""
    if trial_kind(trial) != "steps":
        return 0.0
    stages = 2 if trial.params.get("via") or trial.params.get("steps") == 2 else 1
    if settings["trial_steps"] == 0:            # a schedule of epochs, not of steps
        return stages * settings["epochs"] * STEPS_PER_EPOCH_AT_QUARTER * trial.fraction / 0.25
    if settings["plateau_patience"] == 0:       # no plateau: every trial trains its cap
        return stages * settings["trial_steps"]
    return stages * scale.expected_steps


def trial_seconds(trial, scale, settings: dict, rate: Rate) -> float:
    """A listed trial's seconds at `rate`: its steps', or its stepless kind's (0 where none was measured)."""
    kind = trial_kind(trial)
    if kind != "steps":
        return rate.trial.get(kind, 0.0)
    return steps_a_trial(trial, scale, settings) * rate.step


def sweeps_seconds(specs, ctx, seeds: list, follow, rate: Rate) -> float:
    """The seconds of every trial the sweeps `specs` list at `seeds`, each sweep's settings resolved once."""
    total = 0.0
    for spec in specs:
        settings = dict(protocol(spec, ctx.scale, follow))
        total += sum(trial_seconds(trial, ctx.scale, settings, rate)
                     for trial in listed_trials(spec, ctx, seeds))
    return total


def experiment_minutes(experiment, ctx, device: str = "cpu", follow=None, runs=None,
                       precision: str = "") -> Optional[float]:
    """Minutes of the experiment's declared run, or of the follow-up `follow`'s on it (its own sweeps where it
    trains them, built from the kept `runs`: UserError, one line, where they cannot be yet; its seeds and
    changes): its trials' `trial_seconds` at the rate `measured`; None where none was."""
    rate = measured(ctx.scale.name, device, precision)
    if rate is None:
        return None
    specs = experiment.sweeps_for(ctx, follow.label, runs) if follow else experiment.sweeps(ctx)
    seeds = list((follow and follow.seeds_for(experiment.name)) or seeds_of(experiment, ctx.scale))
    return sweeps_seconds(specs, ctx, seeds, follow, rate) / 60


def seeds_a_gpu_day(ctx) -> dict:
    """{experiment: the seeds of it, and of the experiments its findings read, that one GPU day trains at the measured
    rate (ten shards on one H200)}; {} where no rate was measured for the scale."""
    rate = measured(ctx.scale.name, "cuda")
    if rate is None:
        return {}
    per_seed = {}
    for e in EXPERIMENTS.values():
        seeds = seeds_of(e, ctx.scale)
        per_seed[e.name] = sweeps_seconds(e.sweeps(ctx), ctx, seeds, None, rate) / len(seeds)
    seconds = {e.name: per_seed[e.name] + sum(per_seed[x] for x in e.needs) for e in EXPERIMENTS.values()}
    return {name: int(GPU_DAY_MINUTES * 60 / x) for name, x in seconds.items() if x}


def lines(follow_ups: dict, runs: KeptRuns, ctx, flags: str = "", device: str = "cpu",
          precision: str = "") -> list:
    """One line per declared follow-up still pending: its experiments, their minutes on `device` in
    `precision` ("": the usual one there), its command (with `flags`: the --results folder whose kept runs
    `runs` are)."""
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
            cost, blocked = {e: experiment_minutes(EXPERIMENTS[e], ctx, device, follow, runs, precision)
                             for e in pending}, ""
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

"""A search as it runs: its record (search.json), the loop every process runs (take a trial, train it, until
the study holds enough), the workers on one machine, and the end (the figure, the best trial, its
predictions published)."""
from __future__ import annotations

import json
import multiprocessing
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import optuna
import torch
from optuna.trial import TrialState

from minbert import UserError

from ..ablation.workers import cpu_count
from ..cli import exit_status
from ..course.submission import course_predictions_dir, publish_predictions
from ..fileio import atomic_write_json
from ..machine import versions
from .figures import draw
from .options import DEFAULTS, SearchCommand
from .study import (
    FINISHED,
    SURPLUS,
    counts,
    default_storage,
    fail_stale,
    open_storage,
    open_study,
    retried_as,
    sampler,
    sampler_record,
    surplus,
    utc_now,
)
from .trial import SCORE, Search, mark_failed, run_trial

RECORD = "search.json"    # the search's record: its space, fixed flags, sampler seed, pruner, storage, command
LOGS = "logs"             # --workers: each worker's output, logs/worker-K.log
POLL_S = 5.0              # how often a process with nothing to take looks again (trials running elsewhere)


def identity(command: SearchCommand) -> dict:
    """What makes a search the same search: a rerun must match it (`--trials` may grow)."""
    return json.loads(json.dumps({"study": command.study, "space": [p.declaration() for p in command.space],
                                  "fixed": list(command.fixed), "sampler_seed": command.seed,
                                  "pruner": command.pruner, "storage": command.storage}))


def resolved(command: SearchCommand, saved) -> SearchCommand:
    """The options left out taken from the search's record (`saved`), else their defaults."""
    recorded = {"pruner": saved["pruner"], "seed": saved["sampler_seed"], "study": saved["study"],
                "trials": saved["trials"], "storage": saved["storage"], "fixed": tuple(saved["fixed"]),
                "heartbeat": saved["heartbeat_s"], "retries": saved["retries"]} if saved else {}
    changes = {k: recorded.get(k, DEFAULTS[k]) for k in DEFAULTS if getattr(command, k) is None}
    if command.storage is None:
        changes["storage"] = recorded.get("storage") or default_storage(command.out)
    if not command.fixed and saved:
        changes["fixed"] = recorded["fixed"]
    return replace(command, **changes)


def open_search(command: SearchCommand, check: bool = True) -> tuple:
    """(the command with its recorded options, the study): the record written at the first start and, with
    `check`, held against every other; a storage that cannot be opened is one line, before anything is written."""
    path = command.out / RECORD
    saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    command = resolved(command, saved)
    if saved is not None and check:
        for key, value in identity(command).items():
            if saved[key] != value:
                raise UserError(f"{path}: this search was started with {key} {saved[key]!r}, not {value!r}: run it "
                                f"again as it was started (search.py --out {command.out} alone resumes it), or "
                                f"choose another --out")
    if command.storage == default_storage(command.out):
        command.out.mkdir(parents=True, exist_ok=True)
    study = open_study(open_storage(command.storage), command.study, command.pruner, sampler(command.seed, 0))
    if saved is not None and check and saved["trials"] != command.trials:  # extended (or cut) on purpose
        atomic_write_json(path, {**saved, "trials": command.trials})
    if saved is None:
        command.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {"version": 1, **identity(command), "trials": command.trials,
                                 "sampler": sampler_record(command.seed), "heartbeat_s": command.heartbeat,
                                 "retries": command.retries, "command": sys.argv, "started": utc_now(),
                                 "versions": {**versions(), "optuna": optuna.__version__}})
    return command, study


def search(command: SearchCommand) -> int:
    command, study = open_search(command)
    status = work(command, study) if command.workers == 1 else run_workers(command)
    return finish(command, study, status)


def work(command: SearchCommand, study) -> int:
    """Take trials and train them until `--trials` are finished; 0, or the status of a trial stopped by a signal."""
    trial_search = Search(command.out, command.fixed, command.space, command.pruner, command.heartbeat,
                          command.retries)
    said_waiting = False
    while True:
        for number in fail_stale(study, 2 * command.heartbeat, command.retries):
            mark_failed(trial_search, number, retried_as(study, number))
            print(f"search: trial {number} stopped beating (its process was killed): marked failed, its "
                  f"parameters retried", flush=True)
        held = counts(study)
        if sum(held[s] for s in FINISHED) >= command.trials:
            return 0
        running = sum(held[s] for s in FINISHED) + held[TrialState.RUNNING]
        if not held[TrialState.WAITING] and running >= command.trials:  # the last places run elsewhere
            if not said_waiting:
                print("search: waiting for the trials running in other processes", flush=True)
                said_waiting = True
            time.sleep(min(command.heartbeat, POLL_S))
            continue
        trial = study.ask()
        study.sampler = sampler(command.seed, trial.number)  # before the trial draws anything
        if surplus(study, trial, command.trials):
            trial.set_user_attr(SURPLUS, "asked for the last place at the same moment as another process; not run")
            study.tell(trial, state=TrialState.FAIL)
            continue
        status = run_trial(trial_search, study, trial)
        if status:
            return status


def run_workers(command: SearchCommand) -> int:
    """`--workers` processes, each its own loop on the study, the CPU's threads shared; their output in
    logs/worker-K.log. The first non-zero status, else 0."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    (command.out / LOGS).mkdir(exist_ok=True)
    threads = max(1, cpu_count() // command.workers)
    processes = [context.Process(target=worker_main, args=(asdict(command), k, threads))
                 for k in range(1, command.workers + 1)]
    for process in processes:
        process.start()
    print(f"search: {command.workers} workers, {threads} thread(s) each; their output in {command.out / LOGS}/",
          flush=True)
    for process in processes:
        process.join()
    return next((p.exitcode for p in processes if p.exitcode), 0)


def worker_main(fields: dict, index: int, threads: int) -> None:
    """One worker process: its own connection to the study, its output to its log."""
    command = SearchCommand(**fields)
    torch.set_num_threads(threads)
    with open(command.out / LOGS / f"worker-{index}.log", "a", encoding="utf-8", buffering=1) as log:
        sys.stdout = sys.stderr = log
        try:
            study = open_study(open_storage(command.storage), command.study, command.pruner, sampler(command.seed, 0))
            status = work(command, study)
        except UserError as e:
            status = exit_status(e)
    sys.exit(status)


def best_trial(study):
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return max(complete, key=lambda t: t.value, default=None)


def finish(command: SearchCommand, study, status: int) -> int:
    """The figure, the count, the best trial and its predictions published (a complete run's only)."""
    figure = draw(study, command.out)
    held = counts(study)
    print(f"search: {sum(held[s] for s in FINISHED)} of {command.trials} trials finished "
          f"({held[TrialState.COMPLETE]} complete, {held[TrialState.PRUNED]} pruned, {held[TrialState.FAIL]} "
          f"failed); figure {figure}", flush=True)
    best = best_trial(study)
    if best is None:
        return status
    folder = Path(best.user_attrs["folder"])
    print(f"best: trial {best.number}, dev {SCORE} {best.value:.4f}: {folder}", flush=True)
    target = course_predictions_dir(command.predictions_dir)
    if status == 0 and target and folder.is_dir():
        files = sorted((folder / "predictions").glob("*.csv"))
        for line in publish_predictions({str(folder): files}, target, sys.argv, command.predictions_dir is not None):
            print(line)
    return status


def best(command: SearchCommand) -> int:
    """--best: the best complete trial's run folder, its dev scores and parameters; nothing trained."""
    if not (command.out / RECORD).exists():
        raise UserError(f"--out {command.out}: no search there ({RECORD} missing)")
    _, study = open_search(command, check=False)
    trial = best_trial(study)
    if trial is None:
        raise UserError(f"{command.out}: no complete trial yet")
    print(trial.user_attrs["folder"])
    print(f"trial {trial.number}: dev {SCORE} {trial.value:.4f}; " +
          " ".join(f"{name}={value}" for name, value in trial.params.items()))
    return 0

"""The study behind a search: where it is stored, how it draws and prunes, and how a killed trial is found
and retried.

Storage: SQLite in the search's folder by default; `--storage` a database URL (anything with "://", e.g.
postgresql://..., for machines without a shared file system) or a path, Optuna's journal file (append-only,
safe on a shared file system such as NFS: a cluster's job array). Every process opens it and draws its own
trials; trial numbers come from the storage, so no two processes anywhere run the same trial.

A killed trial (SIGKILL, a preempted node) cannot say so. Each running trial writes its heartbeat (a user
attribute, the time) every `interval` seconds; a trial RUNNING without one for `2 x interval` is stale: the
first process to see it marks it failed (a storage update only one process can make) and enqueues a retry,
the same parameters in a new trial (Optuna's `RetryHeartbeatStaleTrialCallback`). Optuna's own heartbeat
does this for database storages only, not for the journal file a cluster shares: this one serves all three.

Counting: the search is done when `trials` trials are COMPLETE or PRUNED. A process asks for a new trial only
while fewer than that are finished, running or waiting; two that ask at the same moment for the last place
both get a trial, and the one with the higher number is marked failed unrun ("surplus"), so the count is
never exceeded.
"""
from __future__ import annotations

import datetime
import inspect
import threading
import time
import warnings

import optuna
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState
from sqlalchemy.exc import SQLAlchemyError

from minbert import UserError

DEFAULT_STORAGE = "study.db"       # SQLite, in the search's folder
HEARTBEAT = "heartbeat"            # user attribute: the time (s since the epoch) a running trial last lived
SURPLUS = "surplus"                # user attribute of a trial asked for beyond the count, never run
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
HELD = (*FINISHED, TrialState.RUNNING, TrialState.WAITING)

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=ExperimentalWarning)


def default_storage(folder) -> str:
    return f"sqlite:///{(folder / DEFAULT_STORAGE).resolve()}"


def open_storage(spec: str):
    """The storage `spec` names, opened; one line if it cannot be."""
    try:
        if "://" in spec:
            sqlite = {"connect_args": {"timeout": 60}} if spec.startswith("sqlite") else {}  # processes take turns
            return RDBStorage(spec, engine_kwargs=sqlite)
        storage = JournalStorage(JournalFileBackend(spec))
        storage.get_all_studies()  # reads the file: a file that is not a journal fails here
        return storage
    except (OSError, ValueError, ImportError, RuntimeError, SQLAlchemyError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"--storage {spec}: cannot open it ({reason})") from None


def pruner(name: str):
    """median: stop a trial whose dev score at an evaluation is below the median of earlier trials' at the
    same evaluation; hyperband: successive halving over brackets (the evaluations are its resource)."""
    if name == "median":
        return optuna.pruners.MedianPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1)
    return optuna.pruners.NopPruner()


def sampler(seed: int, number: int):
    """TPE for trial `number`, seeded from the search's seed and the trial's number: what it draws depends on
    the trials before it, never on which process asks (two processes draw different startup trials)."""
    return optuna.samplers.TPESampler(seed=(seed * 1_000_003 + number) % 2**32, constant_liar=True)


def sampler_record(seed: int) -> dict:
    startup = inspect.signature(optuna.samplers.TPESampler).parameters["n_startup_trials"].default
    return {"name": "TPESampler", "seed": seed, "per_trial_seed": "(seed * 1000003 + trial number) mod 2^32",
            "constant_liar": True, "n_startup_trials": startup}


def open_study(storage, name: str, pruner_name: str, first_sampler):
    return optuna.create_study(storage=storage, study_name=name, direction="maximize", pruner=pruner(pruner_name),
                               sampler=first_sampler, load_if_exists=True)


def counts(study) -> dict:
    """How many trials are in each state."""
    trials = study.get_trials(deepcopy=False)
    return {state: sum(t.state == state for t in trials) for state in TrialState}


def surplus(study, trial, wanted: int) -> bool:
    """`trial` is past the `wanted` trials held (another process asked for the last place at the same moment)."""
    held = sorted(t.number for t in study.get_trials(deepcopy=False, states=HELD))
    return trial.number in held and held.index(trial.number) >= wanted


def stale(trial, grace: float, now: float) -> bool:
    beat = trial.user_attrs.get(HEARTBEAT)
    if beat is None and trial.datetime_start is not None:  # asked, not yet beating
        beat = trial.datetime_start.timestamp()
    return beat is not None and now - beat > grace


def fail_stale(study, grace: float, retries: int) -> list:
    """Mark the running trials whose heartbeat stopped failed and enqueue their retries; the trials this process
    marked (another process may mark some first: the storage lets one do it)."""
    marked, now = [], time.time()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not stale(trial, grace, now):
            continue
        try:
            study.tell(trial.number, state=TrialState.FAIL)
        except (UpdateFinishedTrialError, ValueError, RuntimeError):  # marked by another process first
            continue
        marked.append(trial.number)
        retry(study, trial.number, retries)
    return marked


def retry(study, number: int, retries: int) -> None:
    """Trial `number`'s parameters again, as a waiting trial the next process to ask takes (up to `retries`
    times for one original)."""
    RetryHeartbeatStaleTrialCallback(max_retry=retries)(study, study.trials[number])


def retry_of(study, number: int):
    """The number of the failed trial that trial `number` retries, or None."""
    return RetryHeartbeatStaleTrialCallback.retried_trial_number(study.trials[number])


def retried_as(study, number: int):
    """The trial that retries trial `number`, or None."""
    return next((t.number for t in study.get_trials(deepcopy=False) if t.system_attrs.get("retry_history", [None])
                 [-1] == number), None)


class Heartbeat:
    """While a trial runs: its heartbeat every `interval` seconds, from a thread."""

    def __init__(self, trial, interval: float):
        self.trial, self.interval = trial, interval
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.beat, daemon=True)

    def beat(self):
        while True:
            try:
                self.trial.set_user_attr(HEARTBEAT, time.time())
            except UpdateFinishedTrialError:  # another process judged it stale: nothing more to say
                return
            if self.done.wait(self.interval):
                return

    def __enter__(self):
        self.trial.set_user_attr(HEARTBEAT, time.time())
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

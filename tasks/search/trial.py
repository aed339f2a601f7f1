"""One trial of a search: its parameters drawn, the trainer's own command on its run folder, the dev score
reported at each evaluation, and what its folder says it was (`trial.json`).

A trial is `train_multitask.py FIXED... DRAWN... --out SEARCH/trials/NNNN --predictions-dir ''`, run through
`tasks.training.train_command` with one callback more (`Report`), so its folder is an ordinary run folder
(config.json with the full record, checkpoints, metrics.json, predictions/, model/) that predict.py reads.
A trial does not publish its predictions to the course-level folder: the search publishes its best trial's
at the end, as a run publishes its own.

Pruning: after each evaluation `Report` gives the trial the dev overall, at step k for the k-th evaluation
(with evaluations at each epoch's end, the epoch), and asks the pruner; a trial to prune ends there through
`run.request_stop`, the reason in its metrics.json ("stop_reason") and its trial.json. A pruned run trained
fewer steps than planned: prepare_submit.py calls it interrupted, as any run stopped early.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from minbert import UserError

from ..fileio import atomic_write_json
from ..saved.run_result import RunResult
from ..training import Callback, parse_train_command, train_command
from .figures import add_hparams
from .study import Heartbeat, retry, retry_of, utc_now

SCORE = "overall"                  # the course's overall dev score: what a search maximises
TRIALS = "trials"                  # SEARCH/trials/NNNN: one run folder per trial number
TRIAL_RECORD = "trial.json"        # in a trial's run folder: its search, number, parameters and state
INTERRUPTED = 128                  # the trainer's exit status for a stop by a signal: 128 + the signal


@dataclass(frozen=True)
class Search:
    """What every trial of one search shares."""
    out: Path
    fixed: tuple          # the trainer's flags given on search.py's command line
    space: tuple          # the parameters drawn (space.py)
    pruner: str
    heartbeat: float      # seconds between a running trial's signs of life
    retries: int          # how often a killed trial's parameters are retried


def folder_of(out: Path, number: int) -> Path:
    return Path(out) / TRIALS / f"{number:04d}"


def trainer_argv(search: Search, params: dict, folder: Path) -> list:
    drawn = [a for p in search.space for a in p.argv(params[p.name])]
    return [*search.fixed, *drawn, "--out", str(folder), "--predictions-dir", ""]


class Report(Callback):
    """Each evaluation's dev overall to the trial; the run stops where the pruner says so."""

    def __init__(self, trial, pruner_name: str):
        self.trial, self.pruner_name = trial, pruner_name
        self.pruned: Optional[str] = None

    def on_evaluate(self, run, metrics, seconds):
        value = metrics.get(SCORE)
        if value is None:
            return
        evaluation = len(run.state.history)
        self.trial.report(value, evaluation)
        if not run.ending() and self.trial.should_prune():  # the last evaluation ends a complete trial
            self.pruned = (f"pruned by the search's {self.pruner_name} pruner at evaluation {evaluation} "
                           f"(step {run.state.global_step}): dev {SCORE} {value:.4f}")
            run.request_stop(self.pruned)


def run_trial(search: Search, study, trial) -> int:
    """Draw, train and settle one trial; 0, or the trainer's status for a stop by a signal."""
    params = {p.name: p.suggest(trial) for p in search.space}
    folder = folder_of(search.out, trial.number)
    argv = trainer_argv(search, params, folder)
    try:
        parse_train_command(argv)
    except UserError as e:
        study.tell(trial, state=TrialState.FAIL)
        raise UserError(f"trial {trial.number} ({' '.join(argv[len(search.fixed):-4])}): the trainer refuses it: "
                        f"{e}; fix that parameter with its flag") from None
    trial.set_user_attr("folder", str(folder.resolve()))
    folder.mkdir(parents=True, exist_ok=True)
    write_record(folder, search, trial.number, "running", params=params, retry_of=retry_of(study, trial.number))
    print(f"search: trial {trial.number} in {folder}: {' '.join(argv[len(search.fixed):-4])}", flush=True)
    report = Report(trial, search.pruner)
    with Heartbeat(trial, search.heartbeat):
        status = train_command(argv, callbacks=[report])
    return settle(search, study, trial, params, folder, status, report.pruned)


def settle(search: Search, study, trial, params: dict, folder: Path, status: int, pruned: Optional[str]) -> int:
    """Tell the study how the trial ended and write it into its folder; the status the search returns."""
    if status == 0:
        best = RunResult.read(folder / "metrics.json").best[SCORE]
        state = TrialState.PRUNED if pruned else TrialState.COMPLETE
        told = tell(study, trial, state, None if pruned else best)
        value = told.value if told is not None else None
        write_record(folder, search, trial.number, "pruned" if pruned else "complete", value=value, reason=pruned)
        add_hparams(search.out, trial.number, params, "pruned" if pruned else "complete", value)
        return 0
    tell(study, trial, TrialState.FAIL)
    if status >= INTERRUPTED:  # a signal: the same parameters again on the next run
        retry(study, trial.number, search.retries)
        write_record(folder, search, trial.number, "failed", reason="interrupted by a signal; retried on the next run")
        return status
    write_record(folder, search, trial.number, "failed", reason=f"the run failed (exit status {status}; its "
                                                                  f"error line above); not retried")
    if status == 2:
        raise UserError(f"trial {trial.number}: the trainer refused it (the line above); the search stops")
    return 0


def tell(study, trial, state, value=None):
    """The trial's end, told once; None when another process had judged it stale and failed it first."""
    try:
        study.tell(trial, value, state=None if state == TrialState.COMPLETE else state)
    except UpdateFinishedTrialError:
        return None
    return study.trials[trial.number]


def write_record(folder: Path, search: Search, number: int, state: str, **fields) -> None:
    """trial.json: the search it belongs to, its number, its parameters and its state, updated as it goes."""
    path = folder / TRIAL_RECORD
    record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else \
        {"version": 1, "search": str(search.out.resolve()), "trial": number}
    record.update({"state": state, "updated": utc_now(), **{k: v for k, v in fields.items() if v is not None}})
    atomic_write_json(path, record)


def mark_failed(search: Search, number: int, retried: Optional[int]) -> None:
    """A trial found stale (its process killed): its folder says so, where the folder is on this machine."""
    folder = folder_of(search.out, number)
    if folder.is_dir():
        write_record(folder, search, number, "failed", retried_as=retried,
                     reason=f"no heartbeat for over {2 * search.heartbeat:g} s: its process was killed")

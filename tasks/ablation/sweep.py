"""Run one sweep (a `SweepConfig`): list its trials, shard, run and resume them; what every study shares.

A sweep is a list of trials, one per configuration x seed x data fraction,
listed by its study (studies/, `Study.trials`). The checkpoint and the tokenised data are
loaded once (`tasks.inputs.prepare`); each trial changes a copy of the encoder and
hands it to `tasks.training.fit`, so the training is the trainer's own. Each finished
trial is appended to results.jsonl at once: rerunning the same command skips the
trials already there (so a killed sweep resumes), and a trial that crashed is
recorded as "failed" and retried next time rather than silently dropped.

A sweep can be split into shards (`--shard I/N`) run at once on several GPUs
or machines sharing the folder: a trial's shard is a hash of its name, each
shard appends to its own results.shard-I-of-N.jsonl, and every results file
in the folder counts as done and is merged for the summary (`--summarize`).

On a CPU the trials run side by side in one-thread worker processes (`--workers`, default one per
CPU: workers.py); each prints a progress line about every 30 s (`TrialLines`).
"""
import copy
import dataclasses
import hashlib
import json
import math
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

import torch

import minbert
from minbert import UserError

from ..config import TrainConfig
from ..fileio import append_jsonl, safe_join
from ..inputs import RunInputs, announcement, prepare, subsample_split
from ..training import InMemory, Interrupted, TensorBoard, declarations, fit, training_plan
from . import workers
from .config import SweepConfig
from .line import FAILED, OK, Budget, TrialLine
from .plateau import Plateau, PlateauRule, coarse_holdout, dev_curve, heldout_count, plateau_fingerprint, split_heldout
from .progress import Progress, TrialLines
from .results import keep_the_sweeps_precision, merged_results, results_files, results_name
from .study import Shape, Trial, fingerprinted
from .summary import finished, tally

# ---------------------------------------------------------------------------- shards


def shard_of(trial: Trial, count: int, salt: str = "") -> int:
    """The shard (1..count) that runs `trial`: a hash of its name (or shard unit), never of its place in the plan.

    So adding seeds, fractions or layers never moves a trial already assigned,
    and two shards never write the same trial's folder. `salt` (the sweep's, the same in every shard) spreads
    sweeps whose trials share names (seed0..seed4 in each) over different shards.
    """
    unit = salt + (trial.shard_unit or trial.name)
    return int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "big") % count + 1


def shard_trials(trials: list, shard, salt: str = "") -> list:
    """The trials of shard (I, N), in plan order; all of them for None."""
    return trials if shard is None else [t for t in trials if shard_of(t, shard[1], salt) == shard[0]]


# ---------------------------------------------------------------------------- running one trial


class Sweep:
    """What the trials of one sweep share: its config, the study, the inputs loaded once, the output folder.

    `config` is the SweepConfig, `training` the training options every trial derives its own from, `options`
    the study's own.
    """

    def __init__(self, config: SweepConfig, inputs: RunInputs):
        self.config, self.inputs, self.out, self.study = config, inputs, Path(config.out), config.study
        self.training: TrainConfig = config.training
        self.options = config.options
        self.shape = Shape(inputs.encoder.num_layers, inputs.encoder.config.num_attention_heads)
        self.fingerprint = fingerprint(config, inputs)
        self.plateau = config.plateau
        self.cache = {}  # what a study keeps from one trial for the next (transfer: the last intermediate model)
        self.callbacks = []  # what watches each fit: the running trial's progress lines

    def pretrained_copy(self) -> minbert.BertModel:
        return copy.deepcopy(self.inputs.encoder)

    def run_trial(self, trial: Trial) -> dict:
        """The trial's fit result ("best", "final", "model", ...), plus "curves"/"info" where it has them."""
        return self.study.run(self, trial)

    def fit(self, trial: Trial, encoder, name: Optional[str] = None, tasks=None, export_to=None, steps=None,
            plateau: bool = True, inputs: Optional[RunInputs] = None, **changes) -> dict:
        """Fine-tune `encoder` exactly as train_multitask.py would, for the sweep's budget (`budget`: at most
        `steps` steps, default --trial-steps, stopping earlier on a held-out plateau unless `plateau` is False or
        the rule is off), logging to tensorboard/<name>. The result's model has the final weights: the final
        evaluation is the trial's result; its "budget" says what the trial spent (`plateau.py`).

        Nothing else is written unless asked: a trial is cheap to rerun, and a checkpoint
        per trial would take gigabytes over a sweep. The final model goes to `export_to` as a
        model folder (tasks/saved/model_folder.py), and with --export-models each trial's to
        models/<trial name>/. `changes` are training options (TrainConfig's fields) the trial sets; `inputs`
        replaces the sweep's data (the same tasks, encoded as `changes` need: another --pair-mode).
        """
        tasks = tuple(tasks or self.inputs.tasks)
        inputs = dataclasses.replace(inputs or self.inputs, tasks=tasks)
        config = dataclasses.replace(self.training, seed=trial.seed, data_fraction=trial.fraction,
                                     tasks=",".join(tasks), **changes)
        rule = self.plateau if plateau else PlateauRule(patience=0)
        callbacks, counts = [], None
        if rule.on:  # the trial's share, less its held-out rows, is the data: trained at fraction 1
            inputs, counts = split_heldout(inputs, tasks, trial.fraction, trial.seed, rule)
            config = dataclasses.replace(config, data_fraction=1.0)
            callbacks.append(Plateau(rule, tasks))
        config, cap = budget(config, inputs, self.config.trial_steps if steps is None else steps)
        folder = self.fresh_dir("tensorboard", name or trial.name)
        hparams = {"mode": trial.mode, "config": trial.label, "seed": trial.seed, "data_fraction": trial.fraction,
                   "tasks": config.tasks, "stage": name or "trial"}
        if export_to is None and name is None and self.config.export_models:
            export_to = self.fresh_dir("models", trial.name)
        outputs = [TensorBoard(folder, hparams), InMemory(final_weights=True, export_to=export_to)]
        result = fit(config, inputs, outputs, encoder=encoder, callbacks=[*callbacks, *self.callbacks])
        result["budget"] = Budget(**cap, trained_steps=result["steps"], dev_curve=dev_curve(result["history"]),
                                  plateau=callbacks[0].describe(counts, result["steps"]) if callbacks else None,
                                  heldout_curve=callbacks[0].curve if callbacks else [])
        return result

    def fresh_dir(self, *parts) -> Path:
        """An empty folder below the output folder: a retried trial's curves replace, not join, the old ones."""
        folder = safe_join(self.out, *parts)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder


def budget(config: TrainConfig, inputs: RunInputs, trial_steps: int) -> tuple:
    """The sweep's step cap, applied to one trial's training options: a trial takes at most `trial_steps` optimizer
    steps whatever its data fraction (as many passes over its share of the training data as that needs, the last
    one cut short, the learning-rate schedule spanning those steps; the plateau rule may end it earlier); --max-steps
    still caps it. With trial_steps 0 it trains --epochs passes instead, so the steps scale with the fraction.

    Returns the options and the budget: the cap (steps), epochs, steps per epoch, evaluation interval.
    """
    per_epoch = training_plan(config, inputs)[2].steps_per_epoch()
    if trial_steps:
        steps = min(trial_steps, config.max_steps or trial_steps)
        config = dataclasses.replace(config, epochs=math.ceil(steps / per_epoch), max_steps=steps)
    steps = min(per_epoch * config.epochs, config.max_steps or per_epoch * config.epochs)
    return config, {"steps": steps, "epochs": config.epochs, "steps_per_epoch": per_epoch,
                    "eval_every": config.eval_every}


def attempt(sweep: Sweep, trial: Trial) -> TrialLine:
    """Run one trial and return its results line; a crash becomes a "failed" line, retried on the next run."""
    started = time.time()
    try:
        result = sweep.run_trial(trial)
    except (UserError, Interrupted):
        raise
    except Exception as e:
        return trial_line(sweep, trial, FAILED, error=f"{type(e).__name__}: {e}",
                          traceback=traceback.format_exc(limit=-8), wall_time_s=round(time.time() - started, 1))
    # A study's run returns what it has: a comparison of saved models no evaluations, a probe no budget.
    found = {part: result[name] for part, name in LINE_PARTS.items() if result.get(name) is not None}
    return trial_line(sweep, trial, OK, **found, wall_time_s=round(time.time() - started, 1))


# A fit result's parts as a results line names them: the trial's result is its last evaluation ("final"); the best
# one is optimistic (chosen on the same dev set), kept beside.
LINE_PARTS = {"dev": "final", "dev_best": "best", "best_step": "best_step", "steps": "steps", "budget": "budget",
              "curves": "curves", "info": "info"}


def trial_line(sweep: Sweep, trial: Trial, status: str, **outcome) -> TrialLine:
    """A trial's results line: what every line of it says, whatever became of it, and its `outcome`."""
    return TrialLine(trial.key(sweep.fingerprint), trial.mode, trial.label, trial.group, trial.params, trial.seed,
                     trial.fraction, status, fingerprint=sweep.fingerprint, precision=sweep.inputs.precision,
                     device=str(sweep.inputs.device), finished_at=_utc_now(), **outcome)


def _utc_now() -> str:
    """UTC, so that shards on machines in other time zones agree on which record of a trial is the latest."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------- the fingerprint


KEPT_OPTIONS = ("average", "ema_decay", "swa_start", "per_task_best")  # what a run keeps (docs/training.md)
DEFAULTS = TrainConfig()


def fingerprint(sweep_config: SweepConfig, inputs: RunInputs) -> str:
    """Hash of everything a trial's result depends on besides its own seed, fraction and configuration.

    Every training option counts, the weights and data by their hashes (not
    their paths), so a rerun with other options starts afresh in the same folder.
    Where and how it runs does not count (--device, --implementation, --cuda-graphs, the data's path, what
    --precision auto chose there): shards on other machines, and --summarize on a machine without a
    GPU, must agree on it. Each results line records the precision its trial used. The study's options count
    unless they only choose the trials or the figures (`study.fingerprinted`).
    """
    config, study = sweep_config.training, sweep_config.study
    values = {k: getattr(config, k) for k in sorted(set(TrainConfig.names()) - {
        "seed", "data_fraction", "out", "checkpoint_every", "model", "data_dir", "device", "implementation",
        "cuda_graphs", "task_file"})}
    for name in KEPT_OPTIONS:  # at their defaults, absent: a sweep keeps the fingerprint it had before they existed
        if values[name] == getattr(DEFAULTS, name):
            del values[name]
    # config.precision is the one asked for (auto: each machine's fast one), not the one it became here
    values["tasks"] = ",".join(config.task_list)
    values["weights"] = inputs.encoder.source.weights_sha256 if inputs.encoder.source else config.model
    values["data"] = {task: {split: d and {k: v for k, v in d.items() if k != "path"} for split, d in splits.items()}
                      for task, splits in inputs.data_record.items()}
    values["trial_steps"] = sweep_config.trial_steps
    plateau = plateau_fingerprint(sweep_config.plateau) if study.trains else None
    if plateau:  # absent when off: a fixed-budget sweep keeps the fingerprint it had before the rule existed
        values["plateau"] = plateau
    declared = {t: {k: v for k, v in d.items() if k not in ("files", "declared_in", "description")}
                for t, d in declarations(config.task_list).items()}
    if declared:  # how a declared task reads its files and scores, not where the files are
        values["declared_tasks"] = declared
    values.update(fingerprinted(sweep_config.options))
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- the sweep


def run(config: SweepConfig) -> int:
    """List, run (skipping finished trials), summarise and plot one sweep, or one shard of it; 1 if a trial
    failed. With summarize, only merge the results files and write the summary."""
    sweep, trials = open_sweep(config)
    return summarize(sweep, trials) if config.summarize else run_shard(sweep, trials)


def run_and_collect(config: SweepConfig, beside: frozenset = frozenset()) -> tuple:
    """Run (or resume) one sweep: (exit status, its finished trials, one record each); `beside`: the
    precisions its experiment's other trials trained in (`results.keep_the_sweeps_precision`)."""
    sweep, trials = open_sweep(config)
    status = run_shard(sweep, trials, beside)
    listed = {t.key(sweep.fingerprint) for t in trials}
    return status, [r for r in finished_records(sweep) if r.key in listed]


def collect_finished(config: SweepConfig) -> tuple:
    """Train nothing: (0, the sweep's trials already finished in its folder, one record each), e.g. those shards
    on another machine finished there."""
    sweep, trials = open_sweep(config)
    listed = {t.key(sweep.fingerprint) for t in trials}
    records = [r for r in finished_records(sweep) if r.key in listed]
    print(f"{config.mode}: {len(records)} of {len(trials)} trials finished in {sweep.out}; nothing trained", flush=True)
    return 0, records


def open_sweep(config: SweepConfig) -> tuple:
    """The sweep (model and data loaded) and its trials."""
    # --summarize trains nothing; the fingerprint does not depend on the device
    training = config.training
    inputs = prepare(dataclasses.replace(training, device="cpu") if config.summarize else training)
    sweep = Sweep(config, inputs)
    trials = config.study.trials(config, sweep.shape)  # out-of-range layers/heads stop here, before any trial
    shape = f"{inputs.encoder.source.num_layers} layers x {sweep.shape.num_heads} heads"
    print(announcement(inputs, f"sweep folder {config.out}", shape), flush=True)
    return sweep, trials


def finished_records(sweep: Sweep) -> list:
    """The sweep's successful trials over every results file in its folder, one record each."""
    return finished(merged_results(sweep.out), sweep.config.mode, sweep.fingerprint)


def note_other_options(sweep: Sweep, records: list):
    others = sum(r.mode == sweep.config.mode and r.fingerprint != sweep.fingerprint for r in records)
    if others:
        print(f"note: {others} lines of the results in {sweep.out} were run with other training options, model or "
              f"data; they are left out of this sweep's summary", flush=True)


def summarize(sweep: Sweep, trials: list) -> int:
    """--summarize: merge every results file in the folder and write the summary from the finished trials."""
    if not results_files(sweep.out):
        raise UserError(f"{sweep.out}: no results.jsonl or results.shard-*.jsonl to summarise (--out must be "
                        f"the sweep's folder)")
    records = merged_results(sweep.out)
    note_other_options(sweep, records)
    tally(sweep, trials, records)
    return 0


def run_shard(sweep: Sweep, trials: list, beside: frozenset = frozenset()) -> int:
    """Run this shard's unfinished trials (all of them without --shard), then report on the whole sweep."""
    config = sweep.config
    note = sweep.study.note(config)
    if note:
        print(f"note: {note}", flush=True)
    path = sweep.out / results_name(config.shard)
    previous = merged_results(sweep.out, own=path)
    records = finished(previous, config.mode, sweep.fingerprint)
    done = {r.key for r in records}
    keep_the_sweeps_precision(sweep, records, beside)
    mine = shard_trials(trials, config.shard, config.shard_salt)
    pending = [t for t in mine if t.key(sweep.fingerprint) not in done]
    share = f"shard {config.shard[0]}/{config.shard[1]}: {len(mine)} of {len(trials)}" if config.shard \
        else len(trials)
    print(f"{config.mode}: {share} trials, {len(mine) - len(pending)} already finished in {sweep.out}; results go to "
          f"{path.name}", flush=True)
    note_other_options(sweep, previous)
    warn_coarse_holdout(sweep, pending)
    failed = run_trials(sweep, pending, len(mine), path)
    if not tally(sweep, trials, merged_results(sweep.out, own=path), write=config.shard is None):
        print("summary: written by the shard that finishes the sweep, or now by the same command with "
              "--summarize in place of --shard", flush=True)
    if failed:
        print(f"error: {failed} of {len(pending)} trials failed (recorded in {path}); rerun the same command to "
              f"retry them", file=sys.stderr)
        return 1
    return 0


def warn_coarse_holdout(sweep: Sweep, trials: list) -> None:
    """Before any trial, once per data fraction: where the plateau's held-out set is too small for its tolerance
    (`plateau.coarse_holdout`). Single-task sweeps only: several tasks stop on the overall score."""
    rule, tasks = sweep.plateau, sweep.inputs.tasks
    if not rule.on or len(tasks) != 1:
        return
    for fraction in sorted({t.fraction for t in trials}):
        rows = len(subsample_split(sweep.inputs.data[tasks[0]]["train"], fraction, 0))
        note = coarse_holdout(tasks[0], heldout_count(rows, rule.holdout_share, rule.holdout_max), rule.tolerance)
        if note:
            print(f"warning: fraction {fraction:g}: {note}", file=sys.stderr, flush=True)


def run_trials(sweep: Sweep, pending: list, total: int, path: Path) -> int:
    """Run and record each trial as it finishes, in worker processes side by side where --workers allows; the
    number that failed."""
    count = worker_count(sweep, pending)
    grouped = units(pending, sweep.study.worker_unit)
    threads = max(1, workers.cpu_count() // count) if count > 1 else torch.get_num_threads()
    if pending:
        print(f"running {len(pending)} trials in {count} {'worker processes' if count > 1 else 'process'} of "
              f"{threads} thread{'s' * (threads > 1)} each", flush=True)
    progress = Progress(total, total - len(pending), count)
    failed = 0

    def record(trial: Trial, line: TrialLine):
        nonlocal failed
        line = dataclasses.replace(line, workers=count, threads=threads)
        append_jsonl(path, line.to_json())
        failed += not line.ok
        progress.update(trial, line)

    def job(trial: Trial, say) -> TrialLine:
        sweep.callbacks = [TrialLines(trial, say)]
        return attempt(sweep, trial)

    try:
        if count == 1:
            for trial in pending:
                record(trial, job(trial, progress.line))
        else:
            workers.run_units(grouped, count, job, record, progress.line,
                              lambda trial, reason: record(trial, lost(sweep, trial, reason)))
    except Interrupted as e:
        raise Interrupted(e.exit_code - 128, f"stopped by a signal; finished trials are in {path}; rerun the same "
                                             f"command to resume") from None
    finally:
        progress.close()
    return failed


def worker_count(sweep: Sweep, pending: list) -> int:
    """--workers (auto: one per CPU on a CPU, one on a GPU), no more than there are units to run."""
    wanted = sweep.config.workers or workers.auto_workers(sweep.inputs.device)
    if wanted > 1 and sweep.inputs.device.type != "cpu":
        raise UserError(f"--workers {wanted}: worker processes run on a CPU only; on GPUs run one shard per GPU "
                        f"(--shard I/N, docs/studies.md)")
    if wanted > 1 and not workers.can_fork():
        print("note: this platform cannot fork worker processes; the trials run one at a time", flush=True)
        return 1
    return max(1, min(wanted, len(units(pending, sweep.study.worker_unit))))


def units(trials: list, worker_unit=lambda trial: None) -> list:
    """The trials grouped by the study's worker unit, else by shard unit (trials sharing one run in one worker, in
    order), in plan order."""
    grouped = {}
    for trial in trials:
        grouped.setdefault(worker_unit(trial) or trial.shard_unit or trial.name, []).append(trial)
    return [workers.Unit(i, items) for i, items in enumerate(grouped.values())]


def lost(sweep: Sweep, trial: Trial, reason: str) -> TrialLine:
    """The results line of a trial whose worker died under it: failed, retried on the next run."""
    return trial_line(sweep, trial, FAILED, error=reason, wall_time_s=0.0)

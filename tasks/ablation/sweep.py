"""Plan, shard, run and resume one sweep: what every study shares.

A sweep is a list of trials, one per configuration x seed x data fraction,
planned by its study (studies/). The checkpoint and the tokenised data are
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
import re
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

import minbert
from minbert import UserError

from ..config import TrainConfig
from ..fileio import append_jsonl, atomic_write_text, read_jsonl, safe_join
from ..inputs import RunInputs, announcement, prepare, subsample_split
from ..training import InMemory, Interrupted, TensorBoard, declarations, fit, training_plan
from . import workers
from .plateau import (
    Plateau,
    PlateauRule,
    coarse_holdout,
    dev_curve,
    heldout_count,
    plateau_fingerprint,
    split_heldout,
)
from .progress import Progress, TrialLines
from .summary import finished, report

RESULTS = "results.jsonl"
SHARD_RESULTS = re.compile(r"results\.shard-\d+-of-\d+\.jsonl")


# ---------------------------------------------------------------------------- studies and trials


@dataclass(frozen=True)
class Study:
    """One --mode, as a module in studies/ declares it."""
    summary: str                  # its part of --mode's help
    title: str                    # the title of its option group in --help
    plan: Callable                # (args, Shape) -> [Trial]; a layer or head the model lacks: UserError, here
    run: Callable                 # (Sweep, Trial) -> fit's result, plus "curves" and "info" where it has them
    figures: Callable             # (Sweep, ok records, summary rows, metric) -> {plot name: Figure or None}
    add_arguments: Callable = lambda group: None  # its own options (an error with any other --mode)
    fingerprint: tuple = ()       # its options that change every trial without being in the trials' configs
    note: Callable = lambda args: None  # a line worth printing before its trials run, or None
    reference: Callable = lambda sweep, params: None  # the group a configuration's paired change is measured from
    pools: Callable = lambda sweep, params: {}  # ({group: params}) -> {label: (params, [groups])}: means over configs
    trains: bool = True           # its trials fine-tune (the budget and the plateau rule apply)
    worker_unit: Callable = lambda trial: None  # trials with one value run in one worker process (sharing its cache)


@dataclass
class Trial:
    mode: str
    config: str          # the configuration's label: "from=3", "head=2:5", "layer=4,pooling=mean", ...
    params: dict         # the same as values, for the trial itself and for the plots
    seed: int
    fraction: float
    group: str = ""      # what the summary pools over seeds; the configuration unless set
    shard_unit: str = ""  # what its shard is a hash of: trials that must run in one shard share it; its name if unset

    def __post_init__(self):
        self.group = self.group or self.config

    @property
    def name(self) -> str:
        """The trial's TensorBoard run name: folder-safe, and one per trial (the fraction in full where :g would
        round it, or two fractions would share a folder and, for dynamics, a saved model)."""
        fraction = f"{self.fraction:g}" if float(f"{self.fraction:g}") == self.fraction else repr(self.fraction)
        return re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{self.mode}-{self.config}-seed{self.seed}-frac{fraction}")

    def key(self, fingerprint: str) -> str:
        return f"{self.mode}|{self.config}|seed={self.seed}|fraction={self.fraction!r}|{fingerprint}"


@dataclass(frozen=True)
class Shape:
    num_layers: int
    num_heads: int


def grid(mode: str, configs: list, seeds, fractions) -> list:
    """Every configuration at every seed and fraction: a whole curve at the first seed comes first."""
    configs = list(dict(configs).items())  # drop repeated labels, keep the order
    return [Trial(mode, label, params, seed, fraction)
            for seed in seeds for fraction in fractions for label, params in configs]


def shard_of(trial: Trial, count: int) -> int:
    """The shard (1..count) that runs `trial`: a hash of its name (or shard unit), never of its place in the plan.

    So adding seeds, fractions or layers never moves a trial already assigned,
    and two shards never write the same trial's folder.
    """
    unit = trial.shard_unit or trial.name
    return int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "big") % count + 1


def shard_trials(trials: list, shard) -> list:
    """The trials of shard (I, N), in plan order; all of them for None."""
    return trials if shard is None else [t for t in trials if shard_of(t, shard[1]) == shard[0]]


# ---------------------------------------------------------------------------- running one trial


class Sweep:
    """What the trials of one sweep share: the arguments, the study, the inputs loaded once, the output folder.

    `args` holds the sweep's own options, `args.config` the training options every trial derives its own from.
    """

    def __init__(self, args, inputs: RunInputs, out_dir, study: Study):
        self.args, self.inputs, self.out, self.study = args, inputs, Path(out_dir), study
        self.config: TrainConfig = args.config
        self.shape = Shape(inputs.encoder.num_layers, inputs.encoder.config.num_attention_heads)
        self.fingerprint = fingerprint(args, inputs, study)
        self.plateau = PlateauRule.from_args(args)
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
        model folder (tasks/trained/model_folder.py), and with --export-models each trial's to
        models/<trial name>/. `changes` are training options (TrainConfig's fields) the trial sets; `inputs`
        replaces the sweep's data (the same tasks, encoded as `changes` need: another --pair-mode).
        """
        tasks = tuple(tasks or self.inputs.tasks)
        inputs = dataclasses.replace(inputs or self.inputs, tasks=tasks)
        config = dataclasses.replace(self.config, seed=trial.seed, data_fraction=trial.fraction, tasks=",".join(tasks),
                                     **changes)
        rule = self.plateau if plateau else PlateauRule(patience=0)
        callbacks, counts = [], None
        if rule.on:  # the trial's share, less its held-out rows, is the data: trained at fraction 1
            inputs, counts = split_heldout(inputs, tasks, trial.fraction, trial.seed, rule)
            config = dataclasses.replace(config, data_fraction=1.0)
            callbacks.append(Plateau(rule, tasks))
        config, spent = budget(config, inputs, self.args.trial_steps if steps is None else steps)
        folder = self.fresh_dir("tensorboard", name or trial.name)
        hparams = {"mode": trial.mode, "config": trial.config, "seed": trial.seed, "data_fraction": trial.fraction,
                   "tasks": config.tasks, "stage": name or "trial"}
        if export_to is None and name is None and getattr(self.args, "export_models", False):
            export_to = self.fresh_dir("models", trial.name)
        outputs = [TensorBoard(folder, hparams), InMemory(final_weights=True, export_to=export_to)]
        result = fit(config, inputs, outputs, encoder=encoder, callbacks=[*callbacks, *self.callbacks])
        spent.update(trained_steps=result["steps"], dev_curve=dev_curve(result["history"]), plateau=None)
        if callbacks:
            spent.update(plateau=callbacks[0].describe(counts, result["steps"]), heldout_curve=callbacks[0].curve)
        result["budget"] = spent
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


def attempt(sweep: Sweep, trial: Trial) -> dict:
    """Run one trial and return its results line; a crash becomes a "failed" line, retried on the next run."""
    started = time.time()
    record = trial_record(sweep, trial)
    try:
        result = sweep.run_trial(trial)
    except (UserError, Interrupted):
        raise
    except Exception as e:
        return {**record, "status": "failed", "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=-8), "wall_time_s": round(time.time() - started, 1),
                "finished_at": _utc_now()}
    # The trial's result is its last evaluation; the best one is optimistic (chosen on the same dev set), kept beside.
    found = {"dev": result.get("final"), "dev_best": result.get("best"), "best_step": result.get("best_step"),
             "steps": result.get("steps"), "budget": result.get("budget"), "curves": result.get("curves"),
             "info": result.get("info")}
    return {**record, "status": "ok", **{k: v for k, v in found.items() if v is not None},
            "wall_time_s": round(time.time() - started, 1), "finished_at": _utc_now()}


def trial_record(sweep: Sweep, trial: Trial) -> dict:
    """What every results line of a trial says, whatever became of it."""
    return {"key": trial.key(sweep.fingerprint), "mode": trial.mode, "config": trial.config, "group": trial.group,
            "params": trial.params, "seed": trial.seed, "data_fraction": trial.fraction,
            "fingerprint": sweep.fingerprint, "precision": sweep.inputs.precision, "device": str(sweep.inputs.device)}


def _utc_now() -> str:
    """UTC, so that shards on machines in other time zones agree on which record of a trial is the latest."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------- results files


def fingerprint(args, inputs: RunInputs, study: Study) -> str:
    """Hash of everything a trial's result depends on besides its own seed, fraction and configuration.

    Every training option counts, the weights and data by their hashes (not
    their paths), so a rerun with other options starts afresh in the same folder.
    Where and how it runs does not count (--device, --implementation, the data's path, what --precision auto
    chose there): shards on other machines, and --summarize on a machine without a
    GPU, must agree on it. Each results line records the precision its trial used.
    """
    config = args.config
    values = {k: getattr(config, k) for k in sorted(set(TrainConfig.names()) - {
        "seed", "data_fraction", "out", "checkpoint_every", "model", "data_dir", "device", "implementation",
        "task_file"})}
    # config.precision is the one asked for (auto: each machine's fast one), not the one it became here
    values["tasks"] = ",".join(config.task_list)
    values["weights"] = inputs.encoder.source.weights_sha256 if inputs.encoder.source else config.model
    values["data"] = {task: {split: d and {k: v for k, v in d.items() if k != "path"} for split, d in splits.items()}
                      for task, splits in inputs.data_record.items()}
    values["trial_steps"] = args.trial_steps
    plateau = plateau_fingerprint(PlateauRule.from_args(args)) if study.trains else None
    if plateau:  # absent when off: a fixed-budget sweep keeps the fingerprint it had before the rule existed
        values["plateau"] = plateau
    declared = {t: {k: v for k, v in d.items() if k not in ("files", "declared_in", "description")}
                for t, d in declarations(config.task_list).items()}
    if declared:  # how a declared task reads its files and scores, not where the files are
        values["declared_tasks"] = declared
    values.update({name: getattr(args, name) for name in study.fingerprint})
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def results_name(shard) -> str:
    return RESULTS if shard is None else f"results.shard-{shard[0]}-of-{shard[1]}.jsonl"


def results_files(folder: Path) -> list:
    """results.jsonl and every shard's file, whatever shard count they were run with."""
    return sorted(p for p in folder.glob("results*.jsonl") if p.name == RESULTS or SHARD_RESULTS.fullmatch(p.name))


def load_results(path: Path) -> list:
    """The trials recorded in this process's own results file; a torn last line (a killed write) is dropped from
    the file too."""
    records = read_jsonl(path)
    if path.exists():
        data = path.read_bytes()
        lines = [line for line in data.split(b"\n") if line.strip()]
        if data and (not data.endswith(b"\n") or len(lines) != len(records)):
            atomic_write_text(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in records))
    return records


def merged_results(folder: Path, own: Optional[Path] = None) -> list:
    """Every record of every results file in the folder. Only `own` is repaired: the other files are other
    shards', possibly being appended to right now, and rewriting one could drop the line being appended."""
    return [r for path in results_files(folder) for r in (load_results(path) if path == own else read_jsonl(path))]


def note_other_options(sweep: Sweep, records: list):
    others = sum(r.get("mode") == sweep.args.mode and r.get("fingerprint") != sweep.fingerprint for r in records)
    if others:
        print(f"note: {others} lines of the results in {sweep.out} were run with other training options, model or "
              f"data; they are left out of this sweep's summary", flush=True)


# ---------------------------------------------------------------------------- the sweep


def run(args, study: Study) -> int:
    """Plan, run (skipping finished trials), summarise and plot one sweep, or one shard of it; 1 if a trial
    failed. With --summarize, only merge the results files and write the summary."""
    sweep, trials = open_sweep(args, study)
    return summarize(sweep, trials) if args.summarize else run_shard(sweep, trials)


def open_sweep(args, study: Study) -> tuple:
    """The sweep (model and data loaded) and its planned trials."""
    # --summarize trains nothing; the fingerprint does not depend on the device
    inputs = prepare(dataclasses.replace(args.config, device="cpu") if args.summarize else args.config)
    sweep = Sweep(args, inputs, args.out, study)
    trials = study.plan(args, sweep.shape)  # out-of-range layers/heads stop here, before any trial
    shape = f"{inputs.encoder.source.num_layers} layers x {sweep.shape.num_heads} heads"
    print(announcement(inputs, f"sweep folder {args.out}", shape), flush=True)
    return sweep, trials


def finished_records(sweep: Sweep) -> list:
    """The sweep's successful trials over every results file in its folder, one record each."""
    return finished(merged_results(sweep.out), sweep.args.mode, sweep.fingerprint)


def summarize(sweep: Sweep, trials: list) -> int:
    """--summarize: merge every results file in the folder and write the summary from the finished trials."""
    if not results_files(sweep.out):
        raise UserError(f"{sweep.out}: no results.jsonl or results.shard-*.jsonl to summarise (--out must be "
                        f"the sweep's folder)")
    records = merged_results(sweep.out)
    note_other_options(sweep, records)
    report(sweep, trials, records)
    return 0


def run_shard(sweep: Sweep, trials: list) -> int:
    """Run this shard's unfinished trials (all of them without --shard), then report on the whole sweep."""
    args = sweep.args
    note = sweep.study.note(args)
    if note:
        print(f"note: {note}", flush=True)
    path = sweep.out / results_name(args.shard)
    previous = merged_results(sweep.out, own=path)
    done = {r["key"] for r in finished(previous, args.mode, sweep.fingerprint)}
    mine = shard_trials(trials, args.shard)
    pending = [t for t in mine if t.key(sweep.fingerprint) not in done]
    share = f"shard {args.shard[0]}/{args.shard[1]}: {len(mine)} of {len(trials)}" if args.shard else len(trials)
    print(f"{args.mode}: {share} trials, {len(mine) - len(pending)} already finished in {sweep.out}; results go to "
          f"{path.name}", flush=True)
    note_other_options(sweep, previous)
    warn_coarse_holdout(sweep, pending)
    failed = run_trials(sweep, pending, len(mine), path)
    if not report(sweep, trials, merged_results(sweep.out, own=path), write=args.shard is None):
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

    def record(trial: Trial, line: dict):
        nonlocal failed
        line = {**line, "workers": count, "threads": threads}
        append_jsonl(path, line)
        failed += line["status"] != "ok"
        progress.update(trial, line)

    def job(trial: Trial, say) -> dict:
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
    wanted = sweep.args.workers or workers.auto_workers(sweep.inputs.device)
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


def lost(sweep: Sweep, trial: Trial, reason: str) -> dict:
    """The results line of a trial whose worker died under it: failed, retried on the next run."""
    return {**trial_record(sweep, trial), "status": "failed", "error": reason, "wall_time_s": 0.0,
            "finished_at": _utc_now()}

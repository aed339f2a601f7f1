"""An experiment's sweeps as `SweepConfig`s, run through the sweep API, and their finished trials kept.

A sweep's protocol (`protocol`) is (name, value) pairs named as ablate.py's flags, the last of a name winning;
run.json records it as ablate.py's command line (`as_arguments`), so a later sitting can tell whether it runs the
same protocol.
"""
import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from minbert import DEFAULT_IMPLEMENTATION

from ..ablation import sweep
from ..ablation.config import SweepConfig, from_settings
from ..ablation.results import RESULTS, merged_results
from ..ablation.studies import STUDIES
from ..ablation.study import Shape, as_argument
from ..fileio import append_jsonl
from ..machine import cpu_model, resolve_device, source_commit
from ..pretraining import identify
from . import kept
from .curves import figure_path
from .follow_ups import FIRST


@dataclass(frozen=True)
class Setting:
    """What every sweep of a reproduction shares: the model, the data and the machine."""
    model: str
    device: str = "auto"
    precision: str = "auto"
    implementation: str = DEFAULT_IMPLEMENTATION
    data_dir: Optional[str] = None
    task_file: Optional[str] = None
    max_steps: Optional[int] = None     # a smoke run's cap
    workers: Optional[int] = None       # None: the sweep's default
    shard: Optional[tuple] = None       # (I, N): this process runs shard I of N of every sweep; None: all
    gather: bool = False                # train nothing: keep the trials already finished in the sweeps' folders


def protocol(spec, scale, follow) -> tuple:
    """The sweep's settings (`experiments.SweepSpec`), the scale's budget and plateau, a follow-up's changes."""
    return (*spec.settings, *scale.budget, *scale.plateau, *(follow.changes if follow else ()))


def as_arguments(mode: str, settings) -> list:
    """The settings as ablate.py's flags: ["--task", "sst", "--from-layer", "none,5,...,all", ...]."""
    flags = [(f"--{name.replace('_', '-')}", as_argument(STUDIES[mode].Options, name, value))
             for name, value in settings]
    return [x for flag in flags for x in flag if x is not None]


def sweep_config(mode: str, settings, setting: Setting, seeds, out=None) -> SweepConfig:
    """The sweep, built directly: its settings, the setting's training options, the seeds and folder."""
    fixed = {k: v for k, v in dataclasses.asdict(setting).items() if k not in ("workers", "shard", "gather")}
    if out is not None:
        fixed["out"] = str(out)
    salt = f"{Path(out).name}/" if out is not None and setting.shard else ""   # sweeps' trials share names
    return from_settings(STUDIES[mode], dict(settings), seeds=tuple(seeds), workers=setting.workers,
                         shard=setting.shard, shard_salt=salt, **fixed)


def listed_trials(spec, ctx, seeds) -> list:
    """The trials a sweep of `spec` lists at `seeds` on the context's model (nothing loaded)."""
    config = sweep_config(spec.mode, spec.settings, Setting(ctx.model, task_file=ctx.task_file), seeds)
    return config.study.trials(config, Shape(ctx.n, ctx.heads))


def run_experiment(experiment, ctx, setting: Setting, follow, seeds: list, folders: dict, root: Path) -> int:
    """Run (or resume) the experiment's sweeps and keep their finished trials; 1 when a trial failed. `folders`:
    "out" (the sweeps'), "results" (the kept results), "report" (for the figures); `root`: the commit's checkout."""
    label = follow.label if follow else FIRST
    weights = weights_of(setting.model)
    device = resolve_device(setting.device)
    kept.refuse_mixing(folders["results"], experiment.name, label, weights, "" if setting.gather else device.type)
    started, status, kept_records, recorded = time.time(), 0, {}, {}
    runs = kept.load(folders["results"])
    specs = experiment.sweeps_for(ctx, label, runs)   # a follow-up's own in their place
    outs = {spec.label: Path(folders["out"]) / experiment.name / label / spec.label for spec in specs}
    for spec in specs:
        settings = protocol(spec, ctx.scale, follow)
        out = outs[spec.label]
        arguments = as_arguments(spec.mode, settings)
        print("reproduce: ablate.py " + " ".join(["--mode", spec.mode, *arguments, "--out", str(out)]), flush=True)
        config = sweep_config(spec.mode, settings, setting, seeds, out)
        if setting.gather:
            code, records = sweep.collect_finished(config)
        else:
            found = runs.kept(label, experiment.name)
            if setting.shard is None:
                resume_from_kept(out, found.sweeps.get(spec.label, []) if found else [])
            code, records = sweep.run_and_collect(config, trained_in(found, outs.values()))
        status |= code
        kept_records[spec.label] = records
        recorded[spec.label] = arguments + (["--max-steps", str(setting.max_steps)] if setting.max_steps else [])
        copy_figures(experiment, spec.label, label, out, Path(folders["report"]))
    model = identify(setting.model, weights, ctx.heads)    # named by what it is, not by where it lies
    run = kept.KeptRun(experiment.name, label, follow.protocol if follow else 1, ctx.scale.name, model.name,
                       ctx.tasks, seeds, ctx.n, recorded, weights=weights, recipe=model.recipe,
                       masked_accuracy=model.masked_accuracy, heads=model.heads)
    seconds, commit = time.time() - started, source_commit(root)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type   # as the report names it
    kept.store(folders["results"], run, kept_records, kept.Sitting(
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        commit.get("minbert_commit", "?")[:12] + ("+changes" if commit.get("minbert_dirty") else ""),
        cpu_model() + (f" with {gpu}" if gpu != "cpu" else ""), round(seconds, 1), 0))
    print(f"reproduce: {experiment.name} ({label}) done in {seconds / 60:.1f} min; kept in {folders['results']}",
          flush=True)
    return status


def trained_in(found: Optional[kept.Kept], outs) -> frozenset:
    """The precisions an experiment's trials trained in so far: its kept run's (`found`) and those finished
    in its sweeps' folders (`outs`), so a sweep begun on a machine whose fast precision is another keeps
    theirs."""
    lines = [r for records in (found.sweeps.values() if found else ()) for r in records]
    lines += [r for out in outs for r in merged_results(out) if r.ok]
    return frozenset(r.precision for r in lines) - {""}


def resume_from_kept(out: Path, kept_lines: list) -> int:
    """Write into the sweep's folder the trials its run kept that the folder lacks (another machine, a fresh
    checkout), so they are not trained again; how many."""
    have = {r.key for r in merged_results(out)}
    missing = [r for r in kept_lines if r.key not in have]
    for r in missing:       # as the sweep appends its own trials: a torn last line is repaired first
        append_jsonl(out / RESULTS, r.to_json())
    if missing:
        print(f"reproduce: {len(missing)} trials kept before and missing from {out}: written there, not "
              f"trained again", flush=True)
    return len(missing)


def weights_of(model: str) -> str:
    """The sha256 prefix of the model's weights file: a run records the weights its trials started from."""
    from minbert.loading import resolve, sha256_of, weights_file
    try:
        path = weights_file(resolve(model)[0])
    except Exception:   # a model that cannot be found: loading it reports that, in one line
        return ""
    return sha256_of(path)[:12] if path else ""


def copy_figures(experiment, sweep_label: str, label: str, out: Path, report_dir: Path) -> None:
    """The sweep's plots the experiment shows, beside the report as figures/EXPERIMENT-RUN-PLOT.png."""
    for plot_sweep, plot in experiment.figures:
        png, target = out / "plots" / f"{plot}.png", figure_path(report_dir, experiment.name, label, plot)
        if plot_sweep == sweep_label and png.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, target)

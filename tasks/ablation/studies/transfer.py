"""transfer: fine-tune on an intermediate task, then on the final one.

Sequential (intermediate-task) transfer, as in "BERT Goes to College". Protocol: for
the tasks of --task/--tasks (at least two), direct fine-tuning on each, and every
ordered (intermediate, final) pair: the pretrained model fine-tuned on the
intermediate task (its TensorBoard run: transfer-intermediate=TASK-...; its model
folder: intermediate/FINGERPRINT/transfer-intermediate=TASK-.../), then on
the final task alone, both at the trial's seed and data fraction. The matrix
plot shows each pair's final-task metric and its change from direct fine-tuning.

Control (unless --no-equal-steps): a pair trains two stages, each up to the step cap, so it may
train twice the direct arm's steps; `via=none,final=B,steps=x2` fine-tunes on B directly with
twice the cap (with --trial-steps 0, twice --epochs), under the same stopping rule, so a pair's
gain can be told from more training. Each pair's results line records the steps of both of its
stages (info.total_steps), the intermediate stage's budget (info.intermediate_budget).
"""
import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np

import minbert
from minbert import UserError

from ...fileio import atomic_write_json, safe_join
from ...saved.model_folder import TASKS_JSON
from ..drawing import diverging, fractions_of, new_figure
from ..line import Budget
from ..study import Shape, Study, Trial, grid, planned

STAGE_BUDGET = "budget.json"  # in an intermediate model's folder: what its stage spent (steps, plateau, curves)


def trials(config, shape: Shape) -> list:
    """Direct fine-tuning on each task, then every ordered (intermediate, final) pair.

    Trials that start from the same intermediate model share its shard, which
    trains that model once and alone writes its folder.
    """
    tasks = config.training.task_list
    if len(tasks) < 2:
        raise UserError("--mode transfer needs at least two tasks (--task all, or --tasks sst,sts)")
    configs = [(f"via=none,final={b}", {"via": None, "final": b}) for b in tasks]
    if not config.options.no_equal_steps:
        configs += [(f"via=none,final={b},steps=x2", {"via": None, "final": b, "steps": 2}) for b in tasks]
    configs += [(f"via={a},final={b}", {"via": a, "final": b}) for a in tasks for b in tasks if a != b]
    trials = grid("transfer", configs, config.seeds, config.fractions)
    for trial in trials:
        if trial.params["via"]:
            trial.shard_unit = intermediate_stage(trial, trial.params["via"]).name
    return trials


def intermediate_stage(trial: Trial, task: str) -> Trial:
    """The intermediate fine-tuning on `task` a transfer trial starts from; its name is its TensorBoard run."""
    return dataclasses.replace(trial, label=f"intermediate={task}", params={"via": task}, group="", shard_unit="")


def add_arguments(group):
    group.add_argument("--no-equal-steps", action="store_true",
                       help="leave out the control arms via=none,final=B,steps=x2 (direct fine-tuning with twice "
                            "the step cap: as many steps as a pair's two stages may train) (default: run them)")


@dataclass(frozen=True)
class Options:
    no_equal_steps: bool = planned(False)       # leave out the steps=x2 control arms


def run(sweep, trial) -> dict:
    via, final = trial.params["via"], trial.params["final"]
    if via is None:
        times = trial.params.get("steps", 1)
        if times == 1:
            return sweep.fit(trial, sweep.inputs.encoder, tasks=(final,))
        if sweep.config.trial_steps:
            return sweep.fit(trial, sweep.inputs.encoder, tasks=(final,), steps=times * sweep.config.trial_steps)
        return sweep.fit(trial, sweep.inputs.encoder, tasks=(final,), epochs=times * sweep.training.epochs)
    encoder, intermediate_dev, stage_budget = intermediate(sweep, via, trial)
    result = sweep.fit(trial, encoder, tasks=(final,))
    result["info"] = {"intermediate_dev": intermediate_dev,
                      "intermediate_budget": stage_budget.to_json() if stage_budget else None,
                      "total_steps": stage_budget.trained_steps + result["steps"] if stage_budget else None}
    return result


def intermediate(sweep, task: str, trial: Trial):
    """The encoder fine-tuned on `task` (trial's seed and fraction), its dev metrics and its budget (None if the
    file recording it is missing: a sweep killed between the model's export and that file).

    The intermediate model is exported as a finished run's model folder and the final stage
    starts from it through `minbert.from_pretrained`, as `train_multitask.py --model RUN_DIR/model`
    does. The folder is named by the sweep's fingerprint, so the trials sharing the stage, and a
    resumed sweep, train it once; one without tasks.json (written last) is incomplete and retrained.
    """
    stage = intermediate_stage(trial, task)
    folder = safe_join(sweep.out, "intermediate", sweep.fingerprint, stage.name)
    if not (folder / TASKS_JSON).exists():
        result = sweep.fit(stage, sweep.inputs.encoder, name=stage.name, tasks=(task,), export_to=folder)
        atomic_write_json(folder / STAGE_BUDGET, result["budget"].to_json())
    dev = json.loads((folder / TASKS_JSON).read_text(encoding="utf-8"))["dev"]
    budget_file = folder / STAGE_BUDGET
    spent = Budget.from_json(json.loads(budget_file.read_text(encoding="utf-8"))) if budget_file.exists() else None
    return minbert.from_pretrained(str(folder), implementation=sweep.inputs.encoder.config.implementation), dev, spent


def transfer_matrix(rows, tasks):
    """Final-task metric after an intermediate task (rows) vs direct fine-tuning (top row)."""
    rows = [r for r in rows if "final" in r["params"] and r["metric"] == f"dev/{r['params']['final']}"
            and not r["params"].get("steps")]  # the equal-steps control arms are not cells of the matrix
    if not rows:
        return None
    fractions = fractions_of(rows)
    vias = [None] + list(tasks)
    fig = new_figure(figsize=(1.6 * len(tasks) + 2.8, 1.0 * len(vias) + 1.8))
    axes = fig.subplots(len(fractions), 1, squeeze=False)[:, 0]
    for ax, fraction in zip(axes, fractions):
        mine = {(r["params"]["via"], r["params"]["final"]): r for r in rows if r["data_fraction"] == fraction}
        delta = np.full((len(vias), len(tasks)), np.nan)
        for (i, via), (j, final) in ((a, b) for a in enumerate(vias) for b in enumerate(tasks)):
            cell, direct = mine.get((via, final)), mine.get((None, final))
            if cell is None:
                continue
            change = cell["mean"] - direct["mean"] if direct else math.nan
            delta[i, j] = change
            text = f"{cell['mean']:.3f}" + (f"\n({change:+.3f})" if via is not None and direct else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
        diverging(ax, delta, "change from direct fine-tuning")
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels(tasks)
        ax.set_yticks(range(len(vias)))
        ax.set_yticklabels(["direct"] + [f"after {t}" for t in tasks])
        ax.set_xlabel("final task (its dev metric)")
        ax.set_ylabel("intermediate task")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
    fig.suptitle("Intermediate-task transfer (BERT Goes to College, Exp. 1)", fontsize=10)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    return {"transfer": transfer_matrix(rows, sweep.inputs.tasks)}


STUDY = Study(name="transfer", Options=Options,
              summary="intermediate-task fine-tuning", title="transfer", add_arguments=add_arguments, trials=trials,
              run=run, figures=figures)

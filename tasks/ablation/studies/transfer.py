"""transfer: fine-tune on an intermediate task, then on the final one.

Sequential (intermediate-task) transfer, as in "BERT Goes to College". Protocol: for
the tasks of --task/--tasks (at least two), direct fine-tuning on each, and every
ordered (intermediate, final) pair: the pretrained model fine-tuned on the
intermediate task (its TensorBoard run: transfer-intermediate=TASK-...; its model
folder: intermediate/FINGERPRINT/transfer-intermediate=TASK-.../), then on
the final task alone, both at the trial's seed and data fraction. The matrix
plot shows each pair's final-task metric and its change from direct fine-tuning.
"""
import dataclasses
import json

import minbert
from minbert import UserError

from ...fileio import safe_join
from ...trained.model_folder import TASKS_JSON
from ..sweep import Shape, Study, Trial, grid


def plan(args, shape: Shape) -> list:
    """Direct fine-tuning on each task, then every ordered (intermediate, final) pair.

    Trials that start from the same intermediate model share its shard, which
    trains that model once and alone writes its folder.
    """
    tasks = args.config.task_list
    if len(tasks) < 2:
        raise UserError("--mode transfer needs at least two tasks (--task all, or --tasks sst,sts)")
    configs = [(f"via=none,final={b}", {"via": None, "final": b}) for b in tasks]
    configs += [(f"via={a},final={b}", {"via": a, "final": b}) for a in tasks for b in tasks if a != b]
    trials = grid("transfer", configs, args.seed_list, args.fraction_list)
    for trial in trials:
        if trial.params["via"]:
            trial.shard_unit = intermediate_stage(trial, trial.params["via"]).name
    return trials


def intermediate_stage(trial: Trial, task: str) -> Trial:
    """The intermediate fine-tuning on `task` a transfer trial starts from; its name is its TensorBoard run."""
    return dataclasses.replace(trial, config=f"intermediate={task}", params={"via": task}, group="", shard_unit="")


def run(sweep, trial) -> dict:
    via, final = trial.params["via"], trial.params["final"]
    if via is None:
        return sweep.fit(trial, sweep.inputs.encoder, tasks=(final,))
    encoder, intermediate_dev = intermediate(sweep, via, trial)
    result = sweep.fit(trial, encoder, tasks=(final,))
    result["info"] = {"intermediate_dev": intermediate_dev}
    return result


def intermediate(sweep, task: str, trial: Trial):
    """The encoder fine-tuned on `task` (trial's seed and fraction) and its dev metrics.

    The intermediate model is exported as a finished run's model folder and the final stage
    starts from it through `minbert.from_pretrained`, as `train_multitask.py --model RUN_DIR/model`
    does. The folder is named by the sweep's fingerprint, so the trials sharing the stage, and a
    resumed sweep, train it once; one without tasks.json (written last) is incomplete and retrained.
    """
    stage = intermediate_stage(trial, task)
    folder = safe_join(sweep.out, "intermediate", sweep.fingerprint, stage.name)
    if not (folder / TASKS_JSON).exists():
        sweep.fit(stage, sweep.inputs.encoder, name=stage.name, tasks=(task,), export_to=folder)
    dev = json.loads((folder / TASKS_JSON).read_text(encoding="utf-8"))["dev"]
    return minbert.from_pretrained(str(folder), implementation=sweep.inputs.encoder.config.implementation), dev


def figures(sweep, records, rows, metric) -> dict:
    from .. import plots  # matplotlib loads only when a summary is drawn
    return {"transfer": plots.transfer_matrix(rows, sweep.inputs.tasks)}


STUDY = Study(summary="intermediate-task fine-tuning", title="transfer", plan=plan, run=run, figures=figures)

"""--per-task-best: the evaluation at which each task's dev metric was best, chosen as the run goes.

A task's best is the first evaluation with its highest dev metric (the overall best's rule, per task); the
callbacks keep the weights of each (outputs.py's RunFolder: best-TASK.pt), and the finished run writes each
task's predictions from them. Chosen on dev, each figure is a maximum over the evaluations: it flatters the
run, and the test score of the same files will be lower on average (docs/training.md).
"""
import math
import sys

from ..metrics import overall_score
from .state import Run


def note_single_evaluation(run: Run) -> None:
    """A run planned to evaluate once has nothing to choose among: said, not refused (a longer run may follow)."""
    every, total = run.config.eval_every, run.total_steps
    evaluations = math.ceil(total / every) if every else math.ceil(total / run.steps_per_epoch)
    if evaluations < 2 and run.inputs.world.main:
        print(f"note: --per-task-best: this run evaluates once ({total} steps), so each task's best is the run's "
              f"best; --eval-every N evaluates every N steps", file=sys.stderr)


def keep_task_bests(run: Run, entry: dict, predictions: dict) -> None:
    """The tasks whose dev metric in `entry` (the evaluation just made) is their best yet: recorded in the state,
    their dev `predictions` kept, and the callbacks told (`on_task_best`) while the model holds these weights."""
    state, better = run.state, []
    for task in run.inputs.tasks:
        value = entry["dev"][task]
        if value is not None and (task not in state.task_best or value > state.task_best[task]["dev"]):
            state.task_best[task] = {"epoch": entry["epoch"], "step": entry["step"], "dev": value}
            run.task_best_predictions[task] = {(task, "dev"): predictions[task, "dev"]}
            better.append(task)
    if better:
        run.notify("on_task_best", better)


def task_best_summary(run: Run) -> dict:
    """metrics.json's "per_task_best": each task's chosen evaluation and the overall score of those figures,
    the dev figure of the predictions the run writes."""
    chosen = run.state.task_best
    return {"tasks": {task: dict(chosen[task]) for task in run.inputs.tasks if task in chosen},
            "overall": overall_score({task: chosen[task]["dev"] for task in chosen})}


def tasks_from_other_weights(run: Run) -> list:
    """The tasks whose best evaluation is not the run's best, in the run's order: their predictions need their
    own weights (a task with no finite metric at any evaluation keeps the overall best's)."""
    chosen, best_step = run.state.task_best, run.state.best["step"]
    return [task for task in run.inputs.tasks if task in chosen and chosen[task]["step"] != best_step]

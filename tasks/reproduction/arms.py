"""Measures that compare two training arms per task (freezing, pair encodings, the multitask methods, transfer),
the steps each arm actually trained, and a part of a quote not measured yet.

A label says what was done: where the arms may have trained different steps (a plateau stops each trial on its
own), the row's label gives each arm's steps, mean and range, from the kept trials.
"""
import numpy as np

from ..ablation.statistics import paired_interval
from ..ablation.summary import Trial
from .verdicts import Row


def trained(records: list) -> str:
    """'280 (200-360) steps' (mean and range) of the records' trials, both stages of a transfer trial counted;
    '' without steps."""
    steps = [Trial.of(r).total_steps for r in records if r.get("steps")]
    if not steps:
        return ""
    return f"{np.mean(steps):.0f} ({min(steps)}-{max(steps)}) steps"


def _both(a: str, a_steps: str, b: str, b_steps: str) -> str:
    """' (a 280 (200-360) steps, b ...)' when the trials kept their steps, else ''."""
    return f" ({a} {a_steps}, {b} {b_steps})" if a_steps and b_steps else ""


def arms(results, ctx, experiment: str, a: str, b: str, roles: tuple, what: str) -> list:
    """Per task of `roles`: its sweep TASK-a minus its sweep TASK-b on the task's dev metric, paired by seed (a row
    "TASK: what" each, with each arm's steps)."""
    rows = []
    for task in (ctx.tasks[role] for role in roles):
        metric = f"dev/{task}"
        steps = _both(a, trained(results.select(experiment, f"{task}-{a}")),
                      b, trained(results.select(experiment, f"{task}-{b}")))
        rows.append(Row(f"{task}: {what}{steps}", paired_interval(results.values(experiment, f"{task}-{a}", metric),
                                                                    results.values(experiment, f"{task}-{b}", metric))))
    return rows


def method_change(results, ctx, sweep: str, method: str, label: str, role=None) -> list:
    """ablate.py --mode methods: method=NAME minus method=baseline, paired by seed, on the overall score (or the
    dev metric of the task of `role`), with each arm's steps."""
    metric = f"dev/{ctx.tasks[role]}" if role else "dev/overall"
    steps = _both(method, trained(results.select("methods", sweep, f"method={method}")),
                  "baseline", trained(results.select("methods", sweep, "method=baseline")))
    return [Row(f"{label}{steps}", paired_interval(results.values("methods", sweep, metric, f"method={method}"),
                                                      results.values("methods", sweep, metric, "method=baseline")))]


def college_transfer(results, ctx):
    """Each ordered pair against direct fine-tuning with twice the step cap (the x2 arm: the transfer arm's cap,
    when the results have it); each arm's steps as trained (a plateau may stop either arm early, so the caps'
    equality is not the steps')."""
    tasks = (ctx.tasks["pair"], ctx.tasks["final"])
    rows = []
    for via in tasks:
        for final in tasks:
            if via == final:
                continue
            direct_config = f"via=none,final={final},steps=x2"
            if not results.values("transfer", "transfer", f"dev/{final}", direct_config):
                direct_config = f"via=none,final={final}"
            arm = f"via={via},final={final}"
            both = trained(results.select("transfer", "transfer", arm))
            steps = _both("transfer arm", both and both + " in all", f"direct arm ({direct_config.split(',')[-1]})",
                          trained(results.select("transfer", "transfer", direct_config)))
            cap = "twice the cap" if direct_config.endswith("x2") else "its own cap (no x2 arm in these results)"
            rows.append(Row(f"{via} then {final} minus {final} directly at {cap}{steps}", paired_interval(
                results.values("transfer", "transfer", f"dev/{final}", arm),
                results.values("transfer", "transfer", f"dev/{final}", direct_config))))
    return rows


def pending(results, ctx, what: str, follow_up: str) -> list:
    """A part of a quote no kept run measures: one pending row naming the follow-up that would."""
    return [Row(what, None, pending=follow_up)]


def alone_sweep(task: str) -> str:
    """The label of the methods sweep of `task` trained alone (follow-up smart-alone's)."""
    return f"{task}-alone"


def methods_alone(results, ctx, method: str, roles: tuple, label: str) -> list:
    """Per task of `roles`, its own methods sweep (the task trained alone): `method` minus the baseline on the
    task's dev metric, paired by seed, with each arm's steps (a row each)."""
    return [row for task, role in ((ctx.tasks[role], role) for role in roles)
            for row in method_change(results, ctx, alone_sweep(task), method, f"{task} alone: {label}", role)]

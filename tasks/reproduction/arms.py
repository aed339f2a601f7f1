"""Measures that compare two training arms per task (freezing, pair encodings, the multitask methods, transfer),
the steps each arm actually trained, and a part of a quote not measured yet.

A label says what was done: where the arms may have trained different steps (a plateau stops each trial on its
own), the row's label gives each arm's steps, mean and range, from the kept trials.
"""
import numpy as np

from ..ablation.statistics import paired_interval
from .verdicts import Row


def trained(records: list) -> str:
    """'280 (200-360) steps' (mean and range) of the records' trials, both stages of a transfer trial counted;
    '' without steps."""
    steps = [r.total_steps for r in records if r.steps]
    if not steps:
        return ""
    return f"{np.mean(steps):.0f} ({min(steps)}-{max(steps)}) steps"


def _versus(results, experiment: str, metric: str, label: str, a: tuple, b: tuple) -> Row:
    """Arm a minus arm b on `metric`, paired by seed, labelled with each arm's steps where its trials kept them. An
    arm: (sweep, configuration or None, how its steps read: a format with {} for them)."""
    steps = [trained(results.select(experiment, sweep, config)) for sweep, config, _ in (a, b)]
    told = f" ({a[2].format(steps[0])}, {b[2].format(steps[1])})" if all(steps) else ""
    return Row(label + told, paired_interval(*(results.values(experiment, sweep, metric, config)
                                               for sweep, config, _ in (a, b))))


def arms(results, ctx, experiment: str, a: str, b: str, roles: tuple, what: str) -> list:
    """Per task of `roles`: its sweep TASK-a minus its sweep TASK-b on the task's dev metric, paired by seed (a row
    "TASK: what" each, with each arm's steps)."""
    return [_versus(results, experiment, f"dev/{task}", f"{task}: {what}", (f"{task}-{a}", None, a + " {}"),
                    (f"{task}-{b}", None, b + " {}")) for task in (ctx.tasks[role] for role in roles)]


def method_change(results, ctx, sweep: str, method: str, label: str, role=None) -> list:
    """ablate.py --mode methods: method=NAME minus method=baseline, paired by seed, on the overall score (or the
    dev metric of the task of `role`), with each arm's steps."""
    metric = f"dev/{ctx.tasks[role]}" if role else "dev/overall"
    return [_versus(results, "methods", metric, label, (sweep, f"method={method}", method + " {}"),
                    (sweep, "method=baseline", "baseline {}"))]


def college_transfer(results, ctx):
    """Each ordered pair against direct fine-tuning with twice the step cap (the x2 arm: the transfer arm's cap,
    when the results have it); each arm's steps as trained (a plateau may stop either arm early, so the caps'
    equality is not the steps')."""
    tasks = (ctx.tasks["pair"], ctx.tasks["final"])
    rows = []
    for via, final in ((via, final) for via in tasks for final in tasks if via != final):
        direct = f"via=none,final={final},steps=x2"
        if not results.values("transfer", "transfer", f"dev/{final}", direct):
            direct = f"via=none,final={final}"
        cap = "twice the cap" if direct.endswith("x2") else "its own cap (no x2 arm in these results)"
        rows.append(_versus(results, "transfer", f"dev/{final}", f"{via} then {final} minus {final} directly at {cap}",
                            ("transfer", f"via={via},final={final}", "transfer arm {} in all"),
                            ("transfer", direct, f"direct arm ({direct.split(',')[-1]}) {{}}")))
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

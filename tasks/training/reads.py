"""The step's values, read to the host together: each step leaves its logged values on the device, and the
loop reads every pending step's at once (one host read) every --log-every steps and before a checkpoint, an
evaluation, a stop or the end.

A step the host must decide on at once reads its values before the optimizer update instead (`decides_now`):
under fp16, whether the gradient scaler skips the step (a skipped step advances neither the learning-rate
schedule nor SMART's moving average); with --skip-nonfinite, whether the step is dropped; with an optimizer
that cannot skip an update on the device (--optimizer minbert). Elsewhere a non-finite loss or gradient
norm is found at the next read: the optimizer skipped that update on the device (fused AdamW's `found_inf`),
and the run stops there, naming the step, before any checkpoint could store the damage.
"""
from typing import Optional

import torch

from minbert import RunFailure

NONFINITE_HINT = "the last good checkpoint is kept (use --skip-nonfinite to skip such batches)"


def decides_now(run) -> bool:
    """Whether each step reads its values before its update (see the module's docstring)."""
    return (run.config.skip_nonfinite or run.scaler.is_enabled()
            or not getattr(run.optimizer, "_step_supports_amp_scaling", False))


def read_values(values: list) -> list:
    """Python numbers of device scalars and numbers, with one host read for all the tensors."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if not tensors:
        return list(values)
    read = iter(torch.stack([t.detach().reshape(()).double() for t in tensors]).tolist())
    return [next(read) if isinstance(v, torch.Tensor) else v for v in values]


def nonfinite_problem(logs: dict, tasks) -> Optional[tuple]:
    """(what, task) of a step's first non-finite loss, else of a non-finite gradient norm; None if all are finite."""
    for name, value in logs.items():
        if (name.startswith("train/loss/") or name.startswith("smart/")) and not _finite(value):
            return f"loss ({value})", name.rsplit("/", 1)[-1]
    norm = logs.get("train/grad_norm")
    if norm is not None and not _finite(norm):
        return f"gradient norm ({norm})", ",".join(tasks)
    return None


def nonfinite_failure(step: int, problem: tuple) -> RunFailure:
    what, task = problem
    return RunFailure(f"non-finite {what} at step {step} on task {task}; {NONFINITE_HINT}")


def _finite(value: float) -> bool:
    return value - value == 0  # False for nan and inf


class PendingLogs:
    """Steps whose logged values are still on the device: (global step, the step's tasks, values)."""

    def __init__(self):
        self.steps = []

    def add(self, step: int, tasks, logs: dict) -> None:
        self.steps.append((step, list(tasks), logs))

    def read(self) -> list:
        """[(step, values as numbers)], oldest first, with one host read; raises RunFailure at the first step
        with a non-finite loss or gradient norm."""
        steps, self.steps = self.steps, []
        flat = read_values([v for _, _, logs in steps for v in logs.values()])
        out, offset = [], 0
        for step, tasks, logs in steps:
            values = dict(zip(logs, flat[offset:offset + len(logs)]))
            offset += len(logs)
            problem = nonfinite_problem(values, tasks)
            if problem is not None:
                raise nonfinite_failure(step, problem)
            out.append((step, values))
        return out

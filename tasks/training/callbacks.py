"""The one protocol of what takes part in a run, and the curves and the console that use it.

Every part is a `Callback` on the run's one list, in this order: where the results go (a run folder's
`TensorBoard` and `RunFolder`, or an ablation trial's `TensorBoard` and `InMemory`: outputs.py), the
console, then the caller's own (a benchmark's timers, a test's probe, the sweep's plateau stop). The
loop calls each hook on each, in order:

    on_begin(run, resumed)           built (and restored from a checkpoint when resumed): open what is needed
    on_plan(run, plan)               an epoch's plan (one {task: indices} per step) is made, before its first step
    on_step(run, info)               an optimizer step is done or skipped; run.state counts it already
    on_losses(run, step, values)     a step's logged values, read from the device (every --log-every steps)
    on_epoch_end(run)                training returns to the loop: the epoch's or the run's last step, or an evaluation
    on_evaluate(run, metrics, s)     dev metrics, already in run.state.history; `s`: the evaluation's seconds
    on_best(run)                     the current weights have the best dev score so far
    on_task_best(run, tasks)         --per-task-best: the current weights have these tasks' best dev metrics so far
    on_checkpoint(run)               the run's position is to be saved (every rank takes part)
    on_finish(run, result)           the run is done; whatever kept the best weights puts them back first
    on_close(run)                    the run ends, finished or not: close what on_begin opened
    on_log(run, name, value)         a callback's value at the current step (`run.log`), for the curves

A callback changes nothing of the run but through the run: `run.request_stop(reason)` ends it at the
current step (the reason in its metrics), `run.log(name, value)` puts a value beside its curves. No callback
reaches into another.
"""
import sys
import time
from typing import Callable, Optional

import torch

from ..evaluation import progress_bar
from .record import hparams
from .state import Run, StepInfo


class Callback:
    """Takes part in a run (`fit(..., callbacks=[...])`): override the hooks needed (see the module's table)."""

    def on_begin(self, run: Run, resumed: bool) -> None:
        """Built (and restored when `resumed`): open what the callback needs."""

    def on_plan(self, run: Run, plan: list) -> None:
        """An epoch's plan (one {task: indices} per step) is made, before its first step."""

    def on_step(self, run: Run, info: StepInfo) -> None:
        """An optimizer step is done or skipped; run.state counts it already."""

    def on_losses(self, run: Run, step: int, values: dict) -> None:
        """Step `step`'s logged values (losses, gradient norm...) as numbers. The step leaves them on the device;
        the loop reads all pending steps' at once every --log-every steps and before a checkpoint, an
        evaluation or the end, and calls this for each, oldest first."""

    def on_epoch_end(self, run: Run) -> None:
        """The last step of the epoch, of the run, or before an --eval-every evaluation is done; the evaluation
        (when due) follows."""

    def on_evaluate(self, run: Run, metrics: dict, seconds: float) -> None:
        """Dev metrics, already in run.state.history; `seconds` is what the evaluation took."""

    def on_best(self, run: Run) -> None:
        """The current weights have the best dev score so far."""

    def on_task_best(self, run: Run, tasks: list) -> None:
        """--per-task-best: the current weights have the best dev metric so far of each of `tasks`."""

    def on_checkpoint(self, run: Run) -> None:
        """The run's position is to be saved: under torchrun every rank calls it."""

    def on_finish(self, run: Run, result: dict) -> None:
        """The run is done; `result` is what `fit` returns (metrics.json's). A callback that kept the best
        weights puts them back into run.model before anything else reads it."""

    def on_close(self, run: Run) -> None:
        """The run ends, finished, stopped or failed: close what `on_begin` opened."""

    def on_log(self, run: Run, name: str, value: float) -> None:
        """`run.log(name, value)`: a callback's value at the current step, for the run's curves."""


class TensorBoard(Callback):
    """The run's curves in `folder`: every step's logged values and learning rate, every evaluation's dev
    metrics, the callbacks' `run.log` values, and the hparams table at the end (`hparams`, by default the
    run's options: record.py). Only the main process writes. A resumed run's events after its checkpoint's
    step were logged by the killed process: TensorBoard drops them."""

    def __init__(self, folder, hparams: Optional[dict] = None):
        self.folder, self.hparams = folder, hparams
        self.writer = None

    def __repr__(self) -> str:
        return f"TensorBoard({str(self.folder)!r})"

    def on_begin(self, run, resumed):
        if run.inputs.world.main:
            from torch.utils.tensorboard import SummaryWriter  # loads only for a run that logs
            purge = run.state.global_step + 1 if resumed else None
            self.writer = SummaryWriter(str(self.folder), purge_step=purge)

    def on_step(self, run, info):
        if self.writer is not None and info.losses is not None:
            lr = run.scheduler.get_last_lr()[0]
            if isinstance(lr, torch.Tensor):  # a graphed step's device lr: the same value from the host, no read
                lr = run.config.lr * run.scheduler.lr_lambdas[0](run.scheduler.last_epoch)
            self.writer.add_scalar("train/lr", lr, run.state.global_step)

    def on_losses(self, run, step, values):
        if self.writer is not None:
            for name, value in values.items():
                self.writer.add_scalar(name, value, step)

    def on_evaluate(self, run, metrics, seconds):
        if self.writer is not None:
            for name, value in metrics.items():
                if value is not None:
                    self.writer.add_scalar(f"dev/{name}", value, run.state.global_step)
            entry = run.state.history[-1]
            for kind, record in entry["copies"].items() if "copies" in entry else ():  # --average's copies
                for name, value in record["dev"].items():
                    if value is not None:
                        self.writer.add_scalar(f"dev-{kind}/{name}", value, run.state.global_step)

    def on_log(self, run, name, value):
        if self.writer is not None:
            self.writer.add_scalar(name, value, run.state.global_step)

    def on_checkpoint(self, run):
        if self.writer is not None:
            self.writer.flush()  # every event up to this step is on disk before the step is

    def on_finish(self, run, result):
        if self.writer is not None:
            shown = hparams(run) if self.hparams is None else self.hparams
            self.writer.add_hparams(shown, {f"hparam/{k}": v for k, v in result["best"].items() if v is not None},
                                    run_name="hparams")

    def on_close(self, run):
        if self.writer is not None:
            self.writer.close()


class Console(Callback):
    """A command's progress on stdout, from the main process: a bar per epoch on a terminal (else a
    `ProgressLines` line every 30 s), the dev scores."""

    def __init__(self):
        self.bar = self.lines = None
        self.prints = False

    def on_begin(self, run, resumed):
        self.prints = run.inputs.world.main

    def on_plan(self, run, plan):
        if not self.prints:
            return
        state, terminal = run.state, sys.stdout.isatty()
        if self.lines is None and not terminal:
            self.lines = ProgressLines()
        if self.lines is not None:
            self.lines.on_plan(run, plan)
        self.bar = progress_bar(terminal, run.steps_per_epoch, state.step_in_epoch,
                                f"epoch {state.epoch + 1}/{run.config.epochs}")

    def on_step(self, run, info):
        if self.bar is not None:
            self.bar.update(1)
        if self.lines is not None:
            self.lines.on_step(run, info)

    def on_losses(self, run, step, values):
        if self.lines is not None:
            self.lines.on_losses(run, step, values)

    def on_epoch_end(self, run):
        if self.bar is not None:
            self.bar.close()

    def on_evaluate(self, run, metrics, seconds):
        if not self.prints:
            return
        entry = run.state.history[-1]
        print(f"epoch {entry['epoch']} step {entry['step']}: " + _scores(metrics) + f" ({entry['elapsed_s']:.0f}s)",
              flush=True)
        for kind, record in entry["copies"].items() if "copies" in entry else ():  # --average's copies
            print(f"  weights {kind}: {_scores(record['dev'])}", flush=True)


def _scores(metrics: dict) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if v is not None)


def _print(text: str) -> None:
    print(text, flush=True)


class ProgressLines(Callback):
    """Progress without a terminal (`nohup ... > log`, a sweep's trial): a line about every `every` seconds,
    the first within `every` of the start, said by `say`: the step, the losses, examples/s and the time left.
    `line` writes it (the console's; a sweep's trial has its own)."""

    def __init__(self, say: Callable[[str], None] = _print, every: float = 30.0):
        self.say, self.every = say, every
        self.started = None
        self.losses = {}  # the latest values read (on_losses)

    def on_plan(self, run, plan):
        if self.started is None:  # the first epoch's plan: a run of several epochs gets one per epoch
            self.started = self.last = time.time()
            self.first_step, self.examples = run.state.global_step, 0

    def on_losses(self, run, step, values):
        self.losses = values  # the latest read: at most --log-every steps old

    def on_step(self, run, info):
        self.examples += info.examples
        now = time.time()
        if now - self.last < self.every:
            return
        self.last = now
        step, total = run.state.global_step, run.total_steps
        rate = (step - self.first_step) / (now - self.started)
        left = (total - step) / rate if rate > 0 else float("inf")
        losses = " ".join(f"{k.rsplit('/', 1)[-1]}={v:.4f}" for k, v in self.losses.items()
                          if k.startswith("train/loss/"))
        self.say(self.line(step, total, losses, self.examples / (now - self.started), left))

    def line(self, step: int, total: int, losses: str, per_second: float, left: float) -> str:
        return f"step {step}/{total} {losses} {per_second:.1f} ex/s, {left / 60:.1f} min left in training"

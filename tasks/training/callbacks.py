"""What watches a run without changing it: the console's progress and the TensorBoard curves.

A `Callback` gets the `Run` at each hook; `fit(..., callbacks=[...])` adds the caller's own (a
benchmark's timers, a test's probe).
"""
import sys
import time
from typing import Optional

from ..evaluation import progress_bar
from .state import Run, StepInfo


class Callback:
    """Watches a run (`fit(..., callbacks=[...])`): each hook gets the `Run`; override those needed."""

    def on_plan(self, run: Run, plan: list) -> None:
        """An epoch's plan (one {task: indices} per step) is made, before its first step."""

    def on_step(self, run: Run, info: StepInfo) -> None:
        """An optimizer step is done or skipped; run.state counts it already."""

    def on_epoch_end(self, run: Run) -> None:
        """The last step of the epoch, of the run, or before an --eval-every evaluation is done; the evaluation
        (when due) follows."""

    def on_evaluate(self, run: Run, metrics: dict, seconds: float) -> None:
        """Dev metrics, already in run.state.history; `seconds` is what the evaluation took."""


class TensorBoard(Callback):
    """The run's curves: every step's logged values and learning rate, every evaluation's dev metrics, and
    the hparams table at the end. Logs nothing until `open` names its folder (a trial without one)."""

    def __init__(self):
        self.writer = None

    def open(self, folder, purge_step: Optional[int] = None) -> None:
        from torch.utils.tensorboard import SummaryWriter  # loads only for a run that logs
        self.writer = SummaryWriter(str(folder), purge_step=purge_step)

    def on_step(self, run, info):
        if self.writer is not None and info.losses is not None:
            for name, value in info.losses.items():
                self.writer.add_scalar(name, value, run.state.global_step)
            self.writer.add_scalar("train/lr", run.scheduler.get_last_lr()[0], run.state.global_step)

    def on_evaluate(self, run, metrics, seconds):
        if self.writer is not None:
            for name, value in metrics.items():
                if value is not None:
                    self.writer.add_scalar(f"dev/{name}", value, run.state.global_step)

    def add_hparams(self, hparams: dict, result: dict) -> None:
        if self.writer is not None:
            self.writer.add_hparams(hparams, {f"hparam/{k}": v for k, v in result["best"].items() if v is not None},
                                    run_name="hparams")

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Console(Callback):
    """A command's progress on stdout: a bar per epoch on a terminal (else a line every 30 s), the dev scores."""

    def __init__(self):
        self.bar = self.lines = None

    def on_plan(self, run, plan):
        state, terminal = run.state, sys.stdout.isatty()
        if self.lines is None and not terminal:
            self.lines = _ProgressLines(run.total_steps, state.global_step)
        self.bar = progress_bar(terminal, run.steps_per_epoch, state.step_in_epoch,
                                f"epoch {state.epoch + 1}/{run.config.epochs}")

    def on_step(self, run, info):
        if self.bar is not None:
            self.bar.update(1)
        if self.lines is not None:
            self.lines.step(run.state.global_step, info.examples, info.losses)

    def on_epoch_end(self, run):
        if self.bar is not None:
            self.bar.close()

    def on_evaluate(self, run, metrics, seconds):
        entry = run.state.history[-1]
        print(f"epoch {entry['epoch']} step {entry['step']}: " +
              " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if v is not None) +
              f" ({entry['elapsed_s']:.0f}s)", flush=True)


class _ProgressLines:
    """Without a terminal (`nohup ... > log`), one line every `every` seconds instead of a bar."""

    def __init__(self, total: int, done: int, every: float = 30.0):
        self.total, self.every = total, every
        self.start_step, self.examples = done, 0
        self.started = self.last = time.time()

    def step(self, global_step: int, examples: int, losses: Optional[dict]):
        self.examples += examples
        now = time.time()
        if now - self.last < self.every:
            return
        self.last = now
        rate = (global_step - self.start_step) / (now - self.started)
        left = (self.total - global_step) / rate if rate > 0 else float("inf")
        shown = " ".join(f"{k.rsplit('/', 1)[-1]}={v:.4f}" for k, v in (losses or {}).items()
                         if k.startswith("train/loss/"))
        print(f"step {global_step}/{self.total} {shown} {self.examples / (now - self.started):.1f} ex/s, "
              f"{left / 60:.1f} min left in training", flush=True)

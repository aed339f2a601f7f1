"""The multitask training loop, shared by `train_multitask.py`, `classifier.py` and `ablate.py`.

`fit(config, inputs, outputs)` fine-tunes a copy of the encoder with the task heads, in small named
steps over one `Run` built once, which holds all the state: `build_run`, `restore` (or `start`),
`run_epoch` (`train_step` per step), `evaluate_and_keep_best`, `finish`. Everything else takes part as
a peer on the run's one list of `Callback`s (callbacks.py): where results go (outputs.py), TensorBoard,
the console, the caller's own; a callback ends the run with `run.request_stop(reason)`. SIGINT/SIGTERM
checkpoint and leave at the next step boundary, and a killed run resumes from its last checkpoint with
the same result as an unbroken one.
"""
import signal
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import minbert
from minbert import UserError

from ..config import TrainConfig
from ..distributed import agreed_signal
from ..inputs import RunInputs
from .averaging import averages_summary, copy_record
from .build import MULTITASK, build_run, distribute, start
from .callbacks import Callback, Console
from .checkpoint import restore
from .job import Job
from .state import Run, StepInfo
from .step import prefetch, train_step
from .task_best import keep_task_bests, note_single_evaluation, task_best_summary


class _Stop:
    """SIGINT/SIGTERM ask the loop to checkpoint and leave at the next step boundary."""

    def __init__(self):
        self.signal = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def _handle(self, signum, frame):
        if self.signal is not None:  # a second signal: give up at once
            raise KeyboardInterrupt
        self.signal = signum

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


class Interrupted(Exception):
    def __init__(self, signum, message):
        super().__init__(message)
        self.exit_code = 128 + signum


def fit(config: TrainConfig, inputs: RunInputs, outputs, encoder: Optional[minbert.BertModel] = None,
        resume: bool = False, callbacks=(), command_options: Optional[dict] = None, job: Job = MULTITASK) -> dict:
    """Fine-tune and evaluate; returns the metrics (metrics.json's) and, under "model", the best evaluation's model
    (the final one for `InMemory(final_weights=True)`).

    `outputs`: where the results go, a run folder (a path: `folder_callbacks`, with `command_options` recorded
    in its config.json) or callbacks (`InMemory`, `TensorBoard`). `callbacks` take part after them (see
    Callback). `encoder` replaces the pretrained one (an ablation's modified copy). `resume` continues from the
    run folder's checkpoint. `job`: what is trained (job.py), by default the task heads on the encoder.
    """
    folder = Path(outputs) if isinstance(outputs, (str, Path)) else None
    if config.per_task_best and folder is None:
        raise UserError("--per-task-best writes each task's predictions from its own best weights: it needs a run "
                        "folder, not a run kept in memory (an ablation trial)")
    if folder is not None:
        outputs = job.folder_callbacks(folder, command_options)
    elif isinstance(outputs, Callback):
        outputs = [outputs]
    run = build_run(config, inputs, [*outputs, *callbacks], encoder, folder, job)
    if config.per_task_best:
        note_single_evaluation(run)
    if resume:
        restore(run)
    else:
        start(run)
    distribute(run)
    run.notify("on_begin", resume)
    try:
        with _Stop() as stop:
            run.started = time.time()
            while not run.ending() or not run.state.evaluated():
                run_epoch(run, stop)
                if evaluation_due(run) and not run.state.evaluated():
                    evaluate_and_keep_best(run)
                if epoch_done(run):
                    run.state.epoch += 1
                    run.state.step_in_epoch = 0
                run.notify("on_checkpoint")
                stop_if_asked(run, agreed_signal(stop.signal, inputs.world))  # a signal during the evaluation
        result = finish(run)
    finally:
        run.notify("on_close")
    result["model"] = run.model
    return result


def epoch_done(run: Run) -> bool:
    return run.state.step_in_epoch >= run.steps_per_epoch


def evaluation_due(run: Run) -> bool:
    """After the last step; then every --eval-every steps if set, else at every epoch's end."""
    state, every = run.state, run.config.eval_every
    if run.ending():
        return True
    return state.global_step % every == 0 if every else epoch_done(run)


def pause_due(run: Run) -> bool:
    """After a step: training returns to the loop in `fit` at an epoch's end and where an evaluation is due."""
    return epoch_done(run) or evaluation_due(run)


def run_epoch(run: Run, stop: "_Stop") -> None:
    """Train from the state's position to the end of its epoch, of the run, or to the next evaluation;
    checkpoint when due or stopped."""
    state, every = run.state, run.config.checkpoint_every
    plan = run.sampler.plan(state.epoch)
    run.model.train()
    if run.config.freeze_until == "all":
        # A wholly frozen encoder is a fixed feature extractor: no dropout inside it, and its
        # forward takes the faster inference path (only the heads and their dropout train).
        run.model.encoder.eval()
    run.notify("on_plan", plan)
    while not epoch_done(run) and not run.ending():
        step = plan[state.step_in_epoch]
        losses = train_step(run, step)
        following = state.step_in_epoch + 1
        prefetch(run, plan[following] if following < len(plan) else None)
        count_update(run, losses)
        state.step_in_epoch += 1
        state.global_step += 1
        if losses is not None:
            run.pending.add(state.global_step, step, losses)
        run.notify("on_step", StepInfo(step, losses))
        at_end = pause_due(run)
        due = at_end or (every and state.global_step % every == 0) or state.global_step % run.config.log_every == 0
        # All ranks stop at the same step: under torchrun agreeing on it is an all-reduce and a read each step
        signum = agreed_signal(stop.signal, run.inputs.world)
        if due or signum is not None:
            read_logs(run)  # before any checkpoint: a non-finite step stops the run here
        # At an epoch's or the run's end, or an evaluation, the checkpoint after it follows.
        if signum is not None or (every and state.global_step % every == 0 and not at_end):
            run.notify("on_checkpoint")
            stop_if_asked(run, signum)
        if at_end:
            break
    run.notify("on_epoch_end")


def count_update(run: Run, losses: Optional[dict]) -> None:
    """After a step: a skipped one is counted; an update moves the schedule, the averages and SMART's teacher."""
    state = run.state
    if losses is None:
        state.nonfinite_skipped += 1
    elif "train/scaler_skipped" in losses:  # fp16 overflow: no update, so the schedule does not move
        state.scaler_skipped += 1
    else:
        run.scheduler.step()
        if run.averages is not None:
            run.averages.update(state.global_step + 1)
        if run.smart is not None:
            run.smart.update_ema(state.global_step + 1 - state.scaler_skipped, run.total_steps)


def read_logs(run: Run) -> None:
    """The pending steps' logged values to the host (one read): the callbacks get them, oldest first."""
    for step, values in run.pending.read():
        run.notify("on_losses", step, values)


def evaluate_and_keep_best(run: Run) -> dict:
    """Dev metrics of the run's model (with --average, its first copy's weights, put in the model for the while)
    into the history; the callbacks keep them if they are the best yet (and with --per-task-best, each task's
    best). The other copies are evaluated first and recorded beside them."""
    state, averages, show = run.state, run.averages, _shows_progress(run)
    others = evaluate_other_copies(run, show)
    with averages.loaded(averages.model_kind) if averages is not None else nullcontext():
        clock = time.perf_counter()
        metrics, predictions = run.job.evaluate(run, show)
        seconds = time.perf_counter() - clock
        entry = {"epoch": state.epoch + 1, "step": state.global_step, "dev": metrics,
                 "elapsed_s": round(time.time() - run.started, 1)}
        if averages is not None:
            entry["copies"] = {averages.model_kind: copy_record(averages, averages.model_kind, metrics), **others}
        state.history.append(entry)
        run.notify("on_evaluate", metrics, seconds)
        score = run.job.score
        if state.best is None or (metrics[score] or 0) > state.best["dev"][score]:
            state.best = entry
            run.best_predictions = predictions  # the finished run's dev files, not predicted again
            run.notify("on_best")
        if run.config.per_task_best:
            keep_task_bests(run, entry, predictions)
    return metrics


def evaluate_other_copies(run: Run, show: bool) -> dict:
    """--average: the record of each copy of the weights but the run's model (its dev metrics), recorded only."""
    averages, records = run.averages, {}
    for kind in averages.kinds[1:] if averages is not None else ():
        with averages.loaded(kind):
            records[kind] = copy_record(averages, kind, run.job.evaluate(run, show)[0])
    return records


def finish(run: Run) -> dict:
    """The result; the callbacks put the best evaluation's weights back in the model and write their last files."""
    state, best = run.state, run.state.best
    result = {"final": state.history[-1]["dev"], "best": best["dev"], "best_epoch": best["epoch"],
              "best_step": best["step"], "history": state.history, "steps": state.global_step,
              "nonfinite_skipped": state.nonfinite_skipped}
    if run.scaler.is_enabled():
        result["scaler_skipped"] = state.scaler_skipped  # fp16 overflows: the scaler's routine, not failures
    if state.stop_reason is not None:
        result["stop_reason"] = state.stop_reason
    if run.averages is not None:
        result["averages"] = averages_summary(run.averages, state.history, run.job.score)
        run.averages.put_in(run.averages.model_kind)  # the final evaluation's weights, as the loop leaves them
    if run.config.per_task_best:
        result["per_task_best"] = task_best_summary(run)
    run.notify("on_finish", result)
    return result


def stop_if_asked(run: Run, signum: Optional[int]) -> None:
    if signum is not None:
        name = signal.Signals(signum).name
        raise Interrupted(signum, f"stopped by {name} at step {run.state.global_step}; {_stopped_note(run)}")


def _stopped_note(run: Run) -> str:
    return "nothing saved" if run.folder is None else f"checkpoint saved; resume with --resume {run.folder}"


def _shows_progress(run: Run) -> bool:
    """The console is on the run's list (a command's run, not an ablation trial): evaluations show a bar."""
    return any(isinstance(c, Console) for c in run.callbacks)

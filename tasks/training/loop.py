"""The multitask training loop, shared by `train_multitask.py`, `classifier.py` and `ablate.py`.

`fit(config, inputs, outputs)` fine-tunes a copy of the encoder with the task heads, in small named
steps over one `Run` built once: `build_run`, `restore` (or `start`), `run_epoch` (`train_step` per
step), `evaluate_and_keep_best`, `finish`. Where results go is one `Outputs` (outputs.py);
`Callback`s watch (callbacks.py). SIGINT/SIGTERM checkpoint and leave at the next step boundary,
and a killed run resumes from its last checkpoint with the same result as an unbroken one.
"""
import signal
import time
from typing import Optional

import minbert

from ..config import TrainConfig
from ..distributed import agreed_signal
from ..evaluation import evaluate
from ..inputs import RunInputs
from .build import build_run, distribute, start
from .checkpoint import restore
from .outputs import Outputs, RunFolder
from .state import Run, StepInfo
from .step import train_step


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
        resume: bool = False, callbacks=()) -> dict:
    """Fine-tune and evaluate; returns the metrics (metrics.json's) and, under "model", the best evaluation's model
    (the final one for `InMemory(final_weights=True)`).

    `outputs`: a run folder (a path or a RunFolder), or InMemory. `encoder` replaces the pretrained one
    (an ablation's modified copy). `resume` continues from the folder's checkpoint. `callbacks` watch the
    run (see Callback).
    """
    if not isinstance(outputs, Outputs):
        outputs = RunFolder(outputs)
    run = build_run(config, inputs, outputs, encoder, callbacks)
    if resume:
        restore(run)
    else:
        start(run)
    distribute(run)
    outputs.begin(run, resume)
    try:
        with _Stop() as stop:
            run.started = time.time()
            while run.state.global_step < run.total_steps or not run.state.evaluated():
                run_epoch(run, stop)
                if evaluation_due(run) and not run.state.evaluated():
                    evaluate_and_keep_best(run)
                if epoch_done(run):
                    run.state.epoch += 1
                    run.state.step_in_epoch = 0
                outputs.save_checkpoint(run)
                stop_if_asked(run, agreed_signal(stop.signal, inputs.world))  # a signal during the evaluation
        result = finish(run)
    finally:
        outputs.close()
    result["model"] = run.model
    return result


def epoch_done(run: Run) -> bool:
    return run.state.step_in_epoch >= run.steps_per_epoch


def evaluation_due(run: Run) -> bool:
    """After the last step; then every --eval-every steps if set, else at every epoch's end."""
    state, every = run.state, run.config.eval_every
    if state.global_step >= run.total_steps:
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
    _notify(run, "on_plan", plan)
    while not epoch_done(run) and state.global_step < run.total_steps:
        step = plan[state.step_in_epoch]
        losses = train_step(run, step)
        if losses is None:
            state.nonfinite_skipped += 1
        else:
            run.scheduler.step()
            if run.smart is not None:
                run.smart.update_ema(state.global_step + 1, run.total_steps)
        state.step_in_epoch += 1
        state.global_step += 1
        _notify(run, "on_step", StepInfo(step, losses))
        at_end = pause_due(run)
        signum = agreed_signal(stop.signal, run.inputs.world)  # all ranks stop at the same step
        # At an epoch's or the run's end, or an evaluation, the checkpoint after it follows.
        if signum is not None or (every and state.global_step % every == 0 and not at_end):
            run.outputs.save_checkpoint(run)
            stop_if_asked(run, signum)
        if at_end:
            break
    _notify(run, "on_epoch_end")


def evaluate_and_keep_best(run: Run) -> dict:
    """Dev metrics of the current weights into the history; the outputs keep them if they are the best yet."""
    state = run.state
    clock = time.perf_counter()
    predictions = {}
    metrics = evaluate(run.model, run.inputs, run.config.eval_batch_size, show=run.outputs.prints,
                       predictions=predictions)
    seconds = time.perf_counter() - clock
    entry = {"epoch": state.epoch + 1, "step": state.global_step, "dev": metrics,
             "elapsed_s": round(time.time() - run.started, 1)}
    state.history.append(entry)
    _notify(run, "on_evaluate", metrics, seconds)
    if state.best is None or (metrics["overall"] or 0) > state.best["dev"]["overall"]:
        state.best = entry
        run.best_predictions = predictions  # the finished run's dev files, not predicted again
        run.outputs.keep_best(run)
    return metrics


def finish(run: Run) -> dict:
    """The result, with the best evaluation's weights back in the model; the outputs write their last files."""
    state, best = run.state, run.state.best
    result = {"final": state.history[-1]["dev"], "best": best["dev"], "best_epoch": best["epoch"],
              "best_step": best["step"], "history": state.history, "steps": state.global_step,
              "nonfinite_skipped": state.nonfinite_skipped}
    if run.scaler.is_enabled():
        result["scaler_skipped"] = state.scaler_skipped  # fp16 overflows: the scaler's routine, not failures
    if best["step"] != state.global_step:
        run.outputs.restore_best(run)
    run.outputs.finish(run, result)
    return result


def stop_if_asked(run: Run, signum: Optional[int]) -> None:
    if signum is not None:
        name = signal.Signals(signum).name
        raise Interrupted(signum, f"stopped by {name} at step {run.state.global_step}; {run.outputs.stopped_note()}")


def _notify(run: Run, hook: str, *args) -> None:
    for callback in run.callbacks:
        method = getattr(callback, hook, None)  # a callback need not define every hook
        if method is not None:
            method(run, *args)

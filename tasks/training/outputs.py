"""Where a run's results go, as callbacks beside the others: `RunFolder` (a command's run folder) or `InMemory`
(an ablation trial). Saving only: checkpoints, the best weights, predictions, the model folder, metrics; the
curves are `TensorBoard`'s (callbacks.py), the record config.json (record.py)."""
import json
from pathlib import Path
from typing import Optional

import torch

from ..distributed import barrier
from ..evaluation import write_all_predictions
from ..fileio import atomic_save_torch, atomic_write_json, remove_stale_temp_files
from ..saved.checkpoint_files import BEST, task_best_file
from ..saved.model_folder import MODEL_DIR, export_model
from ..saved.run_record import read_run_record
from ..saved.run_result import RunResult
from .callbacks import Callback, Console, TensorBoard
from .checkpoint import rng_states, save_checkpoint, writing
from .record import run_record
from .task_best import tasks_from_other_weights


def folder_callbacks(folder, command_options: Optional[dict] = None) -> list:
    """A command's run in `folder`: its curves (tensorboard/), its files, its progress on the console."""
    return [TensorBoard(Path(folder) / "tensorboard"), RunFolder(command_options), Console()]


class RunFolder(Callback):
    """A command's run (in `run.folder`): config.json, checkpoint.pt, best.pt, metrics.json, predictions/ and,
    once finished, model/ (the best weights in Hugging Face format with the heads: tasks/saved/model_folder.py).
    With --per-task-best, best-TASK.pt holds each task's best weights, and each task's predictions are written
    from them; model/ stays the overall best.

    Under torchrun every rank takes part in the collectives (RNG states, predictions); rank 0 alone writes.
    `command_options`: the command's own options, recorded with the training options in config.json.
    """

    def __init__(self, command_options: Optional[dict] = None):
        self.command_options = command_options
        self.writes = True

    def on_begin(self, run, resumed):
        self.writes = run.inputs.world.main
        if not self.writes:
            return
        run.folder.mkdir(parents=True, exist_ok=True)
        if resumed:
            remove_stale_temp_files(run.folder)  # half-written files of the killed process
        else:
            with writing(run.folder / "config.json"):
                atomic_write_json(run.folder / "config.json", self.record(run))

    def record(self, run) -> dict:
        """config.json: the run's record (record.py); a job's own folder records what its runs are."""
        return run_record(run, self.command_options).to_json()

    def on_checkpoint(self, run):
        per_rank = rng_states(run.inputs.world)  # a collective: every rank takes part
        if not self.writes:
            return
        averages = {"averages": run.averages.state_dict()} if run.averages is not None else {}
        save_checkpoint(run.folder, {
            "model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(), "smart": run.smart.state_dict() if run.smart else None,
            "surgery_rng": json.dumps(run.surgery_rng.bit_generator.state), "progress": run.state.to_json(),
            "rng": per_rank[0], "rng_ranks": per_rank if run.inputs.world.active else None,
            "scaler": run.scaler.state_dict(), **averages})

    def on_best(self, run):
        if self.writes:
            self.save_weights(run, BEST)

    def on_task_best(self, run, tasks):
        if self.writes:
            for task in tasks:
                self.save_weights(run, task_best_file(task))

    @staticmethod
    def save_weights(run, name: str) -> None:
        with writing(run.folder / name):
            atomic_save_torch(run.folder / name, {"model": run.model.state_dict(), "epoch": run.state.epoch + 1})

    def on_finish(self, run, result):
        folder = run.folder
        if not run.state.best_is_current():
            barrier(run.inputs.world)  # rank 0 has written best.pt
            load_weights(run, BEST)
        own = tasks_from_other_weights(run) if run.config.per_task_best else []
        with writing(folder / "predictions"):
            write_all_predictions(run.model, run.inputs, folder / "predictions", run.config, show=True,
                                  known=run.best_predictions, tasks=[t for t in run.inputs.tasks if t not in own])
            if own:
                barrier(run.inputs.world)  # rank 0 has written best-TASK.pt
            for task in own:  # --per-task-best: each from its best evaluation's weights
                load_weights(run, task_best_file(task))
                write_all_predictions(run.model, run.inputs, folder / "predictions", run.config, show=True,
                                      known=run.task_best_predictions.get(task), tasks=[task])
        if own:
            load_weights(run, BEST)  # model/ is the overall best
        if self.writes:
            # Before metrics.json, which tells classifier.py's --resume that the task is done.
            record, typed = read_run_record(folder / "config.json"), RunResult.from_json(result)
            with writing(folder / MODEL_DIR):
                export_model(folder / MODEL_DIR, run.model, record, typed, run.inputs.encoder.source.folder)
            with writing(folder / "metrics.json"):
                atomic_write_json(folder / "metrics.json", typed.to_json())


def load_weights(run, name: str) -> None:
    """The weights a run saved in its folder as `name` (best.pt, best-TASK.pt) into its model."""
    run.model.load_state_dict(torch.load(run.folder / name, map_location="cpu", weights_only=True)["model"])


class InMemory(Callback):
    """An ablation trial's outputs: no files, no checkpoints (a trial is cheap to rerun); the best weights
    are kept in memory, or with `final_weights` the model keeps its last ones (a sweep's trial reports its
    final evaluation). With `export_to`, the model it ends with is also written there as a model folder
    (tasks/saved/model_folder.py), as a finished run's RUN_DIR/model/. Its curves: a `TensorBoard` beside it."""

    def __init__(self, final_weights: bool = False, export_to=None):
        self.final_weights, self.export_to = final_weights, export_to
        self.best_weights = None

    def on_best(self, run):
        if not self.final_weights:
            self.best_weights = {k: v.detach().clone() for k, v in run.model.state_dict().items()}

    def on_finish(self, run, result):
        if not self.final_weights and not run.state.best_is_current():
            run.model.load_state_dict(self.best_weights)
        if self.export_to is not None:
            with writing(Path(self.export_to)):
                record = run_record(run)
                scores = "final" if self.final_weights else "best"
                export_model(self.export_to, run.model, record, RunResult.from_json(result),
                             run.inputs.encoder.source.folder, scores=scores)

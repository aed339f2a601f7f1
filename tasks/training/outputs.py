"""Where a run's results go: `RunFolder` (a command's run folder) or `InMemory` (an ablation trial).

Saving only: checkpoints, the best weights, predictions, the model folder, metrics. The curves are
the `TensorBoard` callback's, which an `Outputs` opens where its results go.
"""
import json
from pathlib import Path
from typing import Optional

import torch

from minbert import CheckpointError

from ..distributed import barrier
from ..evaluation import write_all_predictions
from ..fileio import atomic_save_torch, atomic_write_json, remove_stale_temp_files
from ..saved.checkpoint_files import BEST, CHECKPOINT
from ..saved.model_folder import MODEL_DIR, export_model
from .callbacks import TensorBoard
from .checkpoint import rng_states, save_checkpoint, writing
from .record import hparams, run_record
from .state import Run


class Outputs:
    """Where a run's results go. Its `tensorboard` callback logs the run's curves once `begin` opens it."""
    prints = False   # the run reports its progress on stdout (a command's run, not an ablation trial)

    def __init__(self):
        self.tensorboard = TensorBoard()

    def begin(self, run: Run, resume: bool) -> None:
        """The run is built (and restored): open what the outputs need."""

    def checkpoint_path(self) -> Path:
        raise CheckpointError("nothing to resume from: this run keeps no checkpoints")

    def save_checkpoint(self, run: Run) -> None:
        pass

    def keep_best(self, run: Run) -> None:
        """The current weights have the best dev score so far."""

    def restore_best(self, run: Run) -> None:
        """Put the kept best weights back into run.model."""

    def finish(self, run: Run, result: dict) -> None:
        pass

    def stopped_note(self) -> str:
        return "nothing saved"

    def close(self) -> None:
        self.tensorboard.close()


class RunFolder(Outputs):
    """A command's run: config.json, tensorboard/, checkpoint.pt, best.pt, metrics.json, predictions/ and, once
    finished, model/ (the best weights in Hugging Face format with the heads: tasks/saved/model_folder.py).

    Under torchrun every rank takes part in the collectives (RNG states, predictions); rank 0 alone writes.
    `command_options`: the command's own options, recorded with the training options in config.json.
    """
    prints = True

    def __init__(self, folder, command_options: Optional[dict] = None):
        super().__init__()
        self.folder = Path(folder)
        self.command_options = command_options
        self.writes = True

    def begin(self, run, resume):
        self.writes = run.inputs.world.main
        if not self.writes:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        if resume:
            remove_stale_temp_files(self.folder)  # half-written files of the killed process
        else:
            with writing(self.folder / "config.json"):
                atomic_write_json(self.folder / "config.json", run_record(run, self.command_options))
        # Events after the checkpoint's step were logged by the killed process: TensorBoard drops them.
        self.tensorboard.open(self.folder / "tensorboard", purge_step=run.state.global_step + 1 if resume else None)

    def checkpoint_path(self) -> Path:
        return self.folder / CHECKPOINT

    def save_checkpoint(self, run):
        per_rank = rng_states(run.inputs.world)  # a collective: every rank takes part
        if not self.writes:
            return
        self.tensorboard.flush()  # every event up to this step is on disk before the step is
        save_checkpoint(self.folder, {
            "model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(), "smart": run.smart.state_dict() if run.smart else None,
            "surgery_rng": json.dumps(run.surgery_rng.bit_generator.state), "progress": run.state.to_json(),
            "rng": per_rank[0], "rng_ranks": per_rank if run.inputs.world.active else None,
            "scaler": run.scaler.state_dict()})

    def keep_best(self, run):
        if self.writes:
            with writing(self.folder / BEST):
                atomic_save_torch(self.folder / BEST, {"model": run.model.state_dict(), "epoch": run.state.epoch + 1})

    def restore_best(self, run):
        barrier(run.inputs.world)  # rank 0 has written best.pt
        best = torch.load(self.folder / BEST, map_location="cpu", weights_only=True)
        run.model.load_state_dict(best["model"])

    def finish(self, run, result):
        with writing(self.folder / "predictions"):
            write_all_predictions(run.model, run.inputs, self.folder / "predictions", run.config, show=True,
                                  known=run.best_predictions)
        if self.writes:
            # Before metrics.json, which tells classifier.py's --resume that the task is done.
            record = json.loads((self.folder / "config.json").read_text(encoding="utf-8"))
            with writing(self.folder / MODEL_DIR):
                export_model(self.folder / MODEL_DIR, run.model, record, result, run.inputs.encoder.source.folder)
            with writing(self.folder / "metrics.json"):
                atomic_write_json(self.folder / "metrics.json", result)
            self.tensorboard.add_hparams(hparams(run), result)

    def stopped_note(self) -> str:
        return f"checkpoint saved; resume with --resume {self.folder}"


class InMemory(Outputs):
    """An ablation trial's outputs: no files, no checkpoints (a trial is cheap to rerun); the best weights
    are kept in memory, or with `final_weights` the model keeps its last ones (a sweep's trial reports its
    final evaluation). With `tensorboard`, the trial's curves go to that folder, and `hparams` with its
    best dev scores at the end. With `export_to`, the model it ends with is also written there as a model
    folder (tasks/saved/model_folder.py), as a finished run's RUN_DIR/model/."""

    def __init__(self, tensorboard=None, hparams: Optional[dict] = None, final_weights: bool = False,
                 export_to=None):
        super().__init__()
        self.tensorboard_dir, self.hparams, self.final_weights = tensorboard, hparams, final_weights
        self.export_to = export_to
        self.best_weights = None

    def __repr__(self) -> str:
        return f"InMemory(tensorboard={str(self.tensorboard_dir)!r})"

    def begin(self, run, resume):
        if self.tensorboard_dir is not None:
            self.tensorboard.open(self.tensorboard_dir)

    def keep_best(self, run):
        if not self.final_weights:
            self.best_weights = {k: v.detach().clone() for k, v in run.model.state_dict().items()}

    def restore_best(self, run):
        if not self.final_weights:
            run.model.load_state_dict(self.best_weights)

    def finish(self, run, result):
        if self.export_to is not None:
            with writing(Path(self.export_to)):
                export_model(self.export_to, run.model, run_record(run), result, run.inputs.encoder.source.folder,
                             scores="final" if self.final_weights else "best")
        if self.hparams is not None:
            self.tensorboard.add_hparams(self.hparams, result)

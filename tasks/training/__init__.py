"""Fine-tuning one shared encoder on several tasks: the training loop and what only training uses.

    loop.py         fit: build_run -> restore or start -> run_epoch -> evaluate_and_keep_best -> finish; signals
    build.py        a run built once: model (frozen where asked), data order, optimizer, schedule
    step.py         one optimizer step: task losses, backward, gradient surgery's merge, clipping, non-finite
    state.py        Run (what build_run makes) and TrainState (where the run is; checkpointed)
    checkpoint.py   writing checkpoints and restoring a run from one (tasks/saved/checkpoint_files.py reads them)
    outputs.py      where results go: RunFolder (a command's run folder) or InMemory (an ablation trial)
    callbacks.py    what watches a run: the console's progress, TensorBoard
    record.py       config.json: the run's record
    options.py      the training options (tasks/config.py's TrainConfig) as command-line flags
    samplers.py     which task and examples each step trains on
    smart.py        SMART regularisation
    surgery.py      gradient surgery (PCGrad, dominant)

Code outside this package imports the names below, never the modules' insides.
"""
from .build import build_multitask_model, build_run, lr_lambda, training_plan
from .callbacks import Callback, TensorBoard
from .loop import Interrupted, fit
from .options import add_optimizer_arg, add_training_args
from .outputs import InMemory, Outputs, RunFolder
from .record import declarations
from .samplers import SAMPLERS, build_sampler, padding_fraction
from .state import Run, StepInfo
from .step import train_step

__all__ = ["SAMPLERS", "Callback", "InMemory", "Interrupted", "Outputs", "Run", "RunFolder", "StepInfo",
           "TensorBoard", "add_optimizer_arg",
           "add_training_args", "build_multitask_model", "build_run", "build_sampler", "declarations",
           "fit", "lr_lambda", "padding_fraction", "train_step", "training_plan"]

"""Fine-tuning one shared encoder on several tasks: the training loop and what only training uses.

    loop.py         fit: build_run -> restore or start -> run_epoch -> evaluate_and_keep_best -> finish; signals
    job.py          Job: what a run trains (model, plan, loss, batches, evaluation); build.py's MultitaskJob is
                    fine-tuning's, tasks/pretraining's MaskedLMJob the masked-language model's
    build.py        a run built once: model (frozen where asked), data order, optimizer, schedule
    step.py         one optimizer step: task losses, backward, gradient surgery's merge, clipping, non-finite
    reads.py        when the step's logged values are read from the device (--log-every)
    averaging.py    --average: EMA and SWA copies of the weights, evaluated in the model's place or beside it
    task_best.py    --per-task-best: each task's best evaluation, whose weights write its predictions
    graphs.py       --cuda-graphs, decided once: the step as CUDA graphs, its static widths, the device lr
    state.py        Run (what build_run makes, with its callbacks; request_stop) and TrainState (checkpointed)
    callbacks.py    the one hook protocol (Callback), TensorBoard's curves, the console, progress lines
    outputs.py      where results go, as callbacks: RunFolder (a command's run folder) or InMemory (a trial)
    checkpoint.py   writing checkpoints and restoring a run from one (tasks/saved/checkpoint_files.py reads them)
    record.py       config.json: the run's record
    command.py      train_multitask.py's command: its options, --resume's recorded arguments, the run, its outcome
    options.py      the training options (tasks/config.py's TrainConfig) as command-line flags
    samplers.py     which task and examples each step trains on
    smart.py        SMART regularisation
    surgery.py      gradient surgery (PCGrad, dominant)

Code outside this package imports the names below, never the modules' insides.
"""
from .build import MULTITASK, MultitaskJob, build_multitask_model, build_run, lr_lambda, training_plan
from .callbacks import Callback, Console, ProgressLines, TensorBoard
from .checkpoint import writing
from .command import TrainCommand, parse_train_command, recorded_arguments, train_command, train_parser
from .graphs import StepGraphs, widths_up_to
from .job import Job
from .loop import Interrupted, fit
from .options import (
           IMPLEMENTATION_HELP,
           LOG_EVERY_HELP,
           PRECISION_HELP,
           TF32_HELP,
           add_optimizer_arg,
           add_training_args,
)
from .outputs import InMemory, RunFolder, folder_callbacks
from .record import declarations
from .samplers import SAMPLERS, build_sampler, padding_fraction
from .state import Run, StepInfo
from .step import prefetch, train_step

__all__ = ["IMPLEMENTATION_HELP", "LOG_EVERY_HELP", "MULTITASK", "PRECISION_HELP", "SAMPLERS", "TF32_HELP",
           "Callback", "Console", "InMemory",
           "Interrupted", "Job", "MultitaskJob", "ProgressLines", "Run", "RunFolder", "StepGraphs",
           "StepInfo", "TensorBoard",
           "TrainCommand", "add_optimizer_arg", "add_training_args", "build_multitask_model", "build_run",
           "build_sampler", "declarations", "fit", "folder_callbacks", "lr_lambda", "padding_fraction",
           "parse_train_command", "prefetch", "recorded_arguments", "train_command", "train_parser",
           "train_step", "training_plan", "widths_up_to", "writing"]

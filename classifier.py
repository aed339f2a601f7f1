"""The course's Part 1: sentiment classification on SST (5 classes) and CFIMDB (2 classes).

    python classifier.py --fine-tune-mode last-linear-layer   # 2024: BERT frozen, pooler included (the default)
    python classifier.py --fine-tune-mode full-model          # 2024: every parameter trains
    python classifier.py --option pretrain | finetune         # the 2023 starter's spelling of the same two

The prediction files are named as the course version you name writes them:
--fine-tune-mode the 2024 starter's `last-linear-layer-*` / `full-model-*`,
--option the 2023 starter's `pretrain-*` / `finetune-*`; with neither, the
2024 starter's default, `last-linear-layer`.

As the course's classifier.py, each task gets its own model (the pooled [CLS]
vector, dropout, a linear layer) trained on its training file, the best epoch
on dev kept, and predictions written as `{prefix}-sst-dev-out.csv`,
`{prefix}-sst-test-out.csv`, `{prefix}-cfimdb-dev-out.csv`, `{prefix}-cfimdb-test-out.csv`.
Training is the same trainer as train_multitask.py (checkpoints, TensorBoard,
resume, bad-input policy, the exported model/): each task is a run in
RUN_DIR/<task>/, and `predict.py RUN_DIR` writes the files again. The files go
to RUN_DIR/predictions/ and, when the run is complete (no --max-steps, all the
data), into the course-level predictions/ folder that Part 2 also writes into
and prepare_submit.py zips; --predictions-dir DIR publishes any run there.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from minbert import DEFAULT_IMPLEMENTATION, DEFAULT_MODEL, IMPLEMENTATION_CHOICES, PRECISIONS, UserError
from tasks.cli import interrupted_resumable, run_command
from tasks.config import TrainConfig, parse_tasks, validate, with_environment
from tasks.course.part1 import MODE_DEFAULTS, mode_defaults_text
from tasks.course.submission import PART1_MODES, PREDICTIONS_DIR_ENV, course_predictions_dir, publish_predictions
from tasks.data import DATA_DIR_ENV
from tasks.fileio import atomic_write_bytes, atomic_write_json
from tasks.inputs import announcement, prepare
from tasks.registry import CLASSIFIER_TASKS, REGISTRY
from tasks.saved.checkpoint_files import CHECKPOINT
from tasks.saved.run_result import RunResult
from tasks.training import Interrupted, add_optimizer_arg, fit, recorded_arguments

RESULTS = "classifier.json"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    course = parser.add_argument_group("the course's options")
    which = course.add_mutually_exclusive_group()
    which.add_argument("--option", choices=tuple(PART1_MODES), default=None,
                       help="the 2023 starter's spelling: pretrain: the whole BERT is frozen, pooler "
                            "included, only the classifier trains; finetune: every parameter trains; files "
                            "pretrain-*/finetune-*")
    which.add_argument("--fine-tune-mode", choices=tuple(PART1_MODES.values()), default=None,
                       help="the 2024 starter's spelling: last-linear-layer = pretrain, full-model = finetune; "
                            "files last-linear-layer-*/full-model-* (default with neither flag: "
                            "last-linear-layer, the 2024 starter's)")
    course.add_argument("--epochs", type=int, default=None, help=f"(default: {mode_defaults_text('epochs')})")
    course.add_argument("--lr", type=float, default=None,
                        help=f"peak learning rate (default: {mode_defaults_text('lr')})")
    course.add_argument("--batch_size", "--batch-size", dest="batch_size", type=int, default=8,
                        help="(default: %(default)s)")
    course.add_argument("--hidden_dropout_prob", "--hidden-dropout-prob", dest="hidden_dropout_prob",
                        type=float, default=0.3, help="dropout before the classifier (default: %(default)s)")
    course.add_argument("--seed", type=int, default=11711, help="(default: %(default)s)")
    course.add_argument("--use_gpu", "--use-gpu", dest="use_gpu", action="store_true",
                        help="train on CUDA (the same as --device cuda)")
    course.add_argument("--dev_out", "--test_out", dest="ignored_out", default=None, metavar="PATH",
                        help="accepted for the 2023 starter's command lines, and ignored as its classifier.py "
                             "ignores them: the files are always <prefix>-<task>-<split>-out.csv")

    ours = parser.add_argument_group("this project's options")
    ours.add_argument("--model", default=DEFAULT_MODEL,
                      help="checkpoint folder, Hugging Face name, or 'minilm' (default: %(default)s, falling "
                           "back to the embedded all-MiniLM-L6-v2 when it cannot be had)")
    ours.add_argument("--data-dir", default=None,
                      help=f"folder with the course's csv files (default: ${DATA_DIR_ENV}, else data/)")
    ours.add_argument("--tasks", default=",".join(CLASSIFIER_TASKS),
                      help=f"comma-separated, out of {','.join(REGISTRY)} (default: %(default)s)")
    ours.add_argument("--out", default=None, help="run folder (default: runs/part1-<mode>-<date-time>)")
    ours.add_argument("--precision", choices=PRECISIONS, default="auto",
                      help="bf16 or fp16 autocast (fp16: CUDA only, with a gradient scaler) or fp32; auto = bf16 "
                           "where the device computes it natively, else fp16 on a GPU with tensor cores, else fp32 "
                           "(default: %(default)s)")
    ours.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:1 ... (default: auto)")
    ours.add_argument("--implementation", choices=IMPLEMENTATION_CHOICES, default=DEFAULT_IMPLEMENTATION,
                      help="fast (minbert/fast.py) or reference (minbert/model.py, SDPA attention); auto = fast "
                           "on a CPU, the reference on a GPU (default: %(default)s)")
    ours.add_argument("--max-length", type=int, default=None,
                      help="tokens per text (default: each task's own: " +
                           ", ".join(f"{REGISTRY[t].name} {REGISTRY[t].max_length}" for t in CLASSIFIER_TASKS) + ")")
    ours.add_argument("--max-steps", type=int, default=None, help="stop each task after this many steps")
    ours.add_argument("--data-fraction", type=float, default=1.0,
                      help="train on this seeded fraction of each training set (default: 1)")
    ours.add_argument("--eval-batch-size", type=int, default=64, help="(default: %(default)s)")
    add_optimizer_arg(ours)
    ours.add_argument("--predictions-dir", default=None, metavar="DIR",
                      help=f"course-level folder the prediction files are copied into when the run is "
                           f"complete; named here, even a smoke or partial run's are ('' = do not copy) "
                           f"(default: ${PREDICTIONS_DIR_ENV}, else predictions/)")
    ours.add_argument("--resume", metavar="RUN_DIR", default=None,
                      help="continue an interrupted Part-1 run: finished tasks are kept, a task with a "
                           "checkpoint resumes from it")
    return parser


def parse_args(argv):
    args = build_parser().parse_args(argv)
    saved = {}
    if args.resume:
        args, saved = recorded_arguments(build_parser(), Path(args.resume) / RESULTS, resume=args.resume,
                                         out=args.resume)
    if args.fine_tune_mode is not None:
        args.mode = next(k for k, v in PART1_MODES.items() if v == args.fine_tune_mode)
        args.prefix = args.fine_tune_mode
    elif args.option is not None:
        args.mode = args.prefix = args.option
    else:  # neither: the 2024 starter's default and spelling
        args.mode, args.prefix = "pretrain", PART1_MODES["pretrain"]
    if args.resume and saved.get("prefix"):  # the files a resumed run has begun to write keep their spelling
        args.prefix = saved["prefix"]
    defaults = MODE_DEFAULTS[args.mode]
    args.epochs = defaults["epochs"] if args.epochs is None else args.epochs
    args.lr = defaults["lr"] if args.lr is None else args.lr
    if args.use_gpu and args.device not in (None, "cuda"):
        raise UserError(f"--use_gpu and --device {args.device} disagree")
    args.device = "cuda" if args.use_gpu else (args.device or "auto")
    args.task_list = parse_tasks(args.tasks)
    if args.out is None:
        args.out = str(Path("runs") / f"part1-{args.prefix}-{time.strftime('%Y%m%d-%H%M%S')}")
    elif not args.resume and (Path(args.out) / RESULTS).exists():
        raise UserError(f"--out {args.out} already holds a Part-1 run: continue it with --resume {args.out} "
                        f"or choose another folder")
    return args


def task_config(args, task: str) -> TrainConfig:
    """The trainer's options for one task's run: train_multitask.py's defaults, set as Part 1 needs."""
    config = with_environment(dataclasses.replace(
        TrainConfig(), model=args.model, data_dir=args.data_dir, tasks=task, epochs=args.epochs, lr=args.lr,
        batch_size=args.batch_size, head_dropout=args.hidden_dropout_prob, seed=args.seed, device=args.device,
        precision=args.precision, implementation=args.implementation, max_length=args.max_length,
        max_steps=args.max_steps,
        data_fraction=args.data_fraction, eval_batch_size=args.eval_batch_size,
        predictions_dir=args.predictions_dir, prediction_mode=args.prefix, pair_mode="cross",
        pooling="pooler",  # the course's classifier reads BERT's pooler output
        freeze_until="all" if args.mode == "pretrain" else 0,
        weight_decay=0.0,  # the course's AdamW runs without weight decay
        optimizer=args.optimizer,
        lr_schedule=MODE_DEFAULTS[args.mode]["lr_schedule"],
        checkpoint_every=0))
    validate(config)
    return config


def run_task(args, task: str) -> RunResult:
    out = Path(args.out) / task
    if (out / "metrics.json").exists():  # finished before an interruption: keep it
        print(f"{task}: already finished in {out}", flush=True)
        return RunResult.read(out / "metrics.json")
    config = task_config(args, task)
    resume = (out / CHECKPOINT).exists()
    inputs = prepare(config)
    print(f"{task} ({args.prefix}): " + announcement(inputs, f"run folder {out}") + ("; resuming" if resume else ""),
          flush=True)
    return RunResult.from_json(fit(config, inputs, out, resume=resume))


def main(argv=None) -> int:
    return run_command(argv, parse_args, run, stops=(Interrupted,), interrupted=_how_to_resume)


def run(args) -> None:
    """Each task's run in turn, then the dev accuracies and the prediction files in one folder."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"command": sys.argv, "arguments": {k: v for k, v in vars(args).items() if k != "task_list"},
              "tasks": {}}
    atomic_write_json(out / RESULTS, record)
    for task in args.task_list:
        result = run_task(args, task)
        record["tasks"][task] = {"dev_accuracy": result.score(task), "best_epoch": result.best_epoch,
                                 "final_dev_accuracy": result.score(task, "final"), "run": str(out / task)}
        atomic_write_json(out / RESULTS, record)
    predictions = [p for task in args.task_list for p in sorted((out / task / "predictions").glob("*.csv"))]
    if args.ignored_out is not None:
        print(f"--dev_out/--test_out ignored, as the course's 2023 classifier.py ignores them: the files are "
              f"{args.prefix}-<task>-<split>-out.csv", file=sys.stderr)
    for line in _summary(args, record, predictions):
        print(line)


def _how_to_resume(args) -> str:
    return interrupted_resumable(args.out if args is not None else None, RESULTS)


def _summary(args, record, predictions) -> list:
    """Dev accuracy per task, and where the prediction files went."""
    lines = [f"dev acc {task} ({args.prefix}) :: {r['dev_accuracy']:.3f} (epoch {r['best_epoch']})"
             for task, r in record["tasks"].items()]
    folder = Path(args.out) / "predictions"
    folder.mkdir(exist_ok=True)
    for path in predictions:
        atomic_write_bytes(folder / path.name, path.read_bytes())
    lines.append(f"predictions in {folder}")
    course_dir = course_predictions_dir(args.predictions_dir)
    if course_dir:
        runs = {str(Path(args.out) / task): [p for p in predictions if p.parent.parent.name == task]
                for task in args.task_list}
        lines += publish_predictions(runs, course_dir, sys.argv, always=args.predictions_dir is not None)
    return lines


if __name__ == "__main__":
    sys.exit(main())

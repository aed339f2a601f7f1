"""Predict with a trained run: the course's prediction files again, or scores for your own sentences.

    python predict.py runs/NAME                                  # dev and test files of every task of the run
    python predict.py runs/NAME --split test --data-dir new/ --out new-predictions/
    python predict.py runs/NAME --input mine.csv --task sst      # one line per row: id, class, probabilities
    printf 'sentence1\\tsentence2\\nA man sings.\\tA man is singing.\\n' \\
        | python predict.py runs/NAME --input - --task sts
    python predict.py runs/part1-finetune-DATE                   # a classifier.py run: each task's files

RUN_DIR is a run folder of train_multitask.py or classifier.py (its best.pt is
read: the best evaluation's weights, also of a run stopped after it), or an
exported model folder (RUN_DIR/model). The model, tokenizer, tasks, pair mode,
pooling and max lengths are the run's own (its config.json, or the model
folder's tasks.json): nothing is repeated here.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

from minbert import DEFAULT_IMPLEMENTATION, IMPLEMENTATION_CHOICES, PRECISIONS, UserError
from tasks.cli import run_command
from tasks.data import DATA_DIR_ENV
from tasks.encoded import encode_split
from tasks.evaluation import predict, with_scores, write_all_predictions
from tasks.fileio import atomic_write_text
from tasks.heads import task_spec
from tasks.machine import resolve_device
from tasks.metrics import compute_metric, overall_score
from tasks.registry import get_task
from tasks.saved.saved_run import course_inputs, inference_precision, load_trained, run_folders
from tasks.saved.user_input import STDIN, read_user_file

SPLITS = {"dev": ("dev",), "test": ("test",), "all": ("dev", "test")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", metavar="RUN_DIR",
                        help="a run folder (train_multitask.py's, or classifier.py's with one run per task) or a "
                             "model folder (RUN_DIR/model)")
    course = parser.add_argument_group("the course's files (the default)")
    course.add_argument("--data-dir", default=None,
                        help=f"folder with the course's csv files (default: the folder the run read if it is still "
                             f"there, else ${DATA_DIR_ENV}, else data/)")
    course.add_argument("--split", choices=tuple(SPLITS), default=None,
                        help="which files to predict; dev metrics are printed (default: all)")
    course.add_argument("--out", default=None,
                        help="folder for the prediction files (default: RUN_DIR/predictions/, the run's own); with "
                             "--input, the output file (default: stdout)")
    own = parser.add_argument_group("your own file")
    own.add_argument("--input", metavar="FILE", default=None,
                     help="a csv or tsv file whose first line names the columns, or - for stdin: one output line "
                          "per row (after a header line): the id (the id column, else the row's line number) "
                          "and the class and its probabilities, or the score")
    own.add_argument("--task", default=None, metavar="NAME",
                     help="the head to score --input with: a task the run trained (the course's, or one its "
                          "--task-file declared)")
    own.add_argument("--columns", default=None, metavar="A[,B]",
                     help="the text column(s) of --input (default: the task's own, e.g. sentence, or "
                          "sentence1,sentence2)")
    compute = parser.add_argument_group("computation")
    compute.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (default: %(default)s)")
    compute.add_argument("--precision", choices=PRECISIONS, default="auto",
                         help="auto: the run's own precision where this device computes it natively (the run's "
                              "prediction files come out the same), else fp32 (default: %(default)s)")
    compute.add_argument("--implementation", choices=IMPLEMENTATION_CHOICES, default=DEFAULT_IMPLEMENTATION,
                         help="fast: minbert/fast.py; reference: minbert/model.py (SDPA attention); auto = fast on "
                              "a CPU, the reference on a GPU (default: %(default)s)")
    compute.add_argument("--batch-size", type=int, default=None,
                         help="examples per forward pass (default: the run's --eval-batch-size)")
    return parser


def parse_args(argv):
    args = build_parser().parse_args(argv)
    if (args.input is None) != (args.task is None):
        raise UserError("--input and --task go together: the file to score and the head to score it with")
    if args.columns is not None and args.input is None:
        raise UserError("--columns names the text columns of --input")
    if args.input is not None and (args.split is not None or args.data_dir is not None):
        raise UserError("--split and --data-dir choose the course's files; with --input the file is yours")
    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size must be >= 1, got {args.batch_size}")
    return args


def course_predictions(args, device) -> None:
    """The course's prediction files of every task of the run(s), and the dev metrics."""
    splits = SPLITS[args.split or "all"]
    for run_dir in run_folders(args.run):
        trained = load_trained(run_dir, device, args.implementation)
        precision = inference_precision(args.precision, trained, device)
        config = dataclasses.replace(trained.config, eval_batch_size=args.batch_size or trained.config.eval_batch_size)
        print(f"{run_dir}: {', '.join(trained.tasks)} from {trained.origin}; device {device}; precision {precision}",
              flush=True)
        inputs = course_inputs(trained, args.data_dir or _existing(trained.data_dir), splits, device, precision)
        out = Path(args.out) if args.out else Path(args.run) / "predictions"
        written = write_all_predictions(trained.model, inputs, out, config, show=True, splits=splits)
        dev = {task: compute_metric(get_task(task).metric, values, inputs.data[task]["dev"].labels.tolist())
               for (task, split), values in written.items() if split == "dev"}
        if dev:
            dev["overall"] = overall_score(dev)
            print("dev " + " ".join(f"{k}={v:.4f}" for k, v in dev.items()), flush=True)
        print(f"predictions in {out}", flush=True)


def _existing(folder):
    """The run's data folder if it is still there; None (the usual default) if not."""
    return folder if folder and Path(folder).is_dir() else None


def score_input(args, device) -> None:
    """One line per row of the user's file: id, then class and probabilities, or the score."""
    runs = run_folders(args.run)
    run_dir = next((r for r in runs if r.name == args.task), runs[0]) if len(runs) > 1 else runs[0]
    trained = load_trained(run_dir, device, args.implementation)
    if args.task not in trained.tasks:
        raise UserError(f"--task {args.task}: the model in {run_dir} has no {args.task} head "
                        f"(its tasks: {', '.join(trained.tasks)})")
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    rows = read_user_file(args.input, args.task, columns)
    cfg, spec = get_task(args.task), task_spec(args.task, trained.config.pair_mode, trained.config.task_heads)
    part = encode_split(rows, trained.tokenizer, trained.config.pair_mode, trained.max_lengths[args.task])
    header = [cfg.kind.prediction_column, *cfg.kind.probability_columns(cfg)]
    # the class, then each class's probability (one logit: P(1)); or the score
    found = predict(trained.model, part, trained.tokenizer, device, args.batch_size or trained.config.eval_batch_size,
                    inference_precision(args.precision, trained, device), label=f"scoring {args.task}",
                    values=with_scores(spec))
    lines = ["\t".join(["id", *header])]
    for example_id, row in zip(part.ids, found):
        if cfg.kind.integer_labels:
            shown = [str(int(row[0]))] + [f"{p:.4f}" for p in row[1:]]
        else:
            shown = [f"{v:.4f}" for v in row]
        lines.append("\t".join([example_id, *shown]))
    text = "\n".join(lines) + "\n"
    if args.out and args.out != STDIN:
        atomic_write_text(args.out, text)
    else:
        sys.stdout.write(text)


def main(argv=None) -> int:
    return run_command(argv, parse_args, run)


def run(args) -> None:
    device = resolve_device(args.device)
    with torch.inference_mode():
        if args.input is not None:
            score_input(args, device)
        else:
            course_predictions(args, device)


if __name__ == "__main__":
    sys.exit(main())

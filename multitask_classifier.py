"""The course's Part 2 command line: `multitask_classifier.py` of the 2023 and 2024 starters, run by this
project's trainer (train_multitask.py: the same code path, its flags translated first).

    python multitask_classifier.py --fine-tune-mode full-model --lr 1e-5 --batch_size 8 --use_gpu \\
        --sst_dev_out predictions/sst-dev-output.csv --sst_test_out predictions/sst-test-output.csv ...

The course's flags, translated:

  --fine-tune-mode full-model | --option finetune           every parameter trains
  --fine-tune-mode last-linear-layer | --option pretrain    BERT frozen, only the heads train (--freeze-until all)
      with neither flag: last-linear-layer, the 2024 starter's default (as classifier.py)
  --use_gpu                  --device cuda
  --batch_size N             --batch-size N
  --hidden_dropout_prob P    --head-dropout P (dropout before each task's head)
  --lr, --epochs, --seed     the same flags
  --{sst,para,sts}_{train,dev,test} FILE
                             --data-dir: the files must keep the course's names in one folder
  --{sst,para,sts}_{dev,test}_out FILE
                             after the run, its prediction file is written there too (byte for byte
                             the run's own), with its provenance in a sources.json beside it, whatever
                             the run was: prepare_submit.py refuses a smoke run's files

A course flag you do not give keeps this project's default (train_multitask.py --help), not the
starter's; every train_multitask.py flag is accepted as well (--model, --max-steps, --optimizer, ...).
Without any --*_out, a complete run publishes to the course-level predictions/ folder as
train_multitask.py does.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import sys
from pathlib import Path

from minbert import UserError
from tasks.cli import run_command
from tasks.course.submission import PART1_MODES
from tasks.registry import get_task
from tasks.training import train_command, train_parser

COURSE_TASKS = {"sst": "sst", "para": "quora", "sts": "sts"}  # the course's flag prefix -> this project's task
SPLITS = ("train", "dev", "test")


def add_course_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    course = parser.add_argument_group("the course's options (2023 and 2024 starters)")
    which = course.add_mutually_exclusive_group()
    which.add_argument("--fine-tune-mode", choices=tuple(PART1_MODES.values()), default=None,
                       help="2024: last-linear-layer = BERT frozen, only the heads train; full-model = every "
                            "parameter trains (default with neither flag: last-linear-layer, the starter's)")
    which.add_argument("--option", choices=tuple(PART1_MODES), default=None,
                       help="2023: pretrain = last-linear-layer, finetune = full-model")
    course.add_argument("--use_gpu", action="store_true", help="train on CUDA (--device cuda)")
    course.add_argument("--batch_size", dest="course_batch_size", type=int, default=None, metavar="N",
                        help="--batch-size")
    course.add_argument("--hidden_dropout_prob", dest="course_dropout", type=float, default=None, metavar="P",
                        help="--head-dropout: the dropout before each task's head")
    for prefix, task in COURSE_TASKS.items():
        for split in SPLITS:
            course.add_argument(f"--{prefix}_{split}", dest=f"course_{prefix}_{split}", default=None, metavar="FILE",
                                help=f"must be named {get_task(task).files[split]}, in the folder of the others "
                                     f"(--data-dir)")
        for split in ("dev", "test"):
            course.add_argument(f"--{prefix}_{split}_out", dest=f"course_{prefix}_{split}_out", default=None,
                                metavar="FILE", help=f"also write {get_task(task).prediction_file(split)} here")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = add_course_args(train_parser())
    parser.description = __doc__
    return parser


def _given(rest: list, flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in rest)


def translate(argv: list) -> tuple:
    """(train_multitask.py's argv, the (prediction file, path) pairs the --*_out flags ask for)."""
    build_parser().parse_args(argv)  # --help, and one line and exit 2 for a flag neither script knows
    course, rest = add_course_args(argparse.ArgumentParser(add_help=False, allow_abbrev=False)).parse_known_args(argv)
    extra = []
    mode = course.fine_tune_mode or PART1_MODES.get(course.option) or PART1_MODES["pretrain"]
    if _given(rest, "--freeze-until"):
        if course.fine_tune_mode or course.option:
            raise UserError("--freeze-until and --fine-tune-mode/--option both say what trains: give one")
    elif mode == PART1_MODES["pretrain"]:
        extra += ["--freeze-until", "all"]
    for given, flag, ours in ((course.course_batch_size, "--batch_size", "--batch-size"),
                              (course.course_dropout, "--hidden_dropout_prob", "--head-dropout")):
        if given is not None:
            if _given(rest, ours):
                raise UserError(f"{flag} and {ours} are the same option: give one")
            extra += [ours, str(given)]
    if course.use_gpu:
        if _given(rest, "--device"):
            raise UserError("--use_gpu and --device both name the device: give one")
        extra += ["--device", "cuda"]
    extra += _data_dir(course, rest)
    outputs = tuple((get_task(task).prediction_file(split), path) for prefix, task in COURSE_TASKS.items()
                    for split in ("dev", "test") if (path := getattr(course, f"course_{prefix}_{split}_out")))
    return rest + extra, outputs


def _data_dir(course, rest: list) -> list:
    """--data-dir for the course's input flags: one folder holding every named file under the course's name."""
    folders = set()
    for prefix, task in COURSE_TASKS.items():
        for split in SPLITS:
            path = getattr(course, f"course_{prefix}_{split}")
            if path is None:
                continue
            expected = get_task(task).files[split]
            if Path(path).name != expected:
                raise UserError(f"--{prefix}_{split} {path}: this project reads each task's files by the course's "
                                f"names from one folder; name it {expected}")
            folders.add(str(Path(path).parent))
    if not folders:
        return []
    if len(folders) > 1:
        raise UserError(f"the course's input files are in {len(folders)} folders ({', '.join(sorted(folders))}): "
                        f"this project reads them from one (--data-dir)")
    if _given(rest, "--data-dir"):
        raise UserError("--data-dir and the course's input flags both name the data folder: give one")
    return ["--data-dir", folders.pop()]


def main(argv=None) -> int:
    """The course's flags translated (a mistake there: one line, exit 2), then the training command."""
    return run_command(sys.argv[1:] if argv is None else list(argv), translate,
                       lambda translated: train_command(translated[0], outputs=translated[1]))


if __name__ == "__main__":
    sys.exit(main())

"""`ensemble.py`'s options and run, as a library: `train_multitask.py --seeds` ensembles its seeds through
`ensemble_runs` here, the same code."""
from __future__ import annotations

import argparse
from typing import Optional

from ..course.submission import course_predictions_dir
from ..data import DATA_DIR_ENV
from ..machine import resolve_device
from .build import build_ensemble


def add_ensemble_args(parser: argparse.ArgumentParser) -> None:
    """The options of an ensemble's building (its runs and folder are the command's own)."""
    inputs = parser.add_argument_group("members' files")
    inputs.add_argument("--data-dir", default=None,
                        help=f"folder with the course's csv files: the dev labels, and the files a run without "
                             f"score files is predicted on (default: the folder the runs read if it is still there, "
                             f"else ${DATA_DIR_ENV}, else data/); each file must be the one the runs read (sha256)")
    inputs.add_argument("--device", default="auto",
                        help="where a run without score files is predicted: auto, cpu, cuda, cuda:1 ... "
                             "(default: %(default)s)")


def ensemble_runs(runs, out, data_dir=None, device: str = "auto", predictions_dir: Optional[str] = None,
                  command=None) -> None:
    """Build the ensemble and print what it says (ensemble.py, and train_multitask.py --seeds)."""
    made = build_ensemble(runs, out, data_dir, resolve_device(device), course_predictions_dir(predictions_dir),
                          publish_always=predictions_dir is not None, command=command)
    for line in made.lines:
        print(line, flush=True)


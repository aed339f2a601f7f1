"""`search.py`'s options: its own flags, the trainer's flags it passes to every trial, parsed into one value.

Every flag that is not the search's own is `train_multitask.py`'s, fixed for every trial (a parameter of the
space given this way is not searched).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError

from ..training import parse_train_command
from .space import SPACE, searched

PRUNERS = ("median", "hyperband", "none")   # study.py's pruner() builds each
DEFAULTS = {"pruner": "median", "seed": 0, "study": "search", "trials": 20, "heartbeat": 60.0,
            "retries": 2}   # a resumed search keeps its recorded ones
OWN_FLAGS_OF_THE_TRAINER = ("--resume", "--submission")   # a search's trials are its own runs

EPILOG = """Every other flag is train_multitask.py's (python train_multitask.py --help), the same for every trial:
--model, --tasks, --max-steps, --data-fraction, --seed ... A flag of a searched parameter fixes it.
Searched (tasks/search/space.py, the trainer's default in brackets):
""" + "\n".join(f"  {p.flag:<14} [{'by the trainer' if p.default is None else p.default}]  "
                + (f"{', '.join(map(str, p.choices))}" if hasattr(p, "choices") else
                   f"{p.low:g} .. {p.high:g}{' (log scale)' if p.log else ''}") for p in SPACE)


@dataclass(frozen=True)
class SearchCommand:
    """The parsed command line: the search's options and the trainer's flags it fixes."""
    out: Path
    trials: Optional[int]
    pruner: Optional[str]        # None (not given): the search's recorded one, else DEFAULTS'
    seed: Optional[int]
    study: Optional[str]
    storage: Optional[str]       # None: the one its record names, else SQLite in `out`
    workers: int
    heartbeat: Optional[float]   # None: the search's recorded one (the beat its trials keep), else DEFAULTS'
    retries: Optional[int]
    best: bool
    predictions_dir: Optional[str]
    fixed: tuple                 # the trainer's flags; none given: a resumed search's recorded ones

    @property
    def space(self) -> tuple:
        return searched(self.fixed)


def positive(kind):
    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return value
    convert.__name__ = kind.__name__
    return convert


def search_parser(description: Optional[str] = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, epilog=EPILOG, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    search = parser.add_argument_group("search")
    search.add_argument("--out", required=True, metavar="SEARCH",
                        help="the search's folder: its record (search.json), its SQLite study, trials/NNNN (one run "
                             "folder per trial), search.png and tensorboard/; the same command again resumes it")
    search.add_argument("--trials", type=positive(int), default=None,
                        help=f"finished trials (complete or pruned) the search ends with, counted over every process "
                             f"working on its study; a larger number extends a finished search (default: "
                             f"{DEFAULTS['trials']}; a resumed search: its own)")
    search.add_argument("--pruner", choices=PRUNERS, default=None,
                        help=f"stop a poor trial early from its dev overall at each evaluation: median (below the "
                             f"median of the trials before it at the same evaluation), hyperband, or none "
                             f"(default: {DEFAULTS['pruner']}; a resumed search: its own)")
    search.add_argument("--search-seed", dest="seed", type=int, default=None,
                        help=f"the TPE sampler's seed (each trial's draw: this and its number) "
                             f"(default: {DEFAULTS['seed']}; a resumed search: its own)")
    search.add_argument("--study", default=None,
                        help=f"the study's name in its storage (default: {DEFAULTS['study']}; a resumed search: "
                             f"its own)")
    where = parser.add_argument_group("storage and workers")
    where.add_argument("--storage", default=None, metavar="URL|FILE",
                       help="where the study is: a database URL (sqlite:///..., postgresql://...) or a path, an "
                            "Optuna journal file (safe on a shared file system: many machines, e.g. a job array, "
                            "each running the same command, work on one study) (default: SQLite, SEARCH/study.db)")
    where.add_argument("--workers", type=positive(int), default=1,
                       help="processes on this machine drawing and training trials side by side, the CPU's threads "
                            "shared among them (default: %(default)s)")
    where.add_argument("--heartbeat", type=positive(float), default=None, metavar="S",
                       help=f"a running trial's sign of life every S seconds; one silent for 2 x S (its process "
                            f"killed) is marked failed and its parameters retried (default: {DEFAULTS['heartbeat']:g}; "
                            f"a resumed search: its own)")
    where.add_argument("--retries", type=int, default=None,
                       help=f"how often a killed trial's parameters are retried (default: {DEFAULTS['retries']}; a "
                            f"resumed search: its own)")
    output = parser.add_argument_group("output")
    output.add_argument("--best", action="store_true",
                        help="train nothing: print the best trial's run folder and its dev scores")
    output.add_argument("--predictions-dir", default=None, metavar="DIR",
                        help="at the end, copy the best trial's prediction files into this course-level folder, "
                             "which prepare_submit.py zips, where the best is a complete run ('' = do not copy) "
                             "(default: $MINBERT_PREDICTIONS_DIR, else predictions/)")
    return parser


def parse_search_command(argv, parser: Optional[argparse.ArgumentParser] = None) -> SearchCommand:
    """The search `argv` asks for; the trainer's flags checked by the trainer's own parser."""
    parser = parser or search_parser()
    args, fixed = parser.parse_known_args(argv)
    for flag in OWN_FLAGS_OF_THE_TRAINER:
        if any(a == flag or a.startswith(flag + "=") for a in fixed):
            raise UserError(f"{flag}: not for a search (each trial is a run of its own; the same search.py "
                            f"command again resumes the search)")
    parse_train_command(fixed)  # an unknown or bad trainer flag: argparse's usage line or one line, exit 2
    return SearchCommand(Path(args.out), args.trials, args.pruner, args.seed, args.study, args.storage,
                         args.workers, args.heartbeat, args.retries, args.best, args.predictions_dir, tuple(fixed))

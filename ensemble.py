"""Average finished runs into one ensemble and write it as the course's prediction files.

    python ensemble.py runs/seed-0 runs/seed-1 runs/seed-2 --out runs/ensemble
    python prepare_submit.py --predictions-dir runs/ensemble     # the ensemble's files, zipped for the course

Each run's class probabilities (SST, any classification task), P(1) (Quora) and
predicted scores (STS, any regression task) are averaged with equal weight, from
the score files a run writes beside its prediction files (RUN/predictions/scores/;
a run older than them has them computed from its weights). The prediction is the
most probable class, P(1) > 0.5, or the mean score. --out receives:

  predictions/*.csv          the course's dev and test files, as its own writers format them
  predictions/scores/        the averaged scores (an ensemble's score files)
  predictions/sources.json   the files' provenance, which prepare_submit.py reads
  metrics.json               every member's and the ensemble's dev figures, per task and the course's overall
  ensemble.json              the members: path, config.json's sha256, seed, model, status

Refused before anything is written (one line naming the run, exit 2): no runs, a
missing or unfinished run, runs of different tasks, label sets, dev or test files
(by sha256) or tokenizers, and an --out holding anything but this same ensemble.
Runs of different recipes (learning rate, pair mode, training files, seed) are
what an ensemble mixes. A member the course would not accept (a smoke or partial
run, the embedded fallback model) is averaged with a warning, and prepare_submit.py
refuses the ensemble as it refuses that run. A complete ensemble copies its files
into the course-level folder, as a complete run does.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import sys

from tasks.cli import run_command
from tasks.course.submission import PREDICTIONS_DIR_ENV
from tasks.ensemble import add_ensemble_args, ensemble_runs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="finished run folders of train_multitask.py, averaged with equal weight")
    out = parser.add_argument_group("output")
    out.add_argument("--out", required=True, metavar="DIR",
                     help="the ensemble's folder: new, empty, or this same ensemble's (written again)")
    out.add_argument("--predictions-dir", default=None, metavar="DIR",
                     help=f"the course-level folder a complete ensemble copies its prediction files to, as a "
                          f"complete run does; named, even an incomplete one's (default: ${PREDICTIONS_DIR_ENV}, "
                          f"else predictions/; '' for none)")
    add_ensemble_args(parser)
    return parser


def run(args) -> None:
    ensemble_runs(args.runs, args.out, args.data_dir, args.device, args.predictions_dir, sys.argv)


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


if __name__ == "__main__":
    sys.exit(main())

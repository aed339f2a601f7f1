"""Zip the code and the prediction files for the course's Gradescope submission.

    python prepare_submit.py                      # predictions/ -> cs224n_default_final_project_submission.zip

As the course's own prepare_submit.py: every top-level .py file and every file
of predictions/, plus this project's packages (minbert/, tasks/) and a
manifest naming the run each prediction file came from. It lists the zip's
entries, says which of the 14 expected prediction files are missing and warns
when one part's files come from different runs.
"""
import argparse
import sys
from pathlib import Path

from minbert import UserError
from tasks.cli import exit_status
from tasks.course.submission import PREDICTIONS_DIR_ENV, SUBMISSION_ZIP, course_predictions_dir, make_submission

REPO = Path(__file__).resolve().parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--predictions-dir", default=None, metavar="DIR",
                        help=f"the course-level prediction folder (default: ${PREDICTIONS_DIR_ENV}, else "
                             f"predictions/)")
    parser.add_argument("--out", default=SUBMISSION_ZIP, help="the zip to write (default: %(default)s)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    folder = course_predictions_dir(args.predictions_dir or None)
    try:
        path, names, lines = make_submission(args.out, REPO, folder)
    except UserError as e:
        return exit_status(e)
    for name in names:
        print(f"  {name}")
    for line in lines:
        print(line, file=sys.stderr)
    print(f"Submission zip file created: {path} ({len(names)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

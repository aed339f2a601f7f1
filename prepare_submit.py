"""Zip the code and the prediction files for the course's Gradescope submission.

    python prepare_submit.py                             # predictions/ -> cs224n_default_final_project_submission.zip
    python prepare_submit.py --allow fallback-model      # hand in what it refused, on purpose

As the course's own prepare_submit.py: every top-level .py file and every file
of predictions/, plus this project's packages (minbert/, tasks/) and a
manifest naming, per prediction file, its run, model, steps and dev score.
It first prints a table of what goes in, read from each file's provenance
(predictions/sources.json, written when a run publishes its files). It
refuses (exit 2, one line per problem, nothing written) a file the course
would not accept:

  smoke            a run stopped early by --max-steps
  partial-data     a run on --data-fraction < 1
  interrupted      a run that trained fewer steps than planned
  fallback-model   the embedded all-MiniLM-L6-v2: for trying the tool, never for handing in
  other-model      any model but the course's bert-base-uncased (the course allows no other)
  unknown-origin   a file no run of this project wrote, or changed since
  mixed-spellings  Part 1 files of both the 2023 (pretrain-*) and 2024 (last-linear-layer-*) spellings

--allow KIND,... hands such files in on purpose; the manifest records what was allowed.
An ensemble (ensemble.py) is judged by its members: it is refused for what any
of them would be refused for.
"""
import argparse
import sys
from pathlib import Path

from tasks.cli import run_command
from tasks.course.provenance import REFUSALS, parse_allow
from tasks.course.submission import (
    PREDICTIONS_DIR_ENV,
    SUBMISSION_ZIP,
    SubmissionRefused,
    course_predictions_dir,
    make_submission,
)

REPO = Path(__file__).resolve().parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    files = parser.add_argument_group("files")
    files.add_argument("--predictions-dir", default=None, metavar="DIR",
                       help=f"the course-level prediction folder, or an ensemble's folder (ensemble.py --out) "
                            f"(default: ${PREDICTIONS_DIR_ENV}, else predictions/)")
    files.add_argument("--out", default=SUBMISSION_ZIP, help="the zip to write (default: %(default)s)")
    checks = parser.add_argument_group("checks")
    checks.add_argument("--allow", default=None, metavar="KIND,...",
                        help=f"hand in files of these kinds anyway, recorded in the manifest: {', '.join(REFUSALS)}")
    return parser


def main(argv=None) -> int:
    return run_command(argv, build_parser().parse_args, run)


def run(args) -> int:
    folder = course_predictions_dir(args.predictions_dir or None)
    try:
        path, names, table, warnings = make_submission(args.out, REPO, folder, parse_allow(args.allow))
    except SubmissionRefused as e:  # every problem on its own line, under the table of what was found
        print("\n".join(e.table))
        for line in e.lines:
            print(f"error: {line}", file=sys.stderr)
        print(f"error: {len(e.lines)} problems; no zip written", file=sys.stderr)
        return 2
    print("\n".join(table))
    for name in names:
        print(f"  {name}")
    for line in warnings:
        print(line, file=sys.stderr)
    print(f"Submission zip file created: {path} ({len(names)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

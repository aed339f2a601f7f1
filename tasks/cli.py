"""What every command line shares: one runner from arguments to an exit status, one line for an error a user
can meet.

A script's `main` is

    def main(argv=None) -> int:
        return run_command(argv, parse_args, run)

where `parse_args(argv)` returns the parsed arguments (argparse's own usage errors exit 2 there, as ever) and
`run(args)` does the work and returns the exit status (None counts as 0). `run_command` turns what can go
wrong into the exit status, so no script writes its own try/except:

    UserError (a user's mistake: a bad option, a missing file, a wrong checkpoint)   "error: ..."   2
    RunFailure (the run failed: a non-finite loss, a full disk)                       "error: ..."   1
    an exception in `stops`, with an `exit_code` (a signal stopped training, its
        checkpoint saved: tasks.training.Interrupted)                                 its message    128 + signal
    KeyboardInterrupt (Ctrl-C before training started, or a second one)               `interrupted(args)`  130

Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from minbert import RunFailure, UserError


def exit_status(error: Exception) -> int:
    """Print one line for an error a user can meet and return the command's exit status.

    UserError (bad input): 2. RunFailure (non-finite loss, disk full): 1.
    An interruption (SIGINT/SIGTERM, checkpoint saved): 128 + the signal.
    """
    print(f"error: {error}" if isinstance(error, (UserError, RunFailure)) else str(error), file=sys.stderr)
    if isinstance(error, UserError):
        return 2
    if isinstance(error, RunFailure):
        return 1
    return getattr(error, "exit_code", 1)


def _interrupted(args) -> str:
    return "interrupted"


def interrupted_resumable(folder, marker: str) -> str:
    """Ctrl-C's line for a command that resumes: how to, where `folder/marker` shows a run to continue."""
    resumable = folder is not None and (Path(folder) / marker).exists()
    return "interrupted" + (f"; resume with --resume {folder}" if resumable else "")


def run_command(argv: Optional[Sequence[str]], parse: Callable[[Optional[Sequence[str]]], Any],
                run: Callable[[Any], Optional[int]], *, stops: tuple = (),
                interrupted: Callable[[Any], str] = _interrupted) -> int:
    """`run(parse(argv))`'s exit status, with a user's mistake, a failed run and an interruption turned into one
    line on stderr and their exit statuses (the table in this module's docstring).

    `stops`: the exception types that stop a run on a signal (`tasks.training.Interrupted`, which this module
    cannot import: the training loop is above it); each carries its `exit_code`. `interrupted(args)`: the line
    printed on Ctrl-C outside training (`args` is None if it came while parsing), e.g. how to resume.
    """
    args = None
    try:
        args = parse(argv)
        status = run(args)
        return 0 if status is None else status
    except (UserError, RunFailure, *stops) as e:
        return exit_status(e)
    except KeyboardInterrupt:
        print(interrupted(args), file=sys.stderr)
        return 130

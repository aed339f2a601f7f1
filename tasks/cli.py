"""What every command line shares: one line and an exit status for an error a user can meet."""
import sys

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

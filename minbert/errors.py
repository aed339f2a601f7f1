"""One exception family for every mistake a user can make.

Command lines catch `UserError` and print its message as one line with exit
status 2; anything else is a bug and keeps its traceback.
"""
import json
from pathlib import Path


class UserError(Exception):
    """A problem with the user's input (files, arguments), not with the code."""


class CheckpointError(UserError):
    """A checkpoint folder or file that cannot be loaded as asked."""


class DataError(UserError):
    """A dataset file that cannot be used."""


class RunFailure(Exception):
    """A run that had to stop (non-finite loss, disk full); its last good checkpoint is kept.

    Command lines print the message as one line and exit with status 1.
    """


def read_json(path: Path, error: type = UserError, what: str = "file"):
    """The JSON value in `path`; a missing, unreadable or malformed file is one line of `error` naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise error(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror or e})") from None

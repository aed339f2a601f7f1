"""One exception family for every mistake a user can make.

Command lines catch `UserError` and print its message as one line with exit
status 2; anything else is a bug and keeps its traceback.
"""


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

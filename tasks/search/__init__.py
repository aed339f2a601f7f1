"""A search over the training recipe (`search.py`), on Optuna: each trial an ordinary run of the trainer.

    space.py     the parameters searched, each with the trainer's default beside it (the one place to add one)
    study.py     the study: its storage (SQLite in the search's folder, a journal file, a database URL), the
                 seeded TPE sampler, the pruner, the heartbeat that finds a killed trial and retries it
    trial.py     one trial: its flags, the trainer's own command on a run folder, the dev score reported at
                 each evaluation (the pruner's input), what its folder says it was
    figures.py   search.png (history and parameter importances) and the trials in TensorBoard's hparams view
    options.py   search.py's options, and the trainer's flags it passes to every trial
    command.py   search.py's command: parse, then search or print the best trial
    work.py      a search as it runs: its record, each process's loop, the workers, the best trial published

Optuna is an optional library (requirements-search.txt): only this package imports it, and only once a
search runs (`require_optuna`), so `search.py --help` and the rest of the project work without it.
"""
from minbert import UserError

REQUIREMENTS = "requirements-search.txt"


def require_optuna():
    """The optuna module, or one line saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise UserError(f"search.py needs Optuna, which is not installed: pip install -r {REQUIREMENTS}") from None
    return optuna

"""`search.py`'s command, as a library: parse (options.py), then search or print the best trial (work.py, which
imports Optuna: loaded only once a search runs, after `require_optuna` has said how to install it if missing).

    search.py --out S --trials 12 --max-steps 400        # TPE over space.py, the median pruner, SQLite in S/
    search.py --out S                                    # after a kill: it resumes, as it was started
    search.py --out S --best                             # the best trial's run folder
"""
from __future__ import annotations

from typing import Optional

from ..cli import run_command
from . import require_optuna
from .options import SearchCommand, parse_search_command, search_parser


def search_command(argv=None, description: Optional[str] = None) -> int:
    """search.py: parse, search (or --best), print the outcome; the exit status (tasks.cli.run_command)."""
    return run_command(argv, lambda given: parse_search_command(given, search_parser(description)), run)


def run(command: SearchCommand) -> int:
    require_optuna()
    from . import work  # imports Optuna
    return work.best(command) if command.best else work.search(command)

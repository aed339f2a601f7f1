"""Search the training recipe with Optuna: TPE over learning rate, epochs, batch size, warm-up, dropout,
pooling, pair mode and task sampler (tasks/search/space.py), poor trials pruned early, each trial an
ordinary run folder of train_multitask.py.

    python search.py --out searches/s1 --trials 12 --max-steps 400 --data-fraction 0.3
    python search.py --out searches/s1                       # resume after a kill: no trial lost or repeated
    python search.py --out searches/s1 --best                # the best trial's run folder
    python search.py --out S --storage /shared/S.journal ... # many machines (a job array) on one study

Needs Optuna: pip install -r requirements-search.txt.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import sys

from tasks.search.command import search_command


def main(argv=None) -> int:
    """The command (tasks/search/command.py); its exit status."""
    return search_command(argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())

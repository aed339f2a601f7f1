"""A linear probe fitted to convergence on frozen features, its regularisation chosen on held-out training data.

Classification: multinomial logistic regression (L2, lbfgs); regression:
ridge regression (exact solution). Features are standardised with the
training part's mean and spread, so one penalty grid fits every layer,
whatever its scale (the embeddings' output and the top layer differ by an
order of magnitude). A penalty `lam` is the L2 weight against the summed loss
of the training examples: logistic regression's C = 1 / lam, ridge's alpha = lam.

Protocol: a seeded `holdout` share of the training examples is set aside;
the probe is fitted on the rest at each penalty and scored on it with the
task's metric; the best penalty (the strongest one on a tie) is refitted on
every training example and scored on dev. A fit that stops at `MAX_ITER`
iterations before lbfgs's tolerance is met is reported as not converged.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ....metrics import compute_metric

PENALTIES = (1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4)
HOLDOUT = 0.2
MAX_ITER = 5000
TOLERANCE = 1e-6


@dataclass
class ProbeFit:
    dev: float                       # the task's metric on dev, of the probe refitted on all training examples
    penalty: float                   # the penalty chosen on the held-out part
    holdout: dict                    # penalty -> the metric on the held-out part
    converged: bool                  # every fit reached lbfgs's tolerance (ridge: always)
    iterations: int                  # of the final fit (0 for ridge)
    model: object = field(repr=False, default=None)  # the final sklearn pipeline (scaler, estimator)


def make_probe(kind: str, penalty: float, seed: int = 0):
    """A standardising scaler and a "logistic" (classes) or "ridge" (scores) estimator, unfitted: `kind` is the
    task's head kind's `probe` (tasks/head_kinds.py)."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    if kind == "ridge":
        estimator = Ridge(alpha=penalty)
    else:
        estimator = LogisticRegression(C=1.0 / penalty, max_iter=MAX_ITER, tol=TOLERANCE, random_state=seed)
    return make_pipeline(StandardScaler(), estimator)


def _fit(kind: str, penalty: float, x: np.ndarray, y: np.ndarray, seed: int):
    """The fitted pipeline and whether the estimator converged.

    BLAS runs on one thread: lbfgs makes thousands of small matrix products, and OpenBLAS threads spin for a
    core another job holds (measured here: 40 examples x 384 features, 8 fits, 67 s on two threads of a loaded
    machine, 4 s on one).
    """
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits
    probe = make_probe(kind, penalty, seed)
    with warnings.catch_warnings(record=True) as caught, threadpool_limits(1, user_api="blas"):
        warnings.simplefilter("always", ConvergenceWarning)
        probe.fit(x, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return probe, converged


def fit_probe(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, dev_y: np.ndarray, kind: str,
              metric: str, penalties=PENALTIES, holdout: float = HOLDOUT, seed: int = 0) -> ProbeFit:
    """Choose the penalty on a held-out share of train, refit on all of train, score on dev.

    `kind` is "logistic" (labels are classes) or "ridge" (labels are scores): the head kind's `probe`.
    """
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    n = len(train_y)
    order = np.random.default_rng(seed).permutation(n)
    n_held = min(n - 1, max(1, round(n * holdout)))
    held, kept = order[:n_held], order[n_held:]
    if kind == "logistic" and len(np.unique(train_y[kept])) < 2:
        raise ValueError(f"the {len(kept)} training examples left after the hold-out have one class only")
    scores, all_converged = {}, True
    for penalty in sorted(penalties, reverse=True):  # strongest first: a tie keeps the simpler probe
        probe, converged = _fit(kind, penalty, train_x[kept], train_y[kept], seed)
        all_converged &= converged
        scores[penalty] = compute_metric(metric, probe.predict(train_x[held]), train_y[held])
    best = max(scores, key=lambda p: (scores[p], p))
    probe, converged = _fit(kind, best, train_x, train_y, seed)
    iterations = int(np.max(getattr(probe[-1], "n_iter_", 0) or 0))
    return ProbeFit(dev=compute_metric(metric, probe.predict(dev_x), dev_y), penalty=best, holdout=scores,
                    converged=all_converged and converged, iterations=iterations, model=probe)

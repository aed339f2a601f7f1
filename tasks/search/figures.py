"""What a search shows: search.png (each trial's dev overall by trial number, the best so far, and the
parameters' importances) and each finished trial in TensorBoard's hparams view (SEARCH/tensorboard)."""
from __future__ import annotations

import io
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ..fileio import atomic_write_bytes

FIGURE = "search.png"
TENSORBOARD = "tensorboard"


def add_hparams(out: Path, number: int, params: dict, state: str, value) -> None:
    """Trial `number` as one row of the hparams view: its drawn parameters, its state and its dev overall."""
    from torch.utils.tensorboard import SummaryWriter  # loads only when a trial has finished
    shown = {name: ("default" if v is None else v) for name, v in params.items()}
    with SummaryWriter(str(Path(out) / TENSORBOARD)) as writer:
        writer.add_hparams({**shown, "state": state}, {"hparam/dev_overall": float("nan") if value is None else value},
                           run_name=f"trial-{number:04d}")


def importances(study) -> dict:
    """Each parameter's share of the variance in dev overall (Optuna's fANOVA), over the complete trials;
    empty while too few have finished to say."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return {}
    try:
        return optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError):  # every trial drew the same values, or too few differ
        return {}


def draw(study, out: Path) -> Path:
    """search.png: the history (complete trials as dots, pruned as crosses, the best so far as a line) and the
    importances."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, (history, weights) = plt.subplots(1, 2, figsize=(11, 4))
    best, line = None, []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        if trial.value is None:
            continue
        complete = trial.state == TrialState.COMPLETE
        history.scatter(trial.number, trial.value, marker="o" if complete else "x", color="C0" if complete else "C3")
        if complete and (best is None or trial.value > best):
            best = trial.value
        if best is not None:
            line.append((trial.number, best))
    if line:
        history.step(*zip(*line), where="post", color="C2", label="best so far")
        history.legend(loc="lower right")
    history.xaxis.set_major_locator(MaxNLocator(integer=True))
    history.set(xlabel="trial", ylabel="dev overall", title="history (o complete, x pruned)")
    shares = importances(study)
    if shares:
        names = list(shares)[::-1]
        weights.barh(names, [shares[n] for n in names])
        weights.set(xlabel="importance (fANOVA)", title="parameter importances")
    else:
        weights.text(0.5, 0.5, "too few complete trials\nfor importances", ha="center", va="center")
        weights.set_axis_off()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return atomic_write_bytes(Path(out) / FIGURE, buffer.getvalue())  # processes that finish together take turns

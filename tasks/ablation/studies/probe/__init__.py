"""probe: converged linear probes on the frozen features of each layer of the pretrained model.

Linear probing of each layer's representations, the probing curve of Tamkin et al.
(2020), "Investigating Transferability in Pretrained Language Models": the
pretrained encoder is frozen, the sentence features of every layer are
extracted once (layer 0 = the embeddings' output; the [CLS] state "cls-token"
and the mean of the real tokens "mean"; `features.py` here), and a linear
model is fitted on them to convergence with scikit-learn: logistic regression
for classification, ridge regression for scores, its L2 penalty chosen on a
held-out share of the training data (`--probe-penalties`, `--probe-holdout`),
then refitted on all of it and scored on dev (`linear_probe.py` here). Each results line
keeps the chosen penalty's held-out score (info.holdout_score): the best layer is to be chosen on
it, on training data, not on the dev score it is then reported with.
The fine-tuning options (--epochs, --lr, ...) do not apply: nothing is trained
by gradient descent. Control: the full-depth model with every layer re-drawn at
BERT's initialisation (seeded by the trial's seed), probed the same way (what
the architecture and the pretrained embeddings alone give). A seed also draws
the --data-fractions subset and the held-out share. `--reinit-sweep DIR` draws
a reinit sweep's curve on the same axes (Tamkin et al., Fig. 2).
"""
import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

import minbert
from minbert import UserError

from ....inputs import subsample_split
from ....metrics import overall_score
from ....registry import get_task
from ...arguments import int_list, number_list, share
from ...drawing import errorbar, find, fractions_of, legend, metric_axis, new_figure, title
from ...study import Shape, Study, drawn, grid, planned
from ...summary import SUMMARY
from .features import FEATURE_POOLINGS, layer_features
from .linear_probe import HOLDOUT, PENALTIES, fit_probe


def penalty_list(text: str) -> list:
    return number_list(text, lambda value: value > 0, "must be > 0 (an L2 penalty)")


def add_arguments(group):
    group.add_argument("--layers", type=int_list, default=None, metavar="K,...",
                       help="probe on layer K (K = 0: the embeddings' output) (default: every layer)")
    group.add_argument("--probe-penalties", type=penalty_list, default=list(PENALTIES), metavar="L,...",
                       help="L2 penalties tried, against the summed loss (logistic C = 1/L, ridge alpha = L) "
                            "(default: " + ",".join(f"{p:g}" for p in PENALTIES) + ")")
    group.add_argument("--probe-holdout", type=share, default=HOLDOUT, metavar="SHARE",
                       help="share of the training examples held out to choose the penalty (default: %(default)s)")
    group.add_argument("--reinit-sweep", default=None, metavar="DIR",
                       help="a reinit sweep's folder (its summary.csv): draw its fine-tuning curve, layers >= k "
                            "reinitialised, on the probe plot's axes (Tamkin et al., Fig. 2)")


@dataclass(frozen=True)
class Options:
    layers: Optional[tuple] = planned()         # None: every layer
    probe_penalties: tuple = PENALTIES          # L2 penalties tried
    probe_holdout: float = HOLDOUT              # share held out to choose the penalty
    reinit_sweep: Optional[str] = drawn()       # a reinit sweep's folder, drawn on the probe plot


def trials(config, shape: Shape) -> list:
    """Probe each layer k with each pooling, plus the all-reinitialised model's top layer as the control."""
    options = config.options
    n = shape.num_layers
    ks = options.layers if options.layers is not None else range(n + 1)
    for k in ks:
        if k > n:
            raise UserError(f"--layers {k}: the model has {n} layers (k in 0..{n}; 0 = the embeddings)")
    configs = [(f"layer={k},pooling={p}", {"layer": k, "pooling": p, "control": False})
               for k in ks for p in FEATURE_POOLINGS]
    configs += [(f"layer={n},pooling={p},random", {"layer": n, "pooling": p, "control": True})
                for p in FEATURE_POOLINGS]
    return grid("probe", configs, config.seeds, config.fractions)


def run(sweep, trial) -> dict:
    """Fit the trial's probe on each task's features; the features come from `features`, extracted once."""
    p = trial.params
    dev, info = {}, {"penalty": {}, "holdout": {}, "holdout_score": {}, "converged": True, "train_examples": {},
                     "feature_seconds": 0.0}
    for task in sweep.inputs.tasks:
        cfg = get_task(task)
        (train, t1), (held_out, t2) = (features(sweep, trial, task, split) for split in ("train", "dev"))
        fitted = fit_probe(train["x"][p["pooling"]][p["layer"]], train["y"], held_out["x"][p["pooling"]][p["layer"]],
                           held_out["y"], cfg.kind.probe, cfg.metric,
                           sweep.options.probe_penalties, sweep.options.probe_holdout, seed=trial.seed)
        dev[task] = fitted.dev
        info["penalty"][task] = fitted.penalty
        info["holdout"][task] = {f"{k:g}": v for k, v in fitted.holdout.items()}
        info["holdout_score"][task] = fitted.holdout[fitted.penalty]  # where the best layer is chosen, not on dev
        info["converged"] &= fitted.converged
        info["train_examples"][task] = len(train["y"])
        info["feature_seconds"] = round(info["feature_seconds"] + t1 + t2, 1)
    if not info["converged"]:
        print(f"warning: {trial.label}: a probe stopped at its iteration limit before converging", flush=True)
    dev["overall"] = overall_score(dev)
    info["holdout_score"]["overall"] = overall_score({t: info["holdout_score"][t] for t in sweep.inputs.tasks})
    return {"best": dev, "final": dev, "steps": 0, "info": info}


def features(sweep, trial, task: str, split: str) -> tuple:
    """({"x": pooling -> (layers + 1, examples, width), "y": labels}, seconds spent extracting) of the trial's
    encoder on `split` (train: the trial's seeded fraction).

    Extracted once and kept while the trials that use it run (the plan puts a seed's and fraction's trials
    together): the pretrained model's dev features for the whole sweep, the others until another encoder or
    training subset is needed.
    """
    model = ("control", trial.seed) if trial.params["control"] else ("pretrained",)
    subset = (trial.fraction, trial.seed if trial.fraction < 1 else None)  # the training examples it sees
    key = (model, task, split, subset if split == "train" else None)
    cache = sweep.cache.setdefault("probe_features", {})
    if key in cache:
        return cache[key], 0.0
    for old in [k for k in cache if not _still_needed(k, model, subset)]:
        del cache[old]
    part = sweep.inputs.data[task][split]
    if split == "train":
        part = subsample_split(part, trial.fraction, trial.seed)
    started = time.perf_counter()
    x = layer_features(encoder(sweep, trial), part, sweep.inputs.tokenizer, sweep.inputs.device,
                       sweep.training.eval_batch_size, sweep.inputs.precision)
    cache[key] = {"x": x, "y": part.labels.numpy()}
    return cache[key], time.perf_counter() - started


def _still_needed(key: tuple, model: tuple, subset) -> bool:
    """Whether cached features may serve a coming trial: the pretrained model's dev features always, others while
    trials of the same encoder (and, for train, the same subset) run."""
    cached_model, _, split, cached_subset = key
    if cached_model == ("pretrained",) and split == "dev":
        return True
    return cached_model == model and (split == "dev" or cached_subset == subset)


def encoder(sweep, trial) -> minbert.BertModel:
    """The pretrained encoder, or the control: every layer re-drawn with the trial's seed (kept for its trials)."""
    if not trial.params["control"]:
        return sweep.inputs.encoder
    cached = sweep.cache.get("probe_control")
    if cached is None or cached[0] != trial.seed:
        model = minbert.reinit_layers_from(sweep.pretrained_copy(), 0, torch.Generator().manual_seed(trial.seed))
        sweep.cache["probe_control"] = cached = (trial.seed, model)
    return cached[1]


def reinit_rows(folder) -> list:
    """The "layers >= k reinitialised" rows of a reinit sweep's summary.csv, shaped as summary rows."""
    path = Path(folder) / SUMMARY
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise UserError(f"--reinit-sweep {folder}: cannot read {SUMMARY} ({e.strerror or e})") from None
    out = []
    for r in rows:
        label = r.get("config", "")
        if r.get("mode") != "reinit" or not label.startswith("from=") or "," in label:
            continue
        number = lambda c: float(r[c]) if r.get(c) not in (None, "") else None  # noqa: E731
        out.append({"config": label, "metric": r["metric"], "data_fraction": float(r["data_fraction"]),
                    "n": int(r["n"]), "mean": float(r["mean"]), "ci95_low": number("ci95_low"),
                    "ci95_high": number("ci95_high"), "params": {"scheme": "from", "from": int(label[5:])}})
    return out


POOLED_FEATURES = {"cls-token": "[CLS] state of layer k", "first": "[CLS] state of layer k",
                   "mean": "mean-pooled layer k"}


def probe_panel(ax, rows, fractions: list, num_layers: int, finetuned: list) -> None:
    """One pooling's panel: per data fraction (a colour each, the same in every panel), the probe per layer,
    the full and the all-reinitialised model's probes as lines, and the fine-tuned curve of `finetuned`."""
    for i, fraction in enumerate(fractions):
        mine = [r for r in rows if r["data_fraction"] == fraction]
        errorbar(ax, [r for r in mine if not r["params"]["control"]], lambda r: r["params"]["layer"],
                  color=f"C{i}", marker="o", label=f"probe, data fraction {fraction:g}")
        full = find(mine, lambda p: p["layer"] == num_layers and not p["control"])
        control = find(mine, lambda p: p["control"])
        for row, style, what in ((full, "--", "probe on the full pretrained model"),
                                 (control, "-.", "probe, all layers reinitialised")):
            if row is not None:
                ax.axhline(row["mean"], color=f"C{i}", linestyle=style, linewidth=1, alpha=0.8,
                           label=f"{what} ({fraction:g})")
        tuned = [r for r in finetuned if r["data_fraction"] == fraction]
        if tuned:
            errorbar(ax, tuned, lambda r: r["params"]["from"], color=f"C{i}", marker="s", linestyle=":",
                      label=f"fine-tuned, layers >= k reinitialised ({fraction:g})")
    ax.set_xticks(range(num_layers + 1))
    ax.set_xlabel("k: pretrained layers kept (probe: features of layer k; 0 = embeddings)")
    legend(ax)


def probe_curve(rows, metric: str, num_layers: int, finetuned=None):
    """Linear-probe metric per layer, one panel per pooling; dashed: the full and an all-reinitialised model.

    `finetuned`: a reinit sweep's summary rows; its "layers >= k reinitialised, then fine-tuned" curve is drawn
    on the same axes (k pretrained layers kept in both), as Tamkin et al. (2020) overlay them in Fig. 2.
    """
    rows = [r for r in rows if r["metric"] == metric and "pooling" in r["params"]]
    if not rows:
        return None
    finetuned = [r for r in finetuned or () if r["metric"] == metric and r["params"]["scheme"] == "from"]
    poolings = sorted({r["params"]["pooling"] for r in rows})
    fig = new_figure(figsize=(5.2 * len(poolings), 4.4))
    axes = fig.subplots(1, len(poolings), squeeze=False, sharey=True)[0]
    for ax, pooling in zip(axes, poolings):
        mine = [r for r in rows if r["params"]["pooling"] == pooling]
        probe_panel(ax, mine, fractions_of(rows), num_layers, finetuned)
        ax.set_title(f"probe on the {POOLED_FEATURES.get(pooling, pooling)}", fontsize=9)
        metric_axis(ax, metric)
    title(fig, "Linear probes on frozen pretrained layers" + (" beside fine-tuning" if finetuned else ""), rows)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    finetuned = reinit_rows(sweep.options.reinit_sweep) if sweep.options.reinit_sweep else None
    return {"probe": probe_curve(rows, metric, sweep.shape.num_layers, finetuned=finetuned)}


def note(config):
    return ("probes are fitted by scikit-learn on frozen features: --epochs, --lr and the other fine-tuning "
            "options do not apply")


STUDY = Study(name="probe", Options=Options,
              summary="converged linear probes on each layer's frozen features",
              title="probe (scikit-learn logistic / ridge regression on frozen features of every layer; [CLS] "
                    "and mean pooling)",
              add_arguments=add_arguments, trials=trials, run=run, figures=figures, note=note, trains=False,
              # the features of one encoder and training subset are extracted once for every probe on them
              worker_unit=lambda trial: ("probe", trial.seed, trial.fraction))

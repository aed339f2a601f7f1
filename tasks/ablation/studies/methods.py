"""methods: the multitask model's training methods, each against the same model trained without it.

As Gorti & Thiesmeyer, "Freeze Your Layers" (CS224N default project), compare on the multitask
minBERT: SMART regularisation (`--smart`), gradient surgery (PCGrad, `--surgery pcgrad`; or the
dominant-task variant), and sentence pairs encoded together (cross: one sequence, `[CLS] a [SEP] b
[SEP]`) against apart (siamese: each sentence alone). Protocol: the training options as given are
the baseline (`method=baseline`); each `--methods` entry changes one option from there and is
fine-tuned at the same seeds and fractions, its change paired by seed with the baseline's. A method
the baseline already uses (`siamese` under `--pair-mode siamese`) is the baseline and is not run
twice. A pair mode other than the sweep's re-tokenises the data once (the model and text are the
same; each pair is encoded the other way).
"""
import argparse
import dataclasses
from dataclasses import dataclass
from typing import Optional

from minbert import UserError

from ...config import validate
from ...inputs import prepare
from ..arguments import items
from ..drawing import errorbar, fractions_of, new_figure, pretty, title
from ..study import Shape, Study, grid, planned

# name -> the training options it sets (TrainConfig's fields)
METHODS = {"smart": {"smart": True}, "pcgrad": {"surgery": "pcgrad"}, "dominant": {"surgery": "dominant"},
           "cross": {"pair_mode": "cross"}, "siamese": {"pair_mode": "siamese"}}
DEFAULT_METHODS = ("smart", "pcgrad", "cross", "siamese")


def method_list(text: str) -> list:
    chosen = items(text)
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: not a method (choose from {', '.join(METHODS)})")
    return chosen


def add_arguments(group):
    group.add_argument("--methods", type=method_list, default=None, metavar="NAME,...",
                       help=f"the methods compared with the baseline (the training options as given), each changing "
                            f"one option: smart = --smart, pcgrad / dominant = --surgery, cross / siamese = "
                            f"--pair-mode (default: {','.join(DEFAULT_METHODS)})")


@dataclass(frozen=True)
class Options:
    methods: Optional[tuple] = planned()        # None: DEFAULT_METHODS; each is in its trials' label


def trials(config, shape: Shape) -> list:
    """The baseline, then each method that changes an option of it."""
    training, chosen = config.training, config.options.methods or list(DEFAULT_METHODS)
    if any(m in ("pcgrad", "dominant") for m in chosen) and len(training.task_list) < 2:
        raise UserError("--methods pcgrad/dominant: gradient surgery needs two or more tasks (--task all)")
    configs = [("method=baseline", {"method": "baseline", "changes": {}})]
    for name in chosen:
        changes = METHODS[name]
        if all(getattr(training, k) == v for k, v in changes.items()):
            continue  # the baseline already trains this way
        try:
            validate(dataclasses.replace(training, **changes))
        except UserError as e:
            raise UserError(f"--methods {name}: {e}") from None
        configs.append((f"method={name}", {"method": name, "changes": dict(changes)}))
    return grid("methods", configs, config.seeds, config.fractions)


def run(sweep, trial) -> dict:
    changes = dict(trial.params["changes"])
    inputs = None
    mode = changes.get("pair_mode", sweep.training.pair_mode)
    if mode != sweep.training.pair_mode:  # the pairs encoded the other way, once per sweep
        key = ("pair_mode", mode)
        if key not in sweep.cache:
            sweep.cache[key] = prepare(dataclasses.replace(sweep.training, pair_mode=mode))
        inputs = sweep.cache[key]
    return sweep.fit(trial, sweep.inputs.encoder, inputs=inputs, **changes)


def reference(sweep, params) -> str:
    return None if params["method"] == "baseline" else "method=baseline"


def change_bars(rows, metric: str, mode: str, label: str):
    """Each configuration's paired change from its study's reference, with its 95% interval, per data fraction."""
    rows = [r for r in rows if r["mode"] == mode and r["metric"] == metric and r["change_mean"] is not None]
    if not rows:
        return None
    fractions = fractions_of(rows)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig = new_figure(figsize=(max(4.5, 0.9 * len(configs) + 2.0) * len(fractions), 4.0))
    axes = fig.subplots(1, len(fractions), squeeze=False, sharey=True)[0]
    for ax, fraction in zip(axes, fractions):
        mine = {r["config"]: r for r in rows if r["data_fraction"] == fraction}
        errorbar(ax, [mine[c] for c in configs if c in mine], lambda r: configs.index(r["config"]),
                  value="change_mean", color="k", marker="D", linestyle="none")
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, rotation=20, fontsize=8)
        ax.set_ylabel(f"{label}: {pretty(metric)}")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
    title(fig, f"{mode}: change from the reference", rows)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    return {"methods": change_bars(rows, metric, "methods", "change from the baseline (paired by seed)")}


STUDY = Study(name="methods", Options=Options,
              summary="SMART, gradient surgery, cross vs siamese pairs against the baseline",
              title="methods (each method changes one training option from the baseline: the options as given)",
              add_arguments=add_arguments, trials=trials, run=run, figures=figures, reference=reference)

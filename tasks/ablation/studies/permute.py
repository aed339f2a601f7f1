"""permute: run the pretrained layers in another order, then fine-tune.

Does fine-tuning recover what a shuffled layer order loses? Layer permutation as in
Tamkin et al. (2020), "Investigating Transferability in Pretrained Language Models":
the whole order is permuted and the model fine-tuned. Protocol:
the original order, `--order` if given, `--trials` distinct random orders
drawn with `--permutation-seed`, and the model with every layer re-drawn
(`reinit=all`, embeddings kept), each fine-tuned at every seed. As in their
Fig. 4, the mean over the random orders (`order=*`, each order averaged over
its seeds, the order the unit of its 95% interval) is drawn between the
original order and the fully re-drawn model; its change from the original
order is paired by seed.
"""
import argparse
import math
import random
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import minbert
from minbert import UserError

from ..arguments import integer
from ..drawing import errorbar, find, legend, metric_axis, new_figure, reference_line
from ..study import Shape, Study, grid, planned


def permutation(text: str) -> list:
    order = [integer(t) for t in text.split(",") if t.strip()]
    if sorted(order) != list(range(len(order))):
        raise argparse.ArgumentTypeError(f"{text} is not a permutation of 0..{len(order) - 1}")
    return order


def add_arguments(group):
    group.add_argument("--trials", type=integer, default=5,
                       help="distinct random layer orders, beside the original (default: %(default)s)")
    group.add_argument("--order", type=permutation, default=None, metavar="I,...",
                       help="also this order: position i runs the pretrained layer I")
    group.add_argument("--permutation-seed", type=int, default=0,
                       help="seed of the random orders (default: %(default)s)")


@dataclass(frozen=True)
class Options:
    trials: int = planned(5)                    # distinct random orders
    order: Optional[tuple] = planned()          # also this order
    permutation_seed: int = planned(0)          # seed of the random orders (each order is in its trial's label)


def trials(config, shape: Shape) -> list:
    """The original order, `--order`, `--trials` distinct random orders (seeded by --permutation-seed), and every
    layer re-drawn."""
    options = config.options
    n = shape.num_layers
    orders = [list(range(n))]
    if options.order is not None:
        given = list(options.order)
        if len(given) != n:
            raise UserError(f"--order lists {len(given)} layers; the model has {n} (a permutation of "
                            f"0..{n - 1})")
        if given not in orders:  # the original order given again would cost one of the --trials
            orders.append(given)
    chosen = len(orders)
    rng = random.Random(options.permutation_seed)
    wanted = min(len(orders) + options.trials, math.factorial(n))
    while len(orders) < wanted:
        order = rng.sample(range(n), n)
        if order not in orders:
            orders.append(order)
    configs = [(label(o), {"order": o, "original": i == 0, "random": i >= chosen}) for i, o in enumerate(orders)]
    configs.append(("reinit=all", {"order": None, "original": False, "random": False, "reinit": True}))
    return grid("permute", configs, config.seeds, config.fractions)


def label(order) -> str:
    return "order=" + "-".join(map(str, order))


def run(sweep, trial) -> dict:
    encoder = sweep.pretrained_copy()
    if trial.params.get("reinit"):
        return sweep.fit(trial, minbert.reinit_layers_from(encoder, 0, torch.Generator().manual_seed(trial.seed)))
    return sweep.fit(trial, minbert.permute_layers(encoder, trial.params["order"]))


def reference(sweep, params) -> str:
    """The original order, which every other configuration is compared with."""
    return None if params["original"] else label(range(sweep.shape.num_layers))


def pools(sweep, params) -> dict:
    """order=*: the mean over the random orders."""
    shuffled = [group for group, p in params.items() if p["random"]]
    return {"order=*": ({"order": None, "original": False, "random": True, "pooled": True}, shuffled)} if shuffled \
        else {}


def strip_column(ax, x: int, records, rows, key: str, jitter) -> None:
    """One data fraction's column at `x`: its trials as dots (random orders, --order), the original order's
    and the re-drawn model's lines, the mean over random orders with its interval; legend labels at x 0."""
    first = x == 0
    for kind, color, marker, what in (("random", "C0", "o", "one random order and seed"),
                                      ("chosen", "C2", "s", "--order, one seed")):
        dots = [r.dev[key] for r in records if not r.params["original"] and not r.params.get("reinit")
                and r.params["random"] == (kind == "random")]
        ax.scatter(x + jitter.uniform(-0.12, 0.12, len(dots)), dots, s=14, color=color, marker=marker,
                   alpha=0.5, label=what if first and dots else None)
    reference_line(ax, find(rows, lambda p: p["original"]), "C3", "-",
                    "original order" if first else None, (x - 0.35, x + 0.35))
    reference_line(ax, find(rows, lambda p: p.get("reinit")), "0.4", "--",
                    "every layer re-drawn" if first else None, (x - 0.35, x + 0.35))
    pooled = find(rows, lambda p: p.get("pooled"))
    if pooled is not None:
        errorbar(ax, [pooled], lambda r: x, color="k", marker="D", markersize=7, linestyle="none",
                  label=f"mean over random orders (n = {pooled['n']}, 95% CI)" if first else None)


def permutation_strip(records, rows, metric: str):
    """As Tamkin et al.'s Fig. 4: the mean over random layer orders with its 95% interval (the order the unit),
    between the original order and the model with every layer re-drawn (lines, with their intervals over seeds);
    every trial as a dot."""
    key = metric.split("/", 1)[1]
    records = [r for r in records if r.dev.get(key) is not None]
    rows = [r for r in rows if r["metric"] == metric]
    if not records:
        return None
    fractions = sorted({r.data_fraction for r in records})
    jitter = np.random.default_rng(0)
    fig = new_figure(figsize=(max(4.4, 2.4 * len(fractions)), 4.6))
    ax = fig.add_subplot()
    for x, fraction in enumerate(fractions):
        strip_column(ax, x, [r for r in records if r.data_fraction == fraction],
                     [r for r in rows if r["data_fraction"] == fraction], key, jitter)
    ax.set_xticks(range(len(fractions)))
    ax.set_xticklabels([f"{f:g}" for f in fractions])
    ax.set_xlim(-0.6, len(fractions) - 0.4)
    ax.set_xlabel("data fraction")
    metric_axis(ax, metric)
    legend(ax)
    fig.suptitle("Fine-tuning with the layers in a random order\n(lines: mean over seeds, bands: 95% CI)",
                 fontsize=10)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    return {"permute": permutation_strip(records, rows, metric)}


STUDY = Study(name="permute", Options=Options,
              summary="shuffle the layer order", title="permute", add_arguments=add_arguments, trials=trials, run=run,
              figures=figures, reference=reference, pools=pools)

"""permute: run the pretrained layers in another order, then fine-tune.

Does fine-tuning recover what a shuffled layer order loses? Layer permutation as in
Tamkin et al. (2020), "Investigating Transferability in Pretrained Language Models":
the whole order is permuted and the model fine-tuned. Protocol:
the original order, `--order` if given, and `--trials` distinct random orders
drawn with `--permutation-seed`, each fine-tuned at every seed; the strip plot
shows every trial against the original order's trials.
"""
import argparse
import math
import random

import minbert
from minbert import UserError

from ..arguments import integer
from ..sweep import Shape, Study, grid


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


def plan(args, shape: Shape) -> list:
    """The original order, `--order`, and `--trials` distinct random orders (seeded by --permutation-seed)."""
    n = shape.num_layers
    orders = [list(range(n))]
    if args.order is not None:
        if len(args.order) != n:
            raise UserError(f"--order lists {len(args.order)} layers; the model has {n} (a permutation of "
                            f"0..{n - 1})")
        if args.order not in orders:  # the original order given again would cost one of the --trials
            orders.append(args.order)
    rng = random.Random(args.permutation_seed)
    wanted = min(len(orders) + args.trials, math.factorial(n))
    while len(orders) < wanted:
        order = rng.sample(range(n), n)
        if order not in orders:
            orders.append(order)
    configs = [("order=" + "-".join(map(str, o)), {"order": o, "original": o == orders[0]}) for o in orders]
    return grid("permute", configs, args.seed_list, args.fraction_list)


def run(sweep, trial) -> dict:
    return sweep.fit(trial, minbert.permute_layers(sweep.pretrained_copy(), trial.params["order"]))


def figures(sweep, records, rows, metric) -> dict:
    from ... import plots  # matplotlib loads only when a summary is drawn
    return {"permute": plots.permutation_strip(records, metric)}


STUDY = Study(summary="shuffle the layer order", title="permute", add_arguments=add_arguments, plan=plan, run=run,
              figures=figures)

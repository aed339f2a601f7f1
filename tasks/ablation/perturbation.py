"""perturbation: the null baseline of the dynamics study's layer ratios (Hao et al.'s JS and SVCCA, Singh &
Giovanardi's L2): the ratio an equal relative perturbation of every layer gives.

Each parameter of each transformer layer moves by the same share of its own norm in a seeded random direction
(p += relative * ||p|| * g / ||g||; the embeddings stay), and the copy is compared with the pretrained model as a
fine-tuning is (`compare_encoders`, on the dynamics study's dev sample); each ratio in RATIOS (top third /
bottom third - 1, ...) is computed per direction. Depth alone makes upper layers' representations move more, so a
fine-tuning whose ratio is no larger has not changed its top layers "more" than a change favouring no layer.
0.03 is the fine-tunings' own size (output-dense L2 about 1.0 against a norm of about 35). The seed-vs-seed and
dataset-vs-dataset lines compare two fine-tuned encoders, so their null is the pair form (--pairs): two copies
perturbed in independent directions (pair i: 2i and 2i + 1, so pairs share no copy), compared with each other.

    python -m tasks.ablation.perturbation --seeds 3 --relative 0.03     # null-baseline.json
    python -m tasks.ablation.perturbation --pairs 5 --relative 0.03     # null-baseline-pairs.json

tasks/reproduction/null_baseline.py reads the files this writes.
"""
import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..config import TrainConfig
from ..fileio import atomic_write_text
from ..inputs import prepare
from ..pretraining import identify
from .studies.dynamics import analysis_batches, compare_encoders

PATH = Path("docs/reproduction/results/null-baseline.json")
PAIRS_PATH = PATH.with_name("null-baseline-pairs.json")   # the pair form, kept beside it
PAIR_CURVES = ("svcca", "attention_js")   # the seed-vs-seed and dataset-vs-dataset lines' curves
# (name, curve, upper third(s), lower third(s)): the ratios each direction's record carries, named after the
# reproduction's findings this null is the baseline of
RATIOS = (("hao-attention-last", "attention_js", "top", "bottom"),
          ("hao-svcca-intermediate-last", "svcca", "middle+top", "bottom"),
          ("hao-seeds-consistent-low", "svcca", "top", "bottom"),
          ("singh-later-layers-move", "weight_l2", "top", "bottom"))


def perturb(encoder: torch.nn.Module, relative: float, seed: int) -> torch.nn.Module:
    """A copy with every transformer layer's parameter moved by `relative` of its own norm, in a seeded direction."""
    moved = copy.deepcopy(encoder)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in moved.named_parameters():
            if name.startswith("encoder.layer."):
                g = torch.randn(p.shape, generator=generator, dtype=torch.float32)
                p.add_((relative * p.float().norm() * g / g.norm()).to(p.dtype))
    return moved


def thirds(n: int) -> tuple:
    """(low, high): where the bottom third of n layers ends and the top third begins, each at least one layer
    (the reproduction's `experiments.Context.low` and `.high`)."""
    return max(1, round(n / 3)), max(2, round(2 * n / 3))


def layers(n: int, which: str) -> list:
    """The layers of the "bottom", "middle" or "top" third of n (`thirds`), of several joined by + ("middle+top"),
    or "all"."""
    low, high = thirds(n)
    parts = {"bottom": range(0, low), "middle": range(low, high), "top": range(high, n), "all": range(n)}
    return [i for name in which.split("+") for i in parts[name]]


# The null's lower mean is read as at least this share of its upper mean (so its ratio is at most 1 / FLOOR - 1 =
# 9): a perturbation barely moves the bottom layer's attention (the 4-layer mini-20M's layer-0 JS is about 3e-5
# against 6e-4 at the top), and below a tenth the ratio measures how small the denominator is, not how much more the
# top moved; each fine-tuned ratio is read as measured.
FLOOR = 0.1


def ratio(curve: list, upper: str, lower: str, offset: int, n: int) -> float:
    """mean of `curve` over the `upper` layers / over the `lower` ones (floored at FLOOR of the upper's) - 1 (offset
    1: SVCCA's index 0 is the embeddings' output)."""
    top, bottom = (float(np.mean([curve[i + offset] for i in layers(n, which)])) for which in (upper, lower))
    return top / max(bottom, FLOOR * abs(top)) - 1


def curve_ratio(curves: dict, curve: str, upper: str, lower: str, n: int) -> float:
    """`ratio` of one of `compare_encoders`' curves (SVCCA's offset by the embeddings' output)."""
    return ratio(curves[curve], upper, lower, 1 if curve == "svcca" else 0, n)


def ratios(curves: dict, n: int) -> dict:
    """{name in RATIOS: the null's ratio} of one perturbed model's curves."""
    return {name: curve_ratio(curves, *spec, n) for name, *spec in RATIOS}


def pair_ratios(curves: dict, n: int) -> dict:
    """{curve: top third / bottom third - 1} of one comparison of two perturbed copies."""
    return {curve: curve_ratio(curves, curve, "top", "bottom", n) for curve in PAIR_CURVES}


def comparisons(encoder, args, batches, n: int) -> list:
    """Each seed's perturbed copy against the pretrained model, or (--pairs) each pair of copies against each other:
    [{"seed": direction or [direction, direction], "ratios", "curves"}]."""
    out = []
    for i in range(args.pairs or args.seeds):
        if args.pairs:
            seed = [2 * i, 2 * i + 1]
            curves = compare_encoders(*(perturb(encoder, args.relative, s) for s in seed), batches)
            found = pair_ratios(curves, n)
        else:
            seed, curves = i, compare_encoders(encoder, perturb(encoder, args.relative, i), batches)
            found = ratios(curves, n)
        out.append({"seed": seed, "ratios": found, "curves": {k: curves[k] for k in ("weight_l2", "attention_js",
                                                                                       "svcca")}})
        print(f"null baseline: {'pair' if args.pairs else 'seed'} {seed}: {found}", flush=True)
    return out


def measure(args) -> dict:
    inputs = prepare(TrainConfig(model=args.model, tasks=args.task, data_dir=args.data_dir, device="cpu",
                                 precision="fp32"))
    n = inputs.encoder.num_layers
    seeds = comparisons(inputs.encoder, args, analysis_batches(inputs, args.examples), n)
    # the model by its name: a path names a folder on one machine
    return {"model": identify(args.model).name, "task": args.task, "examples": args.examples,
            "relative": args.relative, "layers": n, "mode": "pairs" if args.pairs else "pretrained", "seeds": seeds,
            "sitting": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group("the perturbation")
    what.add_argument("--relative", type=float, default=0.03, help="each parameter's move, a share of its norm "
                                                                     "(default: %(default)s)")
    what.add_argument("--seeds", type=int, default=3, help="random directions, one model each, each compared with the "
                                                           "pretrained model (default: %(default)s)")
    what.add_argument("--pairs", type=int, default=0, metavar="N",
                      help="the pair form instead: N pairs of copies perturbed in independent directions (2N models), "
                           f"each pair compared with each other, written to {PAIRS_PATH.name} by default "
                           "(default: 0, the single form)")
    data = parser.add_argument_group("model and data")
    data.add_argument("--model", default="minilm", help="the pretrained model (default: %(default)s)")
    data.add_argument("--task", default="sst", help="the dev set sampled (default: %(default)s)")
    data.add_argument("--examples", type=int, default=500, help="dev examples, as the dynamics study's "
                                                                 "(default: %(default)s)")
    data.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR)")
    data.add_argument("--out", default=None, help=f"where the result goes (default: {PATH}, or {PAIRS_PATH} with "
                                                   "--pairs)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.seeds < 1 or args.pairs < 0 or not 0 < args.relative < 1:
        print("perturbation: --seeds must be >= 1, --pairs >= 0 and --relative in (0, 1)", file=sys.stderr)
        return 2
    args.out = args.out or str(PAIRS_PATH if args.pairs else PATH)
    result = measure(args)
    atomic_write_text(Path(args.out), json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"null baseline: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""probe: freeze layers 0..k-1 of the pretrained model and train only a linear head on layer k.

Linear probing of each layer's representations, the probing curve of Tamkin et al.
(2020), "Investigating Transferability in Pretrained Language Models": the encoder
is truncated after layer k and frozen whole, and the task's own linear head is
trained on layer k's raw [CLS] state ("first") or its mean-pooled
tokens ("mean"). Control: the full-depth model with every layer re-drawn at
BERT's initialisation, probed the same way (what the architecture alone gives).
"""
import minbert
import torch
from minbert import UserError

from ..arguments import int_list
from ..sweep import Shape, Study, grid

POOLINGS = ("first", "mean")          # layer k's raw [CLS] state, or its mean-pooled tokens


def add_arguments(group):
    group.add_argument("--layers", type=int_list, default=None, metavar="K,...",
                       help="probe on layer K (K = 0: the embeddings) (default: every layer)")


def plan(args, shape: Shape) -> list:
    """Probe each layer k with each pooling, plus an all-reinitialised model as the control."""
    n = shape.num_layers
    ks = args.layers if args.layers is not None else range(n + 1)
    for k in ks:
        if k > n:
            raise UserError(f"--layers {k}: the model has {n} layers (k in 0..{n}; 0 = the embeddings)")
    configs = [(f"layer={k},pooling={p}", {"layer": k, "pooling": p, "control": False}) for k in ks for p in POOLINGS]
    configs += [(f"layer={n},pooling={p},random", {"layer": n, "pooling": p, "control": True}) for p in POOLINGS]
    return grid("probe", configs, args.seed_list, args.fraction_list)


def run(sweep, trial) -> dict:
    """Layers 0..k-1 kept and frozen whole (pooler too): only the task's linear head trains.

    Freezing here rather than through --freeze-until also covers k = 0, where
    freeze_until would have no layer to count.
    """
    p = trial.params
    encoder = minbert.truncate_layers(sweep.pretrained_copy(), p["layer"])
    if p["control"]:
        minbert.reinit_layers_from(encoder, 0, torch.Generator().manual_seed(trial.seed))
    encoder.requires_grad_(False)
    return sweep.fit(trial, encoder, pooling=p["pooling"], freeze_until=0)  # 0: leave it as frozen here


def figures(sweep, records, rows, metric) -> dict:
    from ... import plots  # matplotlib loads only when a summary is drawn
    return {"probe": plots.probe_curve(rows, metric, sweep.shape.num_layers)}


STUDY = Study(summary="linear probes on frozen layers",
              title="probe (frozen encoder, only a linear head trains; pooling first and mean)",
              add_arguments=add_arguments, plan=plan, run=run, figures=figures)

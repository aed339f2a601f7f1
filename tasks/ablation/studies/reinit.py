"""reinit: re-draw chosen layers or attention heads with BERT's initialisation, then fine-tune.

Partial reinitialisation as in Tamkin et al. (2020), "Investigating Transferability
in Pretrained Language Models" (layers >= k re-drawn, block reinitialisation), and
single-head reinitialisation as in "BERT Goes to College". Schemes, each seeded by the
trial's seed and compared with the unmodified model (from=N) as reference:
`--from-layer K` re-draws layers K..N-1 for each K (default: every K from none
to all), `--block START:SIZE` a block of layers and, as its complement, every
layer but the block, against the model with every layer re-drawn (only the
embeddings pretrained: Tamkin et al.'s reference for blocks), `--heads L:H` one
attention head per trial (its Q/K/V rows and output columns), summarised per
layer (the mean over its heads, `head=L:*`). `--reinit-embeddings` also
re-draws the embeddings. `--reinit-policy` chooses what is re-drawn: `all`
(weights, biases and LayerNorms) or `linear-weights` (Singh & Giovanardi: only
the weight matrices; biases and LayerNorms stay pretrained); each results line
records it. Every configuration's change is measured from the unmodified model
at the same seeds.
"""
import argparse

import torch

import minbert
from minbert import UserError

from ..arguments import integer, items
from ..sweep import Shape, Study, grid


def from_layer_list(text: str) -> list:
    """k values of "layers >= k reinitialised"; 'all' is 0 and 'none' (None) the layer count."""
    return [None if t == "none" else 0 if t == "all" else integer(t) for t in items(text)]


def block_list(text: str) -> list:
    """START:SIZE blocks of consecutive layers; *:SIZE (START None) stands for every block of that size."""
    return _pairs(text, "START:SIZE or *:SIZE (e.g. 2:2)", lambda size: integer(size, minimum=1), any_first=True)


def head_list(text: str) -> list:
    """LAYER:HEAD pairs; LAYER:* (HEAD None) stands for every head of the layer."""
    return _pairs(text, "LAYER:HEAD or LAYER:* (e.g. 3:5)", lambda head: None if head.strip() == "*" else integer(head))


def _pairs(text: str, form: str, second, any_first: bool = False) -> list:
    """A:B items as (integer A, second(B)), A = * as None if `any_first`; `form` says what an item without its
    colon should have been."""
    out = []
    for t in items(text):
        first, sep, rest = t.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"{t!r} is not {form}")
        out.append((None if any_first and first.strip() == "*" else integer(first), second(rest)))
    return out


def add_arguments(group):
    group.add_argument("--from-layer", type=from_layer_list, default=None, metavar="K,...",
                       help="reinitialise layers >= K, for each K; 'none' = the layer count, 'all' = 0 "
                            "(default, with no --block/--heads: every K from none to all)")
    group.add_argument("--block", type=block_list, default=None, metavar="START:SIZE,...",
                       help="reinitialise SIZE consecutive layers from START ('block reinitialized'), and also "
                            "the complement (every layer but the block: 'block preserved'); *:SIZE = every block "
                            "of SIZE layers (Tamkin et al., Fig. 3: *:3)")
    group.add_argument("--heads", type=head_list, default=None, metavar="L:H,...",
                       help="reinitialise one attention head per trial (its Q/K/V rows and output columns); "
                            "L:* = every head of layer L")
    group.add_argument("--reinit-embeddings", action="store_true",
                       help="also reinitialise the embeddings (by default they keep their pretrained values)")
    group.add_argument("--reinit-policy", choices=minbert.REINIT_POLICIES, default="all",
                       help="what a reinitialisation re-draws: all = linear weights and biases and LayerNorms "
                            "(BERT's init of the whole block); linear-weights = only the weight matrices (Q, K, V, "
                            "attention output, intermediate, output; the embedding tables), biases and "
                            "LayerNorms keep their pretrained values, as Singh & Giovanardi (default: %(default)s)")


def plan(args, shape: Shape) -> list:
    """`--from-layer`, `--block` and `--heads` schemes, plus the unmodified model as reference."""
    n, emb, policy = shape.num_layers, args.reinit_embeddings, args.reinit_policy
    suffix = ",emb" if emb else ""

    def layers(label, scheme, chosen, **extra):
        return label + suffix, {"scheme": scheme, "layers": sorted(chosen), "embeddings": emb, "policy": policy,
                                **extra}

    configs = [(f"from={n}", {"scheme": "from", "layers": [], "embeddings": False, "policy": policy, "from": n})]
    froms = args.from_layer or ([] if args.block or args.heads else list(range(n, -1, -1)))
    for k in froms:
        k = n if k is None else k
        if k > n:
            raise UserError(f"--from-layer {k}: the model has {n} layers (k in 0..{n}; {n} = none)")
        configs.append(layers(f"from={k}", "from", range(k, n), **{"from": k}))
    if args.block:  # the blocks' reference: every layer re-drawn, the embeddings as the blocks' are
        configs.append(layers("from=0", "from", range(n), **{"from": 0}))
    for start, size in blocks(args.block or (), n):
        if start + size > n:
            raise UserError(f"--block {start}:{size}: layers {start}..{start + size - 1} are past the model's "
                            f"{n} layers (0..{n - 1})")
        block = set(range(start, start + size))
        configs.append(layers(f"block={start}:{size}", "block", block, start=start, size=size))
        configs.append(layers(f"keep={start}:{size}", "keep", set(range(n)) - block, start=start, size=size))
    configs += head_configs(args.heads or (), shape, suffix, emb, policy)
    return grid("reinit", configs, args.seed_list, args.fraction_list)


def blocks(given, n: int) -> list:
    """The --block items with *:SIZE spelled out as every start (none when SIZE is past the model)."""
    out = []
    for start, size in given:
        if start is None and size > n:
            raise UserError(f"--block *:{size}: the model has {n} layers")
        out += [(s, size) for s in range(n - size + 1)] if start is None else [(start, size)]
    return list(dict.fromkeys(out))


def head_configs(heads, shape: Shape, suffix: str, emb: bool, policy: str) -> list:
    """One configuration per --heads head, LAYER:* spelled out."""
    n, configs = shape.num_layers, []
    for layer, head in heads:
        if layer >= n:
            raise UserError(f"--heads {layer}:{'*' if head is None else head}: the model has layers 0..{n - 1}")
        if head is not None and head >= shape.num_heads:
            raise UserError(f"--heads {layer}:{head}: head {head} is past the model's {shape.num_heads} heads "
                            f"(0..{shape.num_heads - 1})")
        for h in range(shape.num_heads) if head is None else (head,):
            configs.append((f"head={layer}:{h}{suffix}",
                            {"scheme": "head", "layer": layer, "head": h, "embeddings": emb, "policy": policy}))
    return configs


def run(sweep, trial) -> dict:
    p = trial.params
    encoder = sweep.pretrained_copy()
    generator = torch.Generator().manual_seed(trial.seed)
    if p["scheme"] == "head":
        minbert.reinit_heads(encoder, [(p["layer"], p["head"])], generator, p["policy"])
    else:
        minbert.reinit_layers(encoder, p["layers"], generator, p["policy"])
    if p["embeddings"]:
        minbert.reinit_embeddings(encoder, generator, p["policy"])
    return sweep.fit(trial, encoder)


def reference(sweep, params) -> str:
    """The unmodified model (from=N), which every other configuration is compared with."""
    unmodified = f"from={sweep.shape.num_layers}"
    return None if params.get("scheme") == "from" and not params["layers"] and not params["embeddings"] \
        else unmodified


def pools(sweep, params) -> dict:
    """head=L:*: the mean over the heads of layer L that were run (each head averaged over its seeds first; BERT Goes
    to College, Figs. 7-8); head=*:H: the mean over the layers that had head H re-drawn (Figs. 9-10)."""
    by_layer, by_head = {}, {}
    for group, p in params.items():
        if p.get("scheme") == "head":
            by_layer.setdefault((p["layer"], p["embeddings"]), []).append(group)
            by_head.setdefault((p["head"], p["embeddings"]), []).append(group)
    out = {f"head={layer}:*" + (",emb" if emb else ""): ({"scheme": "head-layer", "layer": layer, "embeddings": emb},
                                                           groups)
           for (layer, emb), groups in sorted(by_layer.items())}
    out.update({f"head=*:{head}" + (",emb" if emb else ""): ({"scheme": "head-index", "head": head, "embeddings": emb},
                                                               groups)
                for (head, emb), groups in sorted(by_head.items()) if len(groups) > 1})
    return out


def figures(sweep, records, rows, metric) -> dict:
    from .. import plots  # matplotlib loads only when a summary is drawn
    n, heads = sweep.shape.num_layers, sweep.shape.num_heads
    return {"reinit_layers": plots.reinit_curve(rows, metric, n),
            "reinit_blocks": plots.reinit_blocks(rows, metric, n),
            "reinit_heads": plots.heads_heatmap(rows, metric, n, heads),
            "reinit_heads_by_layer": plots.heads_by_layer(rows, metric, n),
            "reinit_heads_by_index": plots.heads_by_layer(rows, metric, heads, by="head")}


STUDY = Study(summary="re-draw layers or heads",
              title="reinit (BERT's init: N(0, initializer_range) cut at 2 std, biases 0, LayerNorms 1/0 under "
                    "--reinit-policy all; seeded by the trial's seed)",
              add_arguments=add_arguments, plan=plan, run=run, figures=figures, reference=reference, pools=pools,
              fingerprint=("reinit_policy",))

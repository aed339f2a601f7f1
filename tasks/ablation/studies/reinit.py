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
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import minbert
from minbert import UserError

from ..arguments import integer, items
from ..drawing import (
    diverging,
    errorbar,
    find,
    fractions_of,
    legend,
    metric_axis,
    new_figure,
    pretty,
    reference_line,
    title,
)
from ..study import Shape, Study, grid, planned


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


def from_layer_argument(ks) -> str:
    """--from-layer's text: 0 is 'all', None 'none'."""
    return ",".join("none" if k is None else "all" if k == 0 else str(k) for k in ks)


@dataclass(frozen=True)
class Options:
    from_layer: Optional[tuple] = planned(as_argument=from_layer_argument)  # k values; None in it: the layer count
    block: Optional[tuple] = planned()      # (START, SIZE) pairs; START None: every start
    heads: Optional[tuple] = planned()      # (LAYER, HEAD) pairs; HEAD None: every head of the layer
    reinit_embeddings: bool = planned(False)  # the trials' labels say ",emb"
    reinit_policy: str = "all"              # changes every trial: in the fingerprint


def trials(config, shape: Shape) -> list:
    """`--from-layer`, `--block` and `--heads` schemes, plus the unmodified model as reference."""
    options = config.options
    n, emb, policy = shape.num_layers, options.reinit_embeddings, options.reinit_policy
    suffix = ",emb" if emb else ""

    def layers(label, scheme, chosen, **extra):
        return label + suffix, {"scheme": scheme, "layers": sorted(chosen), "embeddings": emb, "policy": policy,
                                **extra}

    configs = [(f"from={n}", {"scheme": "from", "layers": [], "embeddings": False, "policy": policy, "from": n})]
    froms = options.from_layer or ([] if options.block or options.heads else list(range(n, -1, -1)))
    for k in froms:
        k = n if k is None else k
        if k > n:
            raise UserError(f"--from-layer {k}: the model has {n} layers (k in 0..{n}; {n} = none)")
        configs.append(layers(f"from={k}", "from", range(k, n), **{"from": k}))
    if options.block:  # the blocks' reference: every layer re-drawn, the embeddings as the blocks' are
        configs.append(layers("from=0", "from", range(n), **{"from": 0}))
    for start, size in blocks(options.block or (), n):
        if start + size > n:
            raise UserError(f"--block {start}:{size}: layers {start}..{start + size - 1} are past the model's "
                            f"{n} layers (0..{n - 1})")
        block = set(range(start, start + size))
        configs.append(layers(f"block={start}:{size}", "block", block, start=start, size=size))
        configs.append(layers(f"keep={start}:{size}", "keep", set(range(n)) - block, start=start, size=size))
    configs += head_configs(options.heads or (), shape, suffix, emb, policy)
    return grid("reinit", configs, config.seeds, config.fractions)


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
    return None if params["scheme"] == "from" and not params["layers"] and not params["embeddings"] \
        else unmodified


def pools(sweep, params) -> dict:
    """head=L:*: the mean over the heads of layer L that were run (each head averaged over its seeds first; BERT Goes
    to College, Figs. 7-8); head=*:H: the mean over the layers that had head H re-drawn (Figs. 9-10)."""
    by_layer, by_head = {}, {}
    for group, p in params.items():
        if p["scheme"] == "head":
            by_layer.setdefault((p["layer"], p["embeddings"]), []).append(group)
            by_head.setdefault((p["head"], p["embeddings"]), []).append(group)
    out = {f"head={layer}:*" + (",emb" if emb else ""): ({"scheme": "head-layer", "layer": layer, "embeddings": emb},
                                                           groups)
           for (layer, emb), groups in sorted(by_layer.items())}
    out.update({f"head=*:{head}" + (",emb" if emb else ""): ({"scheme": "head-index", "head": head, "embeddings": emb},
                                                               groups)
                for (head, emb), groups in sorted(by_head.items()) if len(groups) > 1})
    return out


def reinit_curve(rows, metric: str, num_layers: int):
    """Metric vs k for "layers >= k reinitialised"; dashed: the pretrained and the all-reinitialised model."""
    rows = [r for r in rows if r["metric"] == metric and r["params"]["scheme"] == "from"]
    if not rows:
        return None
    fig = new_figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for i, fraction in enumerate(fractions_of(rows)):
        mine = [r for r in rows if r["data_fraction"] == fraction]
        embeddings = any(r["params"]["embeddings"] for r in mine)
        curve = [r for r in mine if r["params"]["embeddings"] == embeddings]
        errorbar(ax, curve, lambda r: r["params"]["from"], color=f"C{i}", marker="o",
                  label=f"data fraction {fraction:g}")
        for row, style, what in (
                (find(mine, lambda p: p["from"] == num_layers and not p["embeddings"]), "--", "pretrained"),
                (find(mine, lambda p: p["from"] == 0 and p["embeddings"] == embeddings), "-.",
                 "all layers reinitialised")):
            reference_line(ax, row, f"C{i}", style, f"{what} ({fraction:g})")
    ax.set_xticks(range(num_layers + 1))
    ax.set_xlabel(f"k: layers k..{num_layers - 1} reinitialised (k = {num_layers}: none, 0: all)")
    metric_axis(ax, metric)
    legend(ax)
    title(fig, "Re-initialising the top layers before fine-tuning", rows)
    return fig


def blocks_panel(ax, rows, num_layers: int) -> None:
    """One data fraction's panel: per block, the block re-drawn and only the block pretrained; the pretrained
    and the all-re-drawn model as lines."""
    spans = sorted({(r["params"]["start"], r["params"]["size"]) for r in rows if "start" in r["params"]})
    embeddings = any(r["params"]["embeddings"] for r in rows if "start" in r["params"])
    for offset, (scheme, what, color) in zip((-0.08, 0.08), (("block", "the block re-drawn", "C3"),
                                                              ("keep", "only the block pretrained", "C0"))):
        series = [r for r in rows if r["params"]["scheme"] == scheme]
        errorbar(ax, series, lambda r: spans.index((r["params"]["start"], r["params"]["size"])) + offset,
                  color=color, marker="o", linestyle="none", label=what)
    reference_line(ax, find(rows, lambda p: p["scheme"] == "from" and p["from"] == num_layers
                              and not p["embeddings"]), "k", "--", "pretrained")
    reference_line(ax, find(rows, lambda p: p["scheme"] == "from" and p["from"] == 0
                              and p["embeddings"] == embeddings), "0.5", "-.",
                    "every layer re-drawn" if embeddings else "every layer re-drawn (embeddings only)")
    ax.set_xticks(range(len(spans)))
    ax.set_xticklabels([f"{start}..{start + size - 1}" for start, size in spans])
    ax.set_xlabel("block of layers")


def reinit_blocks(rows, metric: str, num_layers: int):
    """Per block: the block re-drawn, and only the block pretrained; lines: the pretrained model and the model
    with every layer re-drawn (only the embeddings pretrained), Tamkin et al.'s reference for blocks."""
    rows = [r for r in rows if r["metric"] == metric]
    blocks = [r for r in rows if r["params"]["scheme"] in ("block", "keep")]
    if not blocks:
        return None
    fractions = fractions_of(blocks)
    count = len({(r["params"]["start"], r["params"]["size"]) for r in blocks})
    fig = new_figure(figsize=(max(5.0, 1.2 * count + 3) * len(fractions), 4.4))
    axes = fig.subplots(1, len(fractions), squeeze=False, sharey=True)[0]
    for ax, fraction in zip(axes, fractions):
        blocks_panel(ax, [r for r in rows if r["data_fraction"] == fraction], num_layers)
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
        metric_axis(ax, metric)
        legend(ax)
    title(fig, "Re-initialising a block of layers, or all but the block", blocks)
    return fig


def heads_heatmap(rows, metric: str, num_layers: int, num_heads: int):
    """Change of the metric from the unmodified model (paired by seed) when one head is reinitialised (layer x
    head); the metric itself where the unmodified model was not run."""
    heads = [r for r in rows if r["metric"] == metric and r["params"]["scheme"] == "head"]
    if not heads:
        return None
    fractions = fractions_of(heads)
    fig = new_figure(figsize=(max(5.0, 0.45 * num_heads + 2.5) * len(fractions), 0.45 * num_layers + 2.5))
    axes = fig.subplots(1, len(fractions), squeeze=False)[0]
    for ax, fraction in zip(axes, fractions):
        mine = [r for r in heads if r["data_fraction"] == fraction]
        paired = all(r["change_mean"] is not None for r in mine)
        matrix = np.full((num_layers, num_heads), np.nan)
        for r in mine:
            matrix[r["params"]["layer"], r["params"]["head"]] = r["change_mean"] if paired else r["mean"]
        diverging(ax, matrix, "change from the unmodified model" if paired else pretty(metric))
        ax.set_xticks(range(num_heads))
        ax.set_yticks(range(num_layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
    title(fig, f"Re-initialising one attention head: {pretty(metric)} (grey: not run)", heads)
    return fig


# heads_by_layer's two views: (the pooled scheme, what it pools, the x axis, the title's "per ...")
HEADS_BY = {"layer": ("head-layer", "the layer's heads", "layer of the re-drawn head", "layer"),
            "head": ("head-index", "the layers with this head re-drawn", "index of the re-drawn head",
                     "head index")}


def heads_by_layer(rows, metric: str, num_layers: int, by: str = "layer"):
    """Per layer (by="layer") or per head index (by="head"), the change from the unmodified model when one head is
    re-drawn: each head's mean over seeds as a dot, the mean over the layer's heads (or over the layers that had
    that head re-drawn) with the 95% interval of its per-seed (paired) change."""
    rows = [r for r in rows if r["metric"] == metric and r["change_mean"] is not None]
    heads = [r for r in rows if r["params"]["scheme"] == "head"]
    scheme, what, x_label, per = HEADS_BY[by]
    pooled = [r for r in rows if r["params"]["scheme"] == scheme]
    if not heads or not pooled:
        return None
    fractions = fractions_of(heads)
    fig = new_figure(figsize=(max(5.0, 0.7 * num_layers + 2.5) * len(fractions), 4.4))
    axes = fig.subplots(1, len(fractions), squeeze=False, sharey=True)[0]
    jitter = np.random.default_rng(0)
    for ax, fraction in zip(axes, fractions):
        mine = [r for r in heads if r["data_fraction"] == fraction]
        ax.scatter([r["params"][by] + jitter.uniform(-0.15, 0.15) for r in mine],
                   [r["change_mean"] for r in mine], s=14, color="C0", alpha=0.6, label="one head (mean over seeds)")
        errorbar(ax, [r for r in pooled if r["data_fraction"] == fraction], lambda r: r["params"][by],
                  value="change_mean", color="k", marker="D", linestyle="none",
                  label=f"mean over {what} (95% CI, paired by seed)")
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xticks(range(num_layers))
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"change in {pretty(metric)} from the unmodified model")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
        legend(ax)
    fig.suptitle(f"Re-initialising one attention head, per {per}", fontsize=10)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    n, heads = sweep.shape.num_layers, sweep.shape.num_heads
    return {"reinit_layers": reinit_curve(rows, metric, n),
            "reinit_blocks": reinit_blocks(rows, metric, n),
            "reinit_heads": heads_heatmap(rows, metric, n, heads),
            "reinit_heads_by_layer": heads_by_layer(rows, metric, n),
            "reinit_heads_by_index": heads_by_layer(rows, metric, heads, by="head")}


STUDY = Study(name="reinit", Options=Options,
              summary="re-draw layers or heads",
              title="reinit (BERT's init: N(0, initializer_range) cut at 2 std, biases 0, LayerNorms 1/0 under "
                    "--reinit-policy all; seeded by the trial's seed)",
              add_arguments=add_arguments, trials=trials, run=run, figures=figures, reference=reference, pools=pools)

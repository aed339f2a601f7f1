"""The ablation plots, as matplotlib figures written to PNG and shown in TensorBoard.

Each function takes summary rows (one per configuration, data fraction and
metric: `mean`, `n` and the 95% interval over seeds, plus the configuration's
`params`) or, for the strip plot, the per-trial records, and returns a Figure,
or None when the sweep has nothing of that kind to draw. Figures are built
without pyplot, so no global figure state leaks between plots.
"""
import io
import math

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from ..metrics import CORRELATIONS
from ..registry import REGISTRY

PRETTY = {"dev/sst": "SST dev accuracy", "dev/quora": "Quora dev accuracy", "dev/sts": "STS dev Pearson r",
          "dev/overall": "dev overall score"}
CURVES = (("weight_l2", "L2 distance of the layer's output.dense.weight"),
          ("attention_js", "attention JS divergence (nats, per sentence)"),
          ("svcca", "SVCCA distance of token representations"))


def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    return buffer.getvalue()


def _fractions(rows) -> list:
    return sorted({r["data_fraction"] for r in rows})


def _half_width(row, value: str = "mean") -> float:
    """Half the 95% interval of `value` (mean, or change_mean: the paired change from the reference); 0 for a
    single seed, which has no interval."""
    prefix = value[:-len("mean")]
    lo, hi = row.get(f"{prefix}ci95_low"), row.get(f"{prefix}ci95_high")
    return 0.0 if lo is None or hi is None else (hi - lo) / 2


def _errorbar(ax, rows, x_of, value: str = "mean", **style):
    rows = sorted(rows, key=x_of)
    ax.errorbar([x_of(r) for r in rows], [r[value] for r in rows], yerr=[_half_width(r, value) for r in rows],
                capsize=3, **style)


def _reference_line(ax, row, color, style, label, x_span=None):
    """A reference configuration's mean as a line, its 95% interval as a band; over `x_span` (a fraction's
    place on a categorical axis) or the whole axis."""
    if row is None:
        return
    lo, hi = row.get("ci95_low"), row.get("ci95_high")
    if x_span is None:
        ax.axhline(row["mean"], color=color, linestyle=style, linewidth=1, alpha=0.8, label=label)
        if lo is not None:
            ax.axhspan(lo, hi, color=color, alpha=0.08)
        return
    ax.hlines(row["mean"], *x_span, color=color, linestyle=style, linewidth=1.2, label=label)
    if lo is not None:
        ax.fill_between(x_span, lo, hi, color=color, alpha=0.12)


LEGEND_WIDTH = 2.6  # inches a legend takes beside its axes


def _legend(ax):
    """The axes' legend outside them, at their right: inside, it could sit on a line or dots of the data (the
    permutation strip's original order did). The figure widens by the legend, so the axes keep their width."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    width, height = ax.figure.get_size_inches()
    ax.figure.set_size_inches(width + LEGEND_WIDTH, height)


def _metric_axis(ax, metric: str):
    """Label the axis; keep it within the metric's range, which a 2-seed t-interval easily overshoots."""
    task = metric.split("/", 1)[-1]
    declared = REGISTRY.get(task)
    ax.set_ylabel(PRETTY.get(metric) or (f"{task} dev {declared.metric}" if declared else metric))
    correlation = declared is not None and declared.metric in CORRELATIONS  # on [-1, 1]
    low, high = ax.get_ylim()
    ax.set_ylim(max(low, -1.02 if correlation else -0.02), min(high, 1.02))


def _title(fig, text, rows):
    seeds = sorted({r["n"] for r in rows})
    n = f"n = {seeds[0]}" if len(seeds) == 1 else f"n = {seeds[0]}..{seeds[-1]}"
    fig.suptitle(f"{text}\n(mean over seeds, {n}; bars: 95% CI)", fontsize=10)


def reinit_curve(rows, metric: str, num_layers: int):
    """Metric vs k for "layers >= k reinitialised"; dashed: the pretrained and the all-reinitialised model."""
    rows = [r for r in rows if r["metric"] == metric and r["params"].get("scheme") == "from"]
    if not rows:
        return None
    fig = Figure(layout="constrained", figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for i, fraction in enumerate(_fractions(rows)):
        mine = [r for r in rows if r["data_fraction"] == fraction]
        embeddings = any(r["params"]["embeddings"] for r in mine)
        curve = [r for r in mine if r["params"]["embeddings"] == embeddings]
        _errorbar(ax, curve, lambda r: r["params"]["from"], color=f"C{i}", marker="o",
                  label=f"data fraction {fraction:g}")
        for row, style, what in (
                (_find(mine, lambda p: p["from"] == num_layers and not p["embeddings"]), "--", "pretrained"),
                (_find(mine, lambda p: p["from"] == 0 and p["embeddings"] == embeddings), "-.",
                 "all layers reinitialised")):
            _reference_line(ax, row, f"C{i}", style, f"{what} ({fraction:g})")
    ax.set_xticks(range(num_layers + 1))
    ax.set_xlabel(f"k: layers k..{num_layers - 1} reinitialised (k = {num_layers}: none, 0: all)")
    _metric_axis(ax, metric)
    _legend(ax)
    _title(fig, "Re-initialising the top layers before fine-tuning", rows)
    return fig


def _find(rows, test):
    return next((r for r in rows if test(r["params"])), None)


def reinit_blocks(rows, metric: str, num_layers: int):
    """Per block: the block re-drawn, and only the block pretrained; lines: the pretrained model and the model
    with every layer re-drawn (only the embeddings pretrained), Tamkin et al.'s reference for blocks."""
    rows = [r for r in rows if r["metric"] == metric]
    blocks = [r for r in rows if r["params"].get("scheme") in ("block", "keep")]
    if not blocks:
        return None
    fractions = _fractions(blocks)
    count = len({(r["params"]["start"], r["params"]["size"]) for r in blocks})
    fig = Figure(layout="constrained", figsize=(max(5.0, 1.2 * count + 3) * len(fractions), 4.4))
    axes = fig.subplots(1, len(fractions), squeeze=False, sharey=True)[0]
    for ax, fraction in zip(axes, fractions):
        mine = [r for r in rows if r["data_fraction"] == fraction]
        spans = sorted({(r["params"]["start"], r["params"]["size"]) for r in mine if "start" in r["params"]})
        embeddings = any(r["params"]["embeddings"] for r in mine if "start" in r["params"])
        for offset, (scheme, what, color) in zip((-0.08, 0.08), (("block", "the block re-drawn", "C3"),
                                                                  ("keep", "only the block pretrained", "C0"))):
            series = [r for r in mine if r["params"].get("scheme") == scheme]
            _errorbar(ax, series, lambda r: spans.index((r["params"]["start"], r["params"]["size"])) + offset,
                      color=color, marker="o", linestyle="none", label=what)
        _reference_line(ax, _find(mine, lambda p: p.get("scheme") == "from" and p["from"] == num_layers
                                  and not p["embeddings"]), "k", "--", "pretrained")
        _reference_line(ax, _find(mine, lambda p: p.get("scheme") == "from" and p["from"] == 0
                                  and p["embeddings"] == embeddings), "0.5", "-.",
                        "every layer re-drawn" if embeddings else "every layer re-drawn (embeddings only)")
        ax.set_xticks(range(len(spans)))
        ax.set_xticklabels([f"{start}..{start + size - 1}" for start, size in spans])
        ax.set_xlabel("block of layers")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
        _metric_axis(ax, metric)
        _legend(ax)
    _title(fig, "Re-initialising a block of layers, or all but the block", blocks)
    return fig


def probe_curve(rows, metric: str, num_layers: int, finetuned=None):
    """Linear-probe metric per layer, one panel per pooling; dashed: the full and an all-reinitialised model.

    `finetuned`: a reinit sweep's summary rows; its "layers >= k reinitialised, then fine-tuned" curve is drawn
    on the same axes (k pretrained layers kept in both), as Tamkin et al. (2020) overlay them in Fig. 2.
    """
    rows = [r for r in rows if r["metric"] == metric and "pooling" in r["params"]]
    if not rows:
        return None
    finetuned = [r for r in finetuned or () if r["metric"] == metric and r["params"].get("scheme") == "from"]
    poolings = sorted({r["params"]["pooling"] for r in rows})
    fig = Figure(layout="constrained", figsize=(5.2 * len(poolings), 4.4))
    axes = fig.subplots(1, len(poolings), squeeze=False, sharey=True)[0]
    names = {"cls-token": "[CLS] state of layer k", "first": "[CLS] state of layer k", "mean": "mean-pooled layer k"}
    for ax, pooling in zip(axes, poolings):
        for i, fraction in enumerate(_fractions(rows)):
            mine = [r for r in rows if r["data_fraction"] == fraction and r["params"]["pooling"] == pooling]
            _errorbar(ax, [r for r in mine if not r["params"]["control"]], lambda r: r["params"]["layer"],
                      color=f"C{i}", marker="o", label=f"probe, data fraction {fraction:g}")
            for row, style, what in ((_find(mine, lambda p: p["layer"] == num_layers and not p["control"]),
                                      "--", "probe on the full pretrained model"),
                                     (_find(mine, lambda p: p["control"]), "-.", "probe, all layers reinitialised")):
                if row is not None:
                    ax.axhline(row["mean"], color=f"C{i}", linestyle=style, linewidth=1, alpha=0.8,
                               label=f"{what} ({fraction:g})")
            tuned = [r for r in finetuned if r["data_fraction"] == fraction]
            if tuned:
                _errorbar(ax, tuned, lambda r: r["params"]["from"], color=f"C{i}", marker="s", linestyle=":",
                          label=f"fine-tuned, layers >= k reinitialised ({fraction:g})")
        ax.set_title(f"probe on the {names.get(pooling, pooling)}", fontsize=9)
        ax.set_xticks(range(num_layers + 1))
        ax.set_xlabel("k: pretrained layers kept (probe: features of layer k; 0 = embeddings)")
        _legend(ax)
        _metric_axis(ax, metric)
    _title(fig, "Linear probes on frozen pretrained layers" + (" beside fine-tuning" if finetuned else ""), rows)
    return fig


def _diverging(ax, matrix, label):
    """Colours centred on 0: red where the ablation hurt, blue where it helped."""
    finite = matrix[np.isfinite(matrix)]
    limit = float(np.abs(finite).max()) if finite.size else 0.0
    limit = limit or 1e-6
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="0.6")  # grey: not run
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    ax.figure.colorbar(image, ax=ax, label=label, shrink=0.85)
    return image


def heads_heatmap(rows, metric: str, num_layers: int, num_heads: int):
    """Change of the metric from the unmodified model (paired by seed) when one head is reinitialised (layer x
    head); the metric itself where the unmodified model was not run."""
    heads = [r for r in rows if r["metric"] == metric and r["params"].get("scheme") == "head"]
    if not heads:
        return None
    fractions = _fractions(heads)
    fig = Figure(layout="constrained",
                 figsize=(max(5.0, 0.45 * num_heads + 2.5) * len(fractions), 0.45 * num_layers + 2.5))
    axes = fig.subplots(1, len(fractions), squeeze=False)[0]
    for ax, fraction in zip(axes, fractions):
        mine = [r for r in heads if r["data_fraction"] == fraction]
        paired = all(r.get("change_mean") is not None for r in mine)
        matrix = np.full((num_layers, num_heads), np.nan)
        for r in mine:
            matrix[r["params"]["layer"], r["params"]["head"]] = r["change_mean"] if paired else r["mean"]
        _diverging(ax, matrix, "change from the unmodified model" if paired else PRETTY.get(metric, metric))
        ax.set_xticks(range(num_heads))
        ax.set_yticks(range(num_layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
    _title(fig, f"Re-initialising one attention head: {PRETTY.get(metric, metric)} (grey: not run)", heads)
    return fig


def heads_by_layer(rows, metric: str, num_layers: int, by: str = "layer"):
    """Per layer (by="layer") or per head index (by="head"), the change from the unmodified model when one head is
    re-drawn: each head's mean over seeds as a dot, the mean over the layer's heads (or over the layers that had
    that head re-drawn) with the 95% interval of its per-seed (paired) change."""
    rows = [r for r in rows if r["metric"] == metric and r.get("change_mean") is not None]
    heads = [r for r in rows if r["params"].get("scheme") == "head"]
    pooled = [r for r in rows if r["params"].get("scheme") == ("head-layer" if by == "layer" else "head-index")]
    if not heads or not pooled:
        return None
    fractions = _fractions(heads)
    fig = Figure(layout="constrained", figsize=(max(5.0, 0.7 * num_layers + 2.5) * len(fractions), 4.4))
    axes = fig.subplots(1, len(fractions), squeeze=False, sharey=True)[0]
    jitter = np.random.default_rng(0)
    what = "the layer's heads" if by == "layer" else "the layers with this head re-drawn"
    for ax, fraction in zip(axes, fractions):
        mine = [r for r in heads if r["data_fraction"] == fraction]
        ax.scatter([r["params"][by] + jitter.uniform(-0.15, 0.15) for r in mine],
                   [r["change_mean"] for r in mine], s=14, color="C0", alpha=0.6, label="one head (mean over seeds)")
        _errorbar(ax, [r for r in pooled if r["data_fraction"] == fraction], lambda r: r["params"][by],
                  value="change_mean", color="k", marker="D", linestyle="none",
                  label=f"mean over {what} (95% CI, paired by seed)")
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xticks(range(num_layers))
        ax.set_xlabel("layer of the re-drawn head" if by == "layer" else "index of the re-drawn head")
        ax.set_ylabel(f"change in {PRETTY.get(metric, metric)} from the unmodified model")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
        _legend(ax)
    fig.suptitle(f"Re-initialising one attention head, per {'layer' if by == 'layer' else 'head index'}",
                 fontsize=10)
    return fig


def permutation_strip(records, rows, metric: str):
    """As Tamkin et al.'s Fig. 4: the mean over random layer orders with its 95% interval (the order the unit),
    between the original order and the model with every layer re-drawn (lines, with their intervals over seeds);
    every trial as a dot."""
    key = metric.split("/", 1)[1]
    records = [r for r in records if (r.get("dev") or {}).get(key) is not None]
    rows = [r for r in rows if r["metric"] == metric]
    if not records:
        return None
    fractions = _fractions(records)
    jitter = np.random.default_rng(0)
    fig = Figure(layout="constrained", figsize=(max(4.4, 2.4 * len(fractions)), 4.6))
    ax = fig.add_subplot()
    for x, fraction in enumerate(fractions):
        first = x == 0
        mine = [r for r in records if r["data_fraction"] == fraction]
        summary = [r for r in rows if r["data_fraction"] == fraction]
        for kind, color, marker, what in (("random", "C0", "o", "one random order and seed"),
                                          ("chosen", "C2", "s", "--order, one seed")):
            dots = [r["dev"][key] for r in mine if not r["params"]["original"] and not r["params"].get("reinit")
                    and bool(r["params"].get("random", True)) == (kind == "random")]
            ax.scatter(x + jitter.uniform(-0.12, 0.12, len(dots)), dots, s=14, color=color, marker=marker,
                       alpha=0.5, label=what if first and dots else None)
        _reference_line(ax, _find(summary, lambda p: p.get("original")), "C3", "-",
                        "original order" if first else None, (x - 0.35, x + 0.35))
        _reference_line(ax, _find(summary, lambda p: p.get("reinit")), "0.4", "--",
                        "every layer re-drawn" if first else None, (x - 0.35, x + 0.35))
        pooled = _find(summary, lambda p: p.get("pooled"))
        if pooled is not None:
            _errorbar(ax, [pooled], lambda r: x, color="k", marker="D", markersize=7, linestyle="none",
                      label=f"mean over random orders (n = {pooled['n']}, 95% CI)" if first else None)
    ax.set_xticks(range(len(fractions)))
    ax.set_xticklabels([f"{f:g}" for f in fractions])
    ax.set_xlim(-0.6, len(fractions) - 0.4)
    ax.set_xlabel("data fraction")
    _metric_axis(ax, metric)
    _legend(ax)
    fig.suptitle("Fine-tuning with the layers in a random order\n(lines: mean over seeds, bands: 95% CI)",
                 fontsize=10)
    return fig


def transfer_matrix(rows, tasks):
    """Final-task metric after an intermediate task (rows) vs direct fine-tuning (top row)."""
    rows = [r for r in rows if "final" in r["params"] and r["metric"] == f"dev/{r['params']['final']}"
            and not r["params"].get("steps")]  # the equal-steps control arms are not cells of the matrix
    if not rows:
        return None
    fractions = _fractions(rows)
    vias = [None] + list(tasks)
    fig = Figure(layout="constrained", figsize=(1.6 * len(tasks) + 2.8, 1.0 * len(vias) + 1.8))
    axes = fig.subplots(len(fractions), 1, squeeze=False)[:, 0]
    for ax, fraction in zip(axes, fractions):
        mine = {(r["params"]["via"], r["params"]["final"]): r for r in rows if r["data_fraction"] == fraction}
        delta = np.full((len(vias), len(tasks)), np.nan)
        for (i, via), (j, final) in ((a, b) for a in enumerate(vias) for b in enumerate(tasks)):
            cell, direct = mine.get((via, final)), mine.get((None, final))
            if cell is None:
                continue
            change = cell["mean"] - direct["mean"] if direct else math.nan
            delta[i, j] = change
            text = f"{cell['mean']:.3f}" + (f"\n({change:+.3f})" if via is not None and direct else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
        _diverging(ax, delta, "change from direct fine-tuning")
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels(tasks)
        ax.set_yticks(range(len(vias)))
        ax.set_yticklabels(["direct"] + [f"after {t}" for t in tasks])
        ax.set_xlabel("final task (its dev metric)")
        ax.set_ylabel("intermediate task")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
    fig.suptitle("Intermediate-task transfer (BERT Goes to College, Exp. 1)", fontsize=10)
    return fig


def dynamics_curves(rows, num_layers: int):
    """Per layer: pretrained vs fine-tuned (solid) and fine-tuning seed vs seed (dashed)."""
    rows = [r for r in rows if r["metric"].split("/")[0] in dict(CURVES)]
    if not rows:
        return None
    fig = Figure(layout="constrained", figsize=(15, 4.2))
    axes = fig.subplots(1, len(CURVES))
    for ax, (name, label) in zip(axes, CURVES):
        for i, fraction in enumerate(_fractions(rows)):
            for group, style, what in (("finetune", "-", "pretrained vs fine-tuned"),
                                       ("seed-vs-seed", "--", "seed vs seed")):
                mine = [r for r in rows if r["data_fraction"] == fraction and r["config"] == group
                        and r["metric"].split("/")[0] == name]
                if mine:
                    _errorbar(ax, mine, lambda r: int(r["metric"].split("/")[1]), color=f"C{i}",
                              linestyle=style, marker="o", label=f"{what} ({fraction:g})")
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=max(ax.get_ylim()[0], 0.0))  # distances: an interval below 0 means nothing
        ax.set_xlabel("layer (0 = embeddings)" if name == "svcca" else "layer")
        _legend(ax)
    fig.suptitle("How fine-tuning changes each layer", fontsize=10)
    return fig



def change_bars(rows, metric: str, mode: str, label: str):
    """Each configuration's paired change from its study's reference, with its 95% interval, per data fraction."""
    rows = [r for r in rows if r["mode"] == mode and r["metric"] == metric and r.get("change_mean") is not None]
    if not rows:
        return None
    fractions = _fractions(rows)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig = Figure(layout="constrained", figsize=(max(4.5, 0.9 * len(configs) + 2.0) * len(fractions), 4.0))
    axes = fig.subplots(1, len(fractions), squeeze=False, sharey=True)[0]
    for ax, fraction in zip(axes, fractions):
        mine = {r["config"]: r for r in rows if r["data_fraction"] == fraction}
        _errorbar(ax, [mine[c] for c in configs if c in mine], lambda r: configs.index(r["config"]),
                  value="change_mean", color="k", marker="D", linestyle="none")
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, rotation=20, fontsize=8)
        ax.set_ylabel(f"{label}: {PRETTY.get(metric, metric)}")
        ax.set_title(f"data fraction {fraction:g}", fontsize=9)
    _title(fig, f"{mode}: change from the reference", rows)
    return fig


def restore_curves(rows, num_layers: int):
    """Per restored layer i: the last layer's SVCCA distance from the fine-tuned model, and the dev score (Hao et
    al., Fig. 3); solid: layer i alone restored, dashed: layers 0..i."""
    panels = (("svcca", "SVCCA distance of the last layer from the fine-tuned model"),
              ("dev", "dev score with the fine-tuned heads"))
    rows = [r for r in rows if r["metric"].split("/")[0] in {f"restore{b}_{p}" for b in ("", "_below")
                                                            for p, _ in panels}]
    if not rows:
        return None
    fig = Figure(layout="constrained", figsize=(10, 4.2))
    for ax, (panel, label) in zip(fig.subplots(1, len(panels)), panels):
        for i, fraction in enumerate(_fractions(rows)):
            for prefix, style, what in (("restore", "-", "layer i restored"), ("restore_below", "--", "layers 0..i")):
                mine = [r for r in rows if r["data_fraction"] == fraction and r["metric"].split("/")[0] ==
                        f"{prefix}_{panel}"]
                if mine:
                    _errorbar(ax, mine, lambda r: int(r["metric"].split("/")[1]), color=f"C{i}", linestyle=style,
                              marker="o", label=f"{what} ({fraction:g})")
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(num_layers))
        ax.set_xlabel("restored layer i")
        _legend(ax)
    fig.suptitle("Restoring pretrained layers in the fine-tuned model (Hao et al., Fig. 3)", fontsize=10)
    return fig


MAX_COLOURED_GROUPS = 10  # beyond this many configurations a legend is unreadable: every trial is drawn grey


def learning_curves(sweeps: dict):
    """Each sweep's trials as held-out score against steps, a dot where each stopped: whether the budget took the
    trials to their plateau. Held-out rows are a share of the trial's own training data, never dev. `sweeps` maps
    a sweep's name to its trial records (`results.jsonl` rows); None when no trial kept a held-out curve."""
    panels = {}
    for name, records in sweeps.items():  # one panel per sweep and data fraction: their held-out sets differ
        records = [r for r in records if (r.get("budget") or {}).get("heldout_curve")]
        fractions = sorted({r.get("data_fraction") for r in records}, key=str)
        for fraction in fractions:
            title = name if len(fractions) == 1 else f"{name}, fraction {fraction:g}"
            panels[title] = [r for r in records if r.get("data_fraction") == fraction]
    if not panels:
        return None
    columns = min(3, len(panels))
    rows_of_panels = math.ceil(len(panels) / columns)
    fig = Figure(layout="constrained", figsize=(5.0 * columns, 3.4 * rows_of_panels))
    axes = np.atleast_1d(fig.subplots(rows_of_panels, columns)).ravel()
    for ax, (name, records) in zip(axes, sorted(panels.items())):
        group_of = {id(r): str(r.get("group") or r.get("config")) for r in records}
        groups = sorted(set(group_of.values()))
        coloured = len(groups) <= MAX_COLOURED_GROUPS
        labelled = set()
        for r in sorted(records, key=lambda r: (group_of[id(r)], r.get("seed", 0))):
            group = group_of[id(r)]
            curve = r["budget"]["heldout_curve"]
            colour = f"C{groups.index(group) % 10}" if coloured else "0.5"
            label = group if coloured and group not in labelled else None
            labelled.add(group)
            steps, scores = [p["step"] for p in curve], [p["score"] for p in curve]
            ax.plot(steps, scores, color=colour, linewidth=0.8, alpha=0.7, label=label)
            ax.plot(steps[-1:], scores[-1:], "o", color=colour, markersize=3)
        held_out = {task: rows for r in records
                    for task, rows in ((r["budget"].get("plateau") or {}).get("holdout_rows") or {}).items()}
        ax.set_title(f"{name}: {len(records)} trials" + (", held-out rows " + ", ".join(
            f"{task} {rows}" for task, rows in sorted(held_out.items())) if held_out else ""), fontsize=9)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("held-out training rows: score")
        if coloured:
            _legend(ax)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Learning curves on each trial's held-out training rows (a dot: where the trial stopped)",
                 fontsize=10)
    return fig

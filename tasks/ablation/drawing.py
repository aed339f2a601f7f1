"""What the studies' figures share: error bars, reference lines, a legend beside the axes, the metric's axis.

Each study draws its own figures (`figures(...)` in its module, from its summary rows: one per configuration,
data fraction and metric, with `mean`, `n`, the 95% interval over seeds and the configuration's `params`)
with these helpers; a figure function returns None when the sweep has nothing of its kind to draw. Figures
are built without pyplot, so no global figure state leaks between plots, and matplotlib loads only when a
figure is drawn (`new_figure`), not when a study is imported.
"""
import io

import numpy as np

from ..metrics import CORRELATIONS
from ..registry import REGISTRY

PRETTY = {"dev/sst": "SST dev accuracy", "dev/quora": "Quora dev accuracy", "dev/sts": "STS dev Pearson r",
          "dev/overall": "dev overall score"}


def new_figure(**kwargs):
    """A matplotlib Figure with constrained layout (matplotlib is imported here, on the first figure)."""
    from matplotlib.figure import Figure
    return Figure(layout="constrained", **kwargs)


def png_bytes(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    return buffer.getvalue()


def pretty(metric: str) -> str:
    """A metric's name as an axis or title says it ("dev/sst": "SST dev accuracy"), else the metric itself."""
    return PRETTY.get(metric, metric)


def fractions_of(rows) -> list:
    return sorted({r["data_fraction"] for r in rows})


def half_width(row, value: str = "mean") -> float:
    """Half the 95% interval of `value` (mean, or change_mean: the paired change from the reference); 0 for a
    single seed, which has no interval."""
    prefix = value[:-len("mean")]
    lo, hi = row[f"{prefix}ci95_low"], row[f"{prefix}ci95_high"]
    return 0.0 if lo is None or hi is None else (hi - lo) / 2


def errorbar(ax, rows, x_of, value: str = "mean", **style):
    rows = sorted(rows, key=x_of)
    ax.errorbar([x_of(r) for r in rows], [r[value] for r in rows], yerr=[half_width(r, value) for r in rows],
                capsize=3, **style)


def reference_line(ax, row, color, style, label, x_span=None):
    """A reference configuration's mean as a line, its 95% interval as a band; over `x_span` (a fraction's
    place on a categorical axis) or the whole axis."""
    if row is None:
        return
    lo, hi = row["ci95_low"], row["ci95_high"]
    if x_span is None:
        ax.axhline(row["mean"], color=color, linestyle=style, linewidth=1, alpha=0.8, label=label)
        if lo is not None:
            ax.axhspan(lo, hi, color=color, alpha=0.08)
        return
    ax.hlines(row["mean"], *x_span, color=color, linestyle=style, linewidth=1.2, label=label)
    if lo is not None:
        ax.fill_between(x_span, lo, hi, color=color, alpha=0.12)


LEGEND_WIDTH = 2.6  # inches a legend takes beside its axes


def legend(ax):
    """The axes' legend outside them, at their right: inside, it could sit on a line or dots of the data (the
    permutation strip's original order did). The figure widens by the legend, so the axes keep their width."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    width, height = ax.figure.get_size_inches()
    ax.figure.set_size_inches(width + LEGEND_WIDTH, height)


def metric_axis(ax, metric: str):
    """Label the axis; keep it within the metric's range, which a 2-seed t-interval easily overshoots."""
    task = metric.split("/", 1)[-1]
    declared = REGISTRY.get(task)
    ax.set_ylabel(PRETTY.get(metric) or (f"{task} dev {declared.metric}" if declared else metric))
    correlation = declared is not None and declared.metric in CORRELATIONS  # on [-1, 1]
    low, high = ax.get_ylim()
    ax.set_ylim(max(low, -1.02 if correlation else -0.02), min(high, 1.02))


def title(fig, text, rows):
    seeds = sorted({r["n"] for r in rows})
    n = f"n = {seeds[0]}" if len(seeds) == 1 else f"n = {seeds[0]}..{seeds[-1]}"
    fig.suptitle(f"{text}\n(mean over seeds, {n}; bars: 95% CI)", fontsize=10)


def find(rows, test):
    return next((r for r in rows if test(r["params"])), None)


def diverging(ax, matrix, label):
    """Colours centred on 0: red where the ablation hurt, blue where it helped."""
    finite = matrix[np.isfinite(matrix)]
    limit = float(np.abs(finite).max()) if finite.size else 0.0
    limit = limit or 1e-6
    import matplotlib
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="0.6")  # grey: not run
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    ax.figure.colorbar(image, ax=ax, label=label, shrink=0.85)
    return image

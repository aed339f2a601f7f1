"""Each finding's signed effect (the paper's direction positive), measured from its experiments' finished trials.

A finding names its measure, a function here (or in arms.py, probes.py), and its keywords; `measure(results, ctx,
**keywords)` returns its rows (`verdicts.Row`): one for most findings, one per fraction, task, pair or head for
those tested on several at once. Units: the seed for paired comparisons, the pair of seeds (jackknife) for
seed-vs-seed; where several configurations share one reference (the heads of a layer, random layer orders) the
seed, or seeds and orders in a two-level model (tasks/ablation/statistics.py).
"""
import math
from typing import Optional

import numpy as np

from ..ablation import statistics
from ..ablation.statistics import crossed_interval, paired_interval, unit_of
from . import null_baseline
from .arms import pending
from .probes import best_probe, nothing_to_test, probe_scores
from .verdicts import Row

RESTORE = ("restore", "restore", "restore", "restore_svcca")  # index i of the curve: layer i restored


class Results:
    """The finished trials of one run of each experiment, by (experiment, sweep label)."""

    def __init__(self, null: Optional[null_baseline.Null] = None):
        self.records = {}
        self.null = null        # the layer ratios' null baseline (null_baseline.py), where one is kept
        self.source = {}        # {experiment: the run label its trials were kept under}
        self.read = set()       # the experiments select() has read since it was last cleared

    def add(self, experiment: str, label: str, records: list, source: str = ""):
        self.records[(experiment, label)] = records
        if source:
            self.source[experiment] = source

    def has(self, experiment: str) -> bool:
        return any(e == experiment and rs for (e, _), rs in self.records.items())

    def select(self, experiment: str, label: str, config=None, fraction=None, group=None) -> list:
        self.read.add(experiment)
        return [r for r in self.records.get((experiment, label), ())
                if (config is None or config == r.config) and (group is None or group == r.group)
                and (fraction is None or math.isclose(r.data_fraction, fraction))]

    def values(self, experiment: str, label: str, metric: str, config=None, fraction=None, group=None) -> dict:
        """{unit: value} of `metric`: the unit is the seed, or the pair of seeds of a seed-vs-seed trial."""
        out = {}
        for r in self.select(experiment, label, config, fraction, group):
            value = r.metrics.get(metric)
            if value is not None:
                out[unit_of(r)] = value
        return out


def combine(function, *series: dict) -> dict:
    """function(a, b, ...) per unit, over the units every series has."""
    common = set(series[0]).intersection(*series[1:]) if series else set()
    return {s: function(*(x[s] for x in series)) for s in sorted(common, key=str)}


def estimate(values: dict) -> Optional[dict]:
    """The 95% interval of per-seed values, or of per-pair values (jackknife over seeds)."""
    values = {k: v for k, v in values.items() if v is not None and math.isfinite(v)}
    return statistics.estimate(values) if values else None


def minus(a: float, b: float) -> float:
    return a - b


def ratio_minus_one(a: float, b: float) -> float:
    return a / b - 1 if b else math.nan


# ---------------------------------------------------------------------------- partial reinitialisation


def score(results, ctx, k: int, fraction: float, experiment: Optional[str] = None) -> dict:
    """{seed: primary-task dev metric} with layers >= k re-drawn."""
    experiment = experiment or ("reinit-small" if math.isclose(fraction, ctx.scale.small) else "reinit-large")
    task = ctx.tasks["second"] if experiment == "task-dependence" else ctx.tasks["primary"]
    return results.values(experiment, "reinit", f"dev/{task}", f"from={k}", fraction)


def _k_minus(results, ctx, top: int, bottom: int, fraction: float, label: str = "") -> Row:
    """A row: k=`top` minus k=`bottom` at `fraction`, paired by seed."""
    return Row(label or f"k={top} minus k={bottom}", paired_interval(score(results, ctx, top, fraction),
                                                                     score(results, ctx, bottom, fraction)))


def _gain(results, ctx, top: int, bottom: int, fraction: float, experiment=None) -> dict:
    return combine(minus, *(score(results, ctx, k, fraction, experiment) for k in (top, bottom)))


def singh_scarce(results, ctx):
    s = ctx.scale.small
    return [_k_minus(results, ctx, ctx.n, 0, s, f"k={ctx.n} minus k=0 at {s:g}")]


def tamkin_data_size(results, ctx):
    s, large = ctx.scale.small, ctx.scale.large
    values = combine(minus, _gain(results, ctx, ctx.n, ctx.low, large), _gain(results, ctx, ctx.n, ctx.low, s))
    return [Row(f"gain of layers {ctx.low}..{ctx.n - 1}, {large:g} minus {s:g}", estimate(values))]


def singh_data_size(results, ctx):
    s, large = ctx.scale.small, ctx.scale.large
    values = combine(minus, _gain(results, ctx, ctx.n, 0, s), _gain(results, ctx, ctx.n, 0, large))
    return [Row(f"gain of every layer, {s:g} minus {large:g}", estimate(values))]


def singh_task_dependence(results, ctx):
    """The primary task's middle-third gain at the small fraction minus the second's at its trials' (smallest)
    fraction (the small one, or task-dependence-matched's: the primary's row count)."""
    s = ctx.scale.small
    second = min((r.data_fraction for r in results.select("task-dependence", "reinit")), default=s)
    values = combine(minus, _gain(results, ctx, ctx.high, ctx.low, s),
                     _gain(results, ctx, ctx.high, ctx.low, second, "task-dependence"))
    return [Row(f"middle-third gain, {ctx.tasks['primary']} at {s:g} minus {ctx.tasks['second']} at {second:g}",
                estimate(values))]


def college_downstream(results, ctx):
    return [_k_minus(results, ctx, ctx.high, ctx.low, ctx.scale.large)]


def college_not_monotone(results, ctx):
    return [_k_minus(results, ctx, k - 1, k, ctx.scale.large) for k in range(1, ctx.n + 1)]


def tamkin_blocks(results, ctx):
    keep = f"keep={ctx.low}:{ctx.high - ctx.low}"
    metric, large = f"dev/{ctx.tasks['primary']}", ctx.scale.large
    return [Row(f"{keep} minus from=0", paired_interval(*(results.values("blocks", "blocks", metric, c, large)
                                                          for c in (keep, "from=0"))))]


def mean_over_heads(results, ctx, experiment: str, sign: int) -> list:
    """sign * (the mean over the layer's heads re-drawn - none), per seed: the seed is the unit (n = seeds), so the
    shared reference's noise is in the interval; the heads are every head of the layer (the population the claim
    is about), not a sample, so their spread adds none. sign +1 for 'a head re-drawn helps' (the top layer), -1
    for 'hurts' (the bottom)."""
    metric, large = f"dev/{ctx.tasks['primary']}", ctx.scale.large
    none = results.values(experiment, "heads", metric, f"from={ctx.n}", large)
    configs = sorted({r.config for r in results.select(experiment, "heads") if r.params.get("scheme") == "head"})
    members = [v for v in (results.values(experiment, "heads", metric, c, large) for c in configs) if v]
    heads = {s: float(np.mean([m[s] for m in members])) for s in set(none).intersection(*members)} if members else {}
    found = paired_interval(*((heads, none) if sign > 0 else (none, heads))) if heads else None
    which = "top" if sign > 0 else "bottom"
    return [Row(f"{'mean over heads minus none' if sign > 0 else 'none minus mean over heads'}, {which} layer, "
                f"{len(members)} heads, the seed the unit", found)]


# ---------------------------------------------------------------------------- permutation


def tamkin_permute(results, ctx):
    """Original minus the random orders: a two-level crossed model over seeds and orders (the original is one
    reference shared by every order at each seed; the orders are a sample of the n! - 1)."""
    metric = f"dev/{ctx.tasks['primary']}"
    original = results.values("permute", "permute", metric, "order=" + "-".join(map(str, range(ctx.n))))
    orders = sorted({r.config for r in results.select("permute", "permute") if r.params.get("random")})
    members = [m for m in (results.values("permute", "permute", metric, o) for o in orders) if m]
    found = crossed_interval(members, original) if original else None
    return [Row(f"original minus random order, {len(members)} orders x {found['n'] if found else 0} seeds "
                f"(seeds and orders both in the interval)", found)]


# ---------------------------------------------------------------------------- probes


def singh_probe_peak(results, ctx):
    rows = []
    for fraction in (ctx.scale.small, ctx.scale.large):
        layer, pooling = best_probe(results, ctx, fraction)
        best = probe_scores(results, ctx, layer, pooling, fraction) if layer is not None else {}
        rows.append(Row(f"fine-tuned minus probe (layer {layer}, {pooling}) at {fraction:g}",
                        paired_interval(score(results, ctx, ctx.n, fraction), best)))
    return rows


def _share(value, floor, ceiling):
    return (value - floor) / (ceiling - floor) if abs(ceiling - floor) > 1e-9 else math.nan


def singh_probe_needs_more(results, ctx):
    rows = []
    for fraction in (ctx.scale.small, ctx.scale.large):
        layer, pooling = best_probe(results, ctx, fraction)
        if layer is None:
            rows.append(Row(f"at {fraction:g}", None))
            continue
        ft = combine(_share, *(score(results, ctx, k, fraction) for k in (ctx.low, 0, ctx.n)))
        probe = combine(_share, *(probe_scores(results, ctx, x, pooling, fraction) for x in (ctx.low, 0, layer)))
        rows.append(Row(f"share at {ctx.low} layers, fine-tuning minus probing (best layer {layer}) at {fraction:g}",
                        estimate(combine(minus, ft, probe))))
    return rows


def tamkin_probe_not_sufficient(results, ctx):
    large = ctx.scale.large
    layer, _ = best_probe(results, ctx, large)
    if layer is None:
        return [Row("no probe results", None)]
    if layer >= ctx.n:
        return [Row(f"the best probe layer is the top one ({layer}): nothing to test", nothing_to_test())]
    return [_k_minus(results, ctx, ctx.n, layer, large, f"k={ctx.n} minus k={layer} (best probe layer) at {large:g}")]


def tamkin_probe_align(results, ctx):
    correlation = {}
    for fraction in (ctx.scale.small, ctx.scale.large):
        _, pooling = best_probe(results, ctx, fraction)
        ft = [score(results, ctx, k, fraction) for k in range(ctx.n + 1)]
        probe = [probe_scores(results, ctx, k, pooling, fraction) for k in range(ctx.n + 1)] if pooling else []
        correlation[fraction] = combine(lambda *v: float(np.corrcoef(v[:len(v) // 2], v[len(v) // 2:])[0, 1]),
                                        *ft, *probe) if pooling and all(ft) and all(probe) else {}
    values = combine(minus, correlation[ctx.scale.small], correlation[ctx.scale.large])
    return [Row(f"corr(fine-tuning, probe) at {ctx.scale.small:g} minus at {ctx.scale.large:g}", estimate(values))]


# ---------------------------------------------------------------------------- dynamics


def _layers_mean(results, ctx, curve: str, which: str, fraction, group=None, where=None) -> dict:
    """{unit: mean of `curve` over the layers `which` names}: of the dynamics' fine-tunings against the pretrained
    model, or of `group`'s trials (seed-vs-seed), or of the trials `where` = (experiment, sweep, config) names."""
    experiment, sweep, config = where or ("dynamics", "dynamics", None if group else "finetune")
    offset = 1 if curve == "svcca" else 0   # SVCCA's index 0: the embeddings' output
    series = [results.values(experiment, sweep, f"{curve}/{i + offset}", config, fraction, group)
              for i in null_baseline.layers(ctx.n, which)]
    return combine(lambda *v: float(np.mean(v)), *series) if series and all(series) else {}


def _ratios(results, ctx, curve: str, upper: str, lower: str, fraction: float, group=None, where=None) -> dict:
    """{unit: mean of `curve` over the `upper` layers / over the `lower` ones - 1}."""
    return combine(ratio_minus_one, *(_layers_mean(results, ctx, curve, which, fraction, group, where)
                                      for which in (upper, lower)))


def layer_ratio(results, ctx, curve: str, upper: str, lower: str, label: str, group=None,
                fractions=("large",)) -> list:
    """Per unit, the mean of `curve` over the `upper` layers / over the `lower` ones - 1, a row per fraction ("small",
    "large"; fine-tunings against the pretrained model, or `group`'s trials: seed-vs-seed)."""
    at = [getattr(ctx.scale, which) for which in fractions]
    return [Row(label if len(at) == 1 else f"{label} at {fraction:g}",
                estimate(_ratios(results, ctx, curve, upper, lower, fraction, group))) for fraction in at]


def against_null(results, ctx, curve: str, upper: str, lower: str, label: str, fractions=("large",)) -> list:
    """`layer_ratio`'s per-seed ratio minus the null's: an equal relative perturbation of every layer
    (null_baseline.py: `results.null`), a replicate per random direction; Welch's interval, so the null's spread is
    in it. A row per fraction; no interval without the null."""
    replicates, rows = null_baseline.replicates(results.null, curve, upper, lower, ctx.n), []
    relative = results.null.relative if results.null else 0
    for which in fractions:
        fraction = getattr(ctx.scale, which)
        values = [v for v in _ratios(results, ctx, curve, upper, lower, fraction).values() if math.isfinite(v)]
        found = statistics.difference_interval(values, replicates) if values and replicates else None
        rows.append(Row(f"{label} at {fraction:g} minus the null's ({len(replicates)} random directions at "
                        f"{relative:g} of each weight's norm)", found))
    return rows


def layer_ratios(results, ctx, curves: tuple, upper: str, lower: str, label: str, group=None) -> list:
    """`layer_ratio` of each curve (SVCCA and attention JS: a row each)."""
    return [row for curve in curves
            for row in layer_ratio(results, ctx, curve, upper, lower, f"{label}, {curve}", group)]


def singh_early_invariant(results, ctx):
    large = ctx.scale.large
    values = combine(lambda b, t: 1 - b / t if t else math.nan,
                     *(_layers_mean(results, ctx, "weight_l2", which, large) for which in ("bottom", "top")))
    return [Row("1 - L2 bottom third / top third", estimate(values))]


def singh_more_data(results, ctx):
    values = combine(ratio_minus_one, *(_layers_mean(results, ctx, "weight_l2", "all", fraction)
                                        for fraction in (ctx.scale.large, ctx.scale.small)))
    return [Row(f"mean L2 at {ctx.scale.large:g} / at {ctx.scale.small:g} - 1", estimate(values))]


def hao_restore(results, ctx):
    values = _ratios(results, ctx, RESTORE[3], "top", "bottom", ctx.scale.large, where=RESTORE[:3])
    return [Row("restore distance top / bottom - 1", estimate(values))]


def _datasets_ratios(results, ctx, curve: str) -> dict:
    """{seed: dataset-vs-dataset `curve`, top third / bottom third - 1} (the primary against the second task)."""
    where = ("datasets", "dynamics", f"tasks={ctx.tasks['primary']}-{ctx.tasks['second']}")
    return _ratios(results, ctx, curve, "top", "bottom", ctx.scale.large, where=where)


def hao_datasets(results, ctx):
    """Dataset-vs-dataset distance, top third / bottom third - 1, for SVCCA and attention JS (a row each)."""
    config = f"tasks={ctx.tasks['primary']}-{ctx.tasks['second']}"
    return [Row(f"{config}: {curve} top / bottom - 1", estimate(_datasets_ratios(results, ctx, curve)))
            for curve in ("svcca", "attention_js")]


def against_pair_null(results, ctx, curves: tuple, source: str, label: str, what: str, follow_up: str) -> list:
    """Seed-vs-seed (`source` "seeds": per pair of seeds, jackknife) or dataset-vs-dataset ("datasets": per seed)
    top third / bottom third - 1 of each curve, minus the null's pair form: two independently perturbed copies
    compared the same way (null_baseline.py --pairs: `results.null.pairs`, a replicate per pair of random
    directions); Welch over the two estimates, so the null's spread is in the interval. Pending without it."""
    pairs = results.null.pairs if results.null else None
    if not pairs:
        return pending(results, ctx, what, follow_up)
    rows = []
    for curve in curves:
        values = _ratios(results, ctx, curve, "top", "bottom", ctx.scale.large, "seed-vs-seed") \
            if source == "seeds" else _datasets_ratios(results, ctx, curve)
        null = [v for v in null_baseline.replicates(pairs, curve, "top", "bottom", ctx.n) if math.isfinite(v)]
        found = estimate(values)
        rows.append(Row(f"{label}, {curve} minus the null's ({len(null)} pairs of random directions at "
                        f"{pairs.relative:g} of each weight's norm)",
                        statistics.estimates_difference(found, statistics.interval(null)) if found and null else None))
    return rows


def singh_abstract(results, ctx):
    """The pretrained model at the small fraction minus every layer re-drawn at the large one (more data, no
    pre-training), paired by seed as every comparison of trials at the same seeds (the seed draws the head and the
    data order in both)."""
    small = score(results, ctx, ctx.n, ctx.scale.small, "reinit-small")
    large = score(results, ctx, 0, ctx.scale.large, "reinit-large")
    return [Row(f"pretrained at {ctx.scale.small:g} minus every layer re-drawn at {ctx.scale.large:g}",
                paired_interval(small, large))]


def college_not_constant(results, ctx):
    """Per seed, the mean step score(k) - score(k-1) over the bottom third's k minus over the top third's: a
    constant change would make it zero; positive when keeping a bottom layer pretrained is worth more."""
    large = ctx.scale.large
    scores = [score(results, ctx, k, large) for k in range(ctx.n + 1)]
    bottom, top = range(1, ctx.low + 1), range(ctx.high + 1, ctx.n + 1)

    def contrast(*v):
        return float(np.mean([v[k] - v[k - 1] for k in bottom]) - np.mean([v[k] - v[k - 1] for k in top]))
    values = combine(contrast, *scores) if all(scores) else {}
    return [Row(f"mean step over k = {bottom[0]}..{bottom[-1]} minus over k = {top[0]}..{top[-1]}", estimate(values))]

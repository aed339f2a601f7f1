"""Intervals over seeds that respect which values are independent.

A sweep's seeds are its independent units. Two configurations run at the same
seeds share the seed's data order and head initialisation, so their difference
is estimated from the per-seed differences (a paired t-interval), not from two
intervals as if they were independent. Seed-vs-seed comparisons (every pair of
fine-tunings) reuse each seed in several pairs: n seeds give n(n-1)/2 pairs but
only n independent units, so their interval is a leave-one-seed-out jackknife
with n - 1 degrees of freedom. A mean over configurations (the random layer
orders of a permutation sweep, the heads of a layer) takes the configuration as
its unit, each averaged over its seeds first.

This module is the one place that decides both: `unit_of` (a trial's unit: its seed, or its pair of
seeds) and `estimate` (the interval of values keyed by those units: plain over seeds, jackknife over
seed pairs), `change` (paired by seed, or from a seed-vs-seed floor). The sweep's summary and the
reproduction's measures both use them.

Each function returns {"n", "mean", "std", "ci95_low", "ci95_high"}: the
interval is mean -/+ t(0.975, df) * std / sqrt(n); None where one unit gives no
spread.
"""
import math

import numpy as np


def unit_of(record: dict):
    """A trial's independent unit: its seed, or its pair of seeds for a seed-vs-seed comparison."""
    params = record["params"]
    return tuple(params["seeds"]) if "seeds" in params else record["seed"]


def estimate(values: dict) -> dict:
    """The interval of {unit: value}: a t-interval over seeds, or the jackknife over seeds for seed pairs."""
    if isinstance(next(iter(values)), tuple):
        return pairwise_interval(values)
    return interval(values.values())


def change(members: list, reference: dict):
    """The paired change of one configuration ({unit: value}) or a pool's (each averaged over its seeds first) from
    the reference, over common seeds; from a seed-vs-seed reference (its units are seed pairs), one
    configuration's difference from that floor, its interval over the seeds both share."""
    if len(members) == 1 and reference and isinstance(next(iter(reference)), tuple):
        return floor_difference(members[0], reference)
    return pooled_paired_interval(members, reference)


def _t_interval(mean: float, std, n: int, df: int) -> dict:
    if std is None or df < 1:
        return {"n": n, "mean": mean, "std": None, "ci95_low": None, "ci95_high": None}
    from scipy import stats
    half = float(stats.t.ppf(0.975, df)) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}


def interval(values) -> dict:
    """Mean, sample std and 95% t-interval of the mean of independent values."""
    x = np.asarray(list(values), dtype=np.float64)
    n = len(x)
    return _t_interval(float(x.mean()), float(x.std(ddof=1)) if n > 1 else None, n, n - 1)


def paired_interval(values: dict, reference: dict) -> dict:
    """The mean difference values[s] - reference[s] over the seeds s both have, with the t-interval of those
    per-seed differences; None without a common seed."""
    common = sorted(set(values) & set(reference))
    if not common:
        return None
    return interval(values[s] - reference[s] for s in common)


def pairwise_interval(values: dict) -> dict:
    """The mean over pairs {(seed a, seed b): value} of n seeds, with a leave-one-seed-out jackknife interval.

    n is the number of seeds: the pairs share them, so they are not independent.
    std is the jackknife standard error times sqrt(n), so that the interval has
    the form of the others; it needs 3 seeds (leaving one out must leave a pair).
    """
    units = sorted({s for pair in values for s in pair})
    n, mean = len(units), float(np.mean(list(values.values())))
    left_out = [[v for pair, v in values.items() if unit not in pair] for unit in units]
    if n < 3 or not all(left_out):
        return _t_interval(mean, None, n, 0)
    estimates = np.array([np.mean(v) for v in left_out])
    variance = (n - 1) / n * float(((estimates - estimates.mean()) ** 2).sum())
    return _t_interval(mean, math.sqrt(variance * n), n, n - 1)


def pooled_interval(members: list) -> dict:
    """The mean over configurations, each a {seed: value} averaged over its seeds first; a configuration is the
    unit (n = configurations)."""
    return interval(np.mean(list(m.values())) for m in members)


def pooled_paired_interval(members: list, reference: dict) -> dict:
    """Per seed, the configurations' mean minus the reference, over the seeds every configuration and the
    reference have; the seed is the unit."""
    common = set(reference).intersection(*members)
    if not common:
        return None
    return paired_interval({s: float(np.mean([m[s] for m in members])) for s in common}, reference)



def floor_difference(values: dict, pairs: dict) -> dict:
    """The mean over seeds {seed: value} minus the mean over seed pairs {(a, b): value} of the same seeds (the
    seed-vs-seed floor: dynamics' "is layer i's change larger than two seeds' difference?"), with a
    leave-one-seed-out jackknife interval: both means share the seeds, which are the units (n - 1 degrees of
    freedom, needing 3 seeds as `pairwise_interval`). None without a seed and a pair in common."""
    units = sorted(set(values) & {s for pair in pairs for s in pair})
    pairs = {p: v for p, v in pairs.items() if set(p) <= set(units)}
    if not units or not pairs:
        return None

    def statistic(kept):
        inside = [v for p, v in pairs.items() if set(p) <= kept]
        return float(np.mean([values[s] for s in kept])) - float(np.mean(inside)) if inside else None

    n, mean = len(units), statistic(set(units))
    estimates = [statistic(set(units) - {unit}) for unit in units]
    if n < 3 or any(e is None for e in estimates):
        return _t_interval(mean, None, n, 0)
    estimates = np.array(estimates)
    variance = (n - 1) / n * float(((estimates - estimates.mean()) ** 2).sum())
    return _t_interval(mean, math.sqrt(variance * n), n, n - 1)

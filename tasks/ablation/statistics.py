"""Intervals over seeds that respect which values are independent.

A sweep's seeds are its independent units. Two configurations run at the same
seeds share the seed's data order and head initialisation, so their difference
is estimated from the per-seed differences (a paired t-interval), not from two
intervals as if they were independent. Seed-vs-seed comparisons (every pair of
fine-tunings) reuse each seed in several pairs: n seeds give n(n-1)/2 pairs but
only n independent units, so their interval is a leave-one-seed-out jackknife
with n - 1 degrees of freedom. A mean over configurations (the random layer
orders of a permutation sweep, the heads of a layer) against one reference run at
the same seeds must carry the reference's noise as well as the configurations': per
seed, the configurations' mean minus the reference (`pooled_paired_interval`, the seed
the unit: right when the configurations are every one there is, as the heads of a
layer), or, when they are a sample of many (random layer orders), a two-level crossed
model over seeds and configurations (`crossed_interval`: both the seeds' and the
sample's spread). The configuration as the unit, each minus the same reference, leaves
the reference's noise out (tests/tasks/ablation/test_interval_coverage.py shows how far).

This module is the one place that decides both: `unit_of` (a trial's unit: its seed, or its pair of
seeds) and `estimate` (the interval of values keyed by those units: plain over seeds, jackknife over
seed pairs), `change` (paired by seed, or from a seed-vs-seed floor). The sweep's summary and the
reproduction's measures both use them.

Each function returns {"n", "mean", "std", "ci95_low", "ci95_high"}: the
interval is mean -/+ t(0.975, df) * std / sqrt(n); None where one unit gives no
spread.
"""
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np


def unit_of(line):
    """A trial's independent unit (`line` its line.TrialLine): its seed, or its pair of seeds for a seed-vs-seed
    comparison."""
    return tuple(line.params["seeds"]) if "seeds" in line.params else line.seed


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


def _t_interval(mean: float, std, n: int, df: float, level: float = 0.95) -> dict:
    if std is None or df is None or df < 1 or not math.isfinite(std):
        return {"n": n, "mean": mean, "std": None, "ci95_low": None, "ci95_high": None}
    from scipy import stats
    half = float(stats.t.ppf(1 - (1 - level) / 2, df)) * std / math.sqrt(n)
    out = {"n": n, "mean": mean, "std": std, "df": df, "ci95_low": mean - half, "ci95_high": mean + half}
    return out if level == 0.95 else {**out, "level": level}


@dataclass(frozen=True)
class Spread:
    """What an estimate's interval is drawn from: its units, mean, one unit's std (None: no spread) and
    degrees of freedom (an estimate that does not record them has n - 1)."""
    n: int
    mean: Optional[float] = None
    std: Optional[float] = None
    df: Optional[float] = None

    @classmethod
    def of(cls, estimate: dict) -> "Spread":
        spread = cls(**{key: value for key, value in estimate.items() if key in ("n", "mean", "std", "df")})
        return spread if spread.df is not None else cls(spread.n, spread.mean, spread.std, spread.n - 1)

    @property
    def variance(self) -> float:
        """The squared standard error of the mean (0 without a spread)."""
        return 0.0 if self.std is None else self.std ** 2 / self.n


def at_level(estimate, level: float):
    """The same estimate's two-sided interval at `level` (0.90 for an equivalence's TOST, 1 - 0.05 / rows for
    Bonferroni), from its mean, std, n and degrees of freedom; unchanged without a spread."""
    if not estimate or "n" not in estimate or (spread := Spread.of(estimate)).std is None or spread.n < 2:
        return estimate
    # the old level goes: a fresh interval at exactly 95% carries no "level" key to replace it
    kept = {key: value for key, value in estimate.items() if key != "level"}
    return {**kept, **_t_interval(spread.mean, spread.std, spread.n, spread.df, level)}


def interval(values) -> dict:
    """Mean, sample std and 95% t-interval of the mean of independent values."""
    x = np.asarray(list(values), dtype=np.float64)
    n = len(x)
    return _t_interval(float(x.mean()), float(x.std(ddof=1)) if n > 1 else None, n, n - 1)


def difference_interval(values, reference) -> dict:
    """mean(values) - mean(reference) of two independent samples (Welch: each side's variance, Satterthwaite's
    degrees of freedom), so the reference's own spread is in the interval; n is len(values). A reference of one
    value has no spread to carry: the interval is then the values' alone."""
    a, b = np.asarray(list(values), dtype=np.float64), np.asarray(list(reference), dtype=np.float64)
    n, m = len(a), len(b)
    mean = float(a.mean() - b.mean())
    if n < 2:
        return _t_interval(mean, None, n, None)
    return _welch(mean, n, a.var(ddof=1) / n, n - 1, b.var(ddof=1) / m if m > 1 else 0.0, m - 1)


def estimates_difference(a: dict, b: dict) -> dict:
    """a's mean minus b's, of two independent estimates (each with "n", "mean", "std": one unit's spread, so the
    standard error is std / sqrt(n), and "df"): Welch-Satterthwaite, as `difference_interval` for two samples, so
    an estimate from seed pairs (jackknife) can be set against a sample; n is a's. A b without spread carries none."""
    a, b = Spread.of(a), Spread.of(b)
    if a.std is None:
        return _t_interval(a.mean - b.mean, None, a.n, None)
    return _welch(a.mean - b.mean, a.n, a.variance, a.df, b.variance, b.df)


def _welch(mean: float, n: int, va: float, da: float, vb: float, db: float) -> dict:
    """The interval of a difference whose two sides have squared standard errors va and vb on da and db degrees of
    freedom (Welch-Satterthwaite; a side without spread adds none), reported with n units."""
    df = (va + vb) ** 2 / (va ** 2 / da + (vb ** 2 / db if vb else 0.0)) if va + vb > 0 else da
    return _t_interval(mean, math.sqrt((va + vb) * n), n, float(df))


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



def crossed_interval(members: list, reference: dict) -> dict:
    """Configurations sampled from many (random layer orders), each run at the same seeds as one reference: the
    mean of d[s, c] = reference[s] - member_c[s] over seeds s and configurations c, with the variance of a two-way
    random-effects model, d = mu + seed_s + config_c + e: Var(mean) = (MS_seed + MS_config - MS_error) / (S C)
    (never below MS_error / (S C)), degrees of freedom by Satterthwaite (at least 1). It carries the reference's
    noise (in the seed term) and which configurations were drawn (the configuration term); n is the seeds. None
    without two seeds and two configurations in common."""
    seeds = sorted(set(reference).intersection(*members), key=str) if members else []
    if len(seeds) < 2 or len(members) < 2:
        return None
    d = np.array([[reference[s] - m[s] for m in members] for s in seeds], dtype=np.float64)
    n_seeds, n_configs = d.shape
    mean = float(d.mean())
    rows, cols = d.mean(axis=1), d.mean(axis=0)
    ms_seed, ms_config = n_configs * rows.var(ddof=1), n_seeds * cols.var(ddof=1)
    residual = d - rows[:, None] - cols[None, :] + mean
    ms_error = float((residual ** 2).sum()) / ((n_seeds - 1) * (n_configs - 1))
    total = max(ms_seed + ms_config - ms_error, ms_error, 1e-300)
    df = float(total) ** 2 / (ms_seed ** 2 / (n_seeds - 1) + ms_config ** 2 / (n_configs - 1)
                       + ms_error ** 2 / ((n_seeds - 1) * (n_configs - 1)))
    df = max(df, 1.0)   # Satterthwaite can fall below one with three seeds: one is the t-interval's own floor
    variance = total / (n_seeds * n_configs)
    return {**_t_interval(mean, math.sqrt(variance * n_seeds), n_seeds, df), "configurations": n_configs}


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

"""What each line's design can decide at its n, from the per-seed sd of its effect: power, decided before the run.

A direction line's interval is m -/+ t(0.975, n-1) se, se = sd / sqrt(n). With 80% power (t(0.80, n-1) more
standard errors) it calls "reproduced" a true effect of at least max(SESOI + t80 se, (t95 + t80) se), and "not
reproduced" one of at most SESOI - (t95 + t80) se; when that is below zero not even an absent effect is called not
reproduced: the design is **underpowered**. An equivalence (90% interval, TOST) calls an absent effect reproduced
with 80% power when (t95 + t90) se <= margin. A line of several rows reads each side at the level and power its
`combine` needs (`sides`). The n a line needs is the smallest at which it is powered; past the seeds a GPU day gives
its experiments (plan.seeds_a_gpu_day) the line is "undecidable at this scale", not "underpowered".

The sd: the model's pilot's (measured before any declared run) and the run's own; the larger decides, so a design
the pilot flattered is still called underpowered once its run shows the spread. Per row at its own level; a finding's
power is its weakest row's. Each model's pilot is its own (its results folder's pilot run, judging.pilot_of;
PILOT_SD for the embedded model): a model without one gets no power labels rather than borrow an sd.
"""
import math
from dataclasses import replace
from typing import Optional

from .experiments import EXPERIMENTS, seeds_of
from .verdicts import INCONCLUSIVE, UNDECIDABLE, UNDERPOWERED, Power, level_of

# Per-seed sd of each paired effect in the 2026-11-24 pilot (n = 3, 120-step trials, fraction 0.03 and 0.25):
# half-width * sqrt(3) / t(0.975, 2) (docs/measurements/2026-11-24-reproduction.md; its raw trials were not kept).
PILOT_SD = {"reinit at 0.25": 0.017, "reinit at 0.03": 0.005, "permute": 0.016, "freeze STS": 0.002,
            "transfer": 0.025, "dynamics L2": 0.011}
PILOT_MODEL = "minilm"      # the model the 2026-11-24 pilot ran on
PILOT_DIR = "pilot-run"     # RESULTS/pilot-run/EXPERIMENT/RUN: another model's own pilot run (judging.pilot_of)
POWER = 0.80
MAX_N = 100_000            # beyond it a needed n reads "more than"
NOT_COMPUTED = "power not yet computed for this model"
UNDECIDED = (UNDERPOWERED, UNDECIDABLE)   # the verdicts a power label says


def _t(q: float, df: float) -> float:
    from scipy import stats
    return float(stats.t.ppf(q, df))


def sides(kind: str, rows: int = 1, combine: str = "single") -> tuple:
    """(level, power) per row of the side an absent effect must reach (an equivalence's "reproduced", a direction's
    "not reproduced"), then of the other side. Of a several-row line, the side one row decides reads Bonferroni's
    level 1 - alpha / rows at 80% power, the side every row must reach each row's level at 80% ** (1 / rows) power,
    so that all rows reach it together with 80% (verdicts.py's sides)."""
    alpha = (1 - level_of(kind)) / 2      # one-sided: 0.025 for a direction, 0.05 for each side of TOST
    one, every = (1 - alpha / rows, POWER), (1 - alpha, POWER ** (1 / rows))
    if rows <= 1 or combine == "single":
        return (1 - alpha, POWER), (1 - alpha, POWER)
    absent_by_one = (combine == "all") == (kind == "direction")   # an "all" direction fails on one row
    return (one, every) if absent_by_one else (every, one)


def reach(sd: float, n: int, sesoi: float, kind: str = "direction", rows: int = 1,
          combine: str = "single") -> Power:
    """What a design of n units with per-unit sd `sd` calls reproduced and not reproduced with 80% power, for a line
    of `rows` rows combined by `combine` (each row at the level and power its side needs: `sides`)."""
    if n < 2 or sd is None or not math.isfinite(sd):
        return Power(n, sd)
    se, df = sd / math.sqrt(n), n - 1
    (level, power), (other, other_power) = sides(kind, rows, combine)
    if kind == "equivalence":   # TOST: an absent effect within the margin on both sides, each at `level`
        reach_se = (_t(other, df) + _t(other_power, df)) * se
        return Power(n, sd, (_t(level, df) + _t(1 - (1 - power) / 2, df)) * se <= sesoi,
                     reproduced_within=sesoi - (_t(level, df) + _t(power, df)) * se,
                     not_reproduced_beyond=sesoi + reach_se)
    absent = (_t(level, df) + _t(power, df)) * se
    return Power(n, sd, sesoi - absent >= 0, not_reproduced_below=sesoi - absent,
                 reproduced_from=max(sesoi + _t(other_power, df) * se, (_t(other, df) + _t(other_power,
                                                                                           df)) * se))


def needs(sd: float, sesoi: float, kind: str = "direction", rows: int = 1, combine: str = "single") -> Optional[int]:
    """The smallest n at which the design is powered (None beyond MAX_N, or without an sd): doubling, then halving
    the gap (powered grows with n)."""
    if sd is None or not math.isfinite(sd):
        return None
    def powered(n):
        return reach(sd, n, sesoi, kind, rows, combine).powered
    high = 2
    while not powered(high):
        if high > MAX_N:
            return None
        high *= 2
    low = max(1, high // 2)     # not powered (or below 2)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if powered(middle) else (middle, high)
    return high


def assess(finding, rows: list, declared_n: int, pilot: dict) -> Optional[Power]:
    """The finding's power: its pilot's design at the declared n, its run's (each row's sd and n), and the label's:
    the weakest row at the larger of the two sds. A line whose effect combines the pilot's effects `finding.pilot`
    (independent) has their sds in quadrature; none where the pilot lacks one of them."""
    keys = tuple(finding.pilot)
    declared = math.sqrt(sum(pilot[k] ** 2 for k in keys)) if keys and set(keys) <= set(pilot) else None
    measured = [(r.estimate.n, r.estimate.std) for r in rows if r.estimate and r.estimate.std is not None]
    if not measured and declared is None:
        return None
    found, shape = [], (finding.kind, max(1, len(measured) if measured else len(rows)), finding.combine)
    for n, std in measured or [(declared_n, None)]:
        sd = max((x for x in (declared, std) if x is not None), default=None)
        found.append(replace(reach(sd, n or 0, finding.sesoi, *shape), pilot_sd=declared,
                             needs=needs(sd, finding.sesoi, *shape), achieved_sd=std, rows=shape[1]))
    return max(found, key=lambda f: f.needs or MAX_N + 1)


def need_text(power: Power) -> str:
    """'n >= 12', or 'n > 100,000' where no n up to MAX_N would do."""
    return f"n >= {power.needs:,}" if power.needs else f"n > {MAX_N:,}"


def about(n: Optional[int]) -> str:
    """A needed n past a day's budget, to two figures: 'about 1,400' ('more than 100,000' past MAX_N)."""
    return f"about {float(f'{n:.2g}'):,.0f}" if n else f"more than {MAX_N:,}"


def label(power: Optional[Power]) -> str:
    """'underpowered at n = 5, needs n >= 12'; 'undecidable at this scale (needs n of about 1,400)' where a GPU day
    gives fewer seeds (power.day); '' for a powered design."""
    if not power or power.powered or power.not_computed:
        return ""
    if beyond_a_day(power):
        return f"{UNDECIDABLE} (needs n of {about(power.needs)})"
    return f"underpowered at n = {power.n}, needs {need_text(power)}"


def beyond_a_day(power: Power) -> bool:
    """Whether the line needs more seeds than a GPU day gives its experiments (plan.seeds_a_gpu_day)."""
    return bool(power.day) and (power.needs or MAX_N + 1) > power.day


def describe(power: Power, sesoi: float, kind: str) -> str:
    """One cell: what the design can call reproduced and not reproduced at its n (80% power)."""
    if power.not_computed or power.sd is None:
        return power.not_computed or "no sd to compute it from"
    pilot = f" (pilot {power.pilot_sd:.3g})" if power.pilot_sd else " (no pilot: the run's own)"
    what = f"n = {power.n}, sd {power.sd:.3g}{pilot}: "
    if kind == "equivalence":
        within = power.reproduced_within
        what += (f"reproduced when the 90% interval lies within -/+ {sesoi:g} ("
                 + (f"80% power for |effect| <= {within:.3g})" if within > 0 else "under 80% power even at a true 0)")
                 + f"; not reproduced (80% power) if |effect| >= {power.not_reproduced_beyond:.3g}")
    else:
        what += (f"reproduced if effect >= {power.reproduced_from:.3g}, not reproduced if effect <= "
                 f"{power.not_reproduced_below:+.3g}")
    return what + ("; powered for both" if power.powered else f"; both at 80% power need {need_text(power)}")


def apply(verdict, scale, pilot: Optional[dict] = PILOT_SD, day: Optional[int] = None):
    """The verdict's power at its n (the declared seeds before a run), from the model's `pilot` (None: not computed);
    an inconclusive line whose design cannot reach both verdicts reads "underpowered": its interval could not have
    decided it; "undecidable at this scale" where the n it needs is past `day`, the seeds a GPU day gives it."""
    finding = verdict.finding
    if finding.experiment is None:
        return verdict
    if pilot is None:
        verdict.power = Power(not_computed=f"{NOT_COMPUTED} (no pilot run of its own: RESULTS/{PILOT_DIR})")
    else:
        verdict.power = assess(finding, verdict.rows, len(seeds_of(EXPERIMENTS[finding.experiment], scale)), pilot)
        if verdict.power is not None and day:
            verdict.power = replace(verdict.power, day=day)
        if verdict.outcome == INCONCLUSIVE and verdict.power and not verdict.power.powered:
            verdict.outcome = UNDECIDABLE if beyond_a_day(verdict.power) else UNDERPOWERED
    return verdict

"""What each line's design can decide at its n, from the per-seed sd of its effect: power, decided before the run.

A direction line's interval is m -/+ t(0.975, n-1) se, se = sd / sqrt(n). With 80% power (t(0.80, n-1) more
standard errors) it calls "reproduced" a true effect of at least max(SESOI + t80 se, (t95 + t80) se), and "not
reproduced" one of at most SESOI - (t95 + t80) se; when that is below zero not even an absent effect is called not
reproduced: the design is **underpowered**. An equivalence (90% interval, TOST) calls an absent effect reproduced
with 80% power when (t95 + t90) se <= margin. The n a line needs is the smallest at which it is powered.

The sd: the model's pilot's (measured before any declared run) and the run's own; the larger decides, so a design
the pilot flattered is still called underpowered once its run shows the spread. Per row at its own level; a finding's
power is its weakest row's. Each model's pilot is its own (its results folder's pilot run, judging.pilot_of;
PILOT_SD for the embedded model): a model without one gets no power labels rather than borrow an sd.
"""
import math
from typing import Optional

from .experiments import EXPERIMENTS, seeds_of
from .verdicts import INCONCLUSIVE, UNDERPOWERED

# Per-seed sd of each paired effect in the 2026-11-24 pilot (n = 3, 120-step trials, fraction 0.03 and 0.25):
# half-width * sqrt(3) / t(0.975, 2) (docs/measurements/2026-11-24-reproduction.md; its raw trials were not kept).
PILOT_SD = {"reinit at 0.25": 0.017, "reinit at 0.03": 0.005, "permute": 0.016, "freeze STS": 0.002,
            "transfer": 0.025, "dynamics L2": 0.011}
PILOT_MODEL = "minilm"      # the model the 2026-11-24 pilot ran on
PILOT_DIR = "pilot-run"     # RESULTS/pilot-run/EXPERIMENT/RUN: another model's own pilot run (judging.pilot_of)
POWER = 0.80
MAX_N = 200
NOT_COMPUTED = "power not yet computed for this model"


def _t(q: float, df: float) -> float:
    from scipy import stats
    return float(stats.t.ppf(q, df))


def reach(sd: float, n: int, sesoi: float, kind: str = "direction") -> dict:
    """What a design of n units with per-unit sd `sd` calls reproduced and not reproduced with 80% power."""
    if n < 2 or sd is None or not math.isfinite(sd):
        return {"n": n, "sd": sd, "powered": False, "reproduced_from": None, "not_reproduced_below": None}
    se, df = sd / math.sqrt(n), n - 1
    t_power = _t(POWER, df)
    if kind == "equivalence":
        reach_se = (_t(0.95, df) + t_power) * se
        return {"n": n, "sd": sd, "powered": (_t(0.95, df) + _t(1 - (1 - POWER) / 2, df)) * se <= sesoi,
                "reproduced_within": sesoi - reach_se, "not_reproduced_beyond": sesoi + reach_se}
    reach_se = (_t(0.975, df) + t_power) * se
    return {"n": n, "sd": sd, "powered": sesoi - reach_se >= 0, "not_reproduced_below": sesoi - reach_se,
            "reproduced_from": max(sesoi + t_power * se, reach_se)}


def needs(sd: float, sesoi: float, kind: str = "direction") -> Optional[int]:
    """The smallest n at which the design is powered (None beyond MAX_N, or without an sd)."""
    return next((n for n in range(2, MAX_N + 1) if reach(sd, n, sesoi, kind)["powered"]), None)


def assess(finding, rows: list, declared_n: int, pilot: dict) -> Optional[dict]:
    """The finding's power: its pilot's design at the declared n, its run's (each row's sd and n), and the label's:
    the weakest row at the larger of the two sds. A line whose effect combines the pilot's effects `finding.pilot`
    (independent) has their sds in quadrature; none where the pilot lacks one of them."""
    keys = tuple(finding.pilot)
    declared = math.sqrt(sum(pilot[k] ** 2 for k in keys)) if keys and set(keys) <= set(pilot) else None
    measured = [r.estimate for r in rows if r.estimate and r.estimate.get("std") is not None]
    if not measured and declared is None:
        return None
    found = []
    for estimate in measured or [{"n": declared_n, "std": None}]:
        sd = max((x for x in (declared, estimate["std"]) if x is not None), default=None)
        found.append({**reach(sd, estimate["n"] or 0, finding.sesoi, finding.kind), "pilot_sd": declared,
                      "needs": needs(sd, finding.sesoi, finding.kind), "achieved_sd": estimate["std"]})
    return max(found, key=lambda f: f["needs"] or MAX_N + 1)


def need_text(power: dict) -> str:
    """'n >= 12', or 'n > 200' where no n up to MAX_N would do."""
    return f"n >= {power['needs']}" if power.get("needs") else f"n > {MAX_N}"


def label(power: Optional[dict]) -> str:
    """'underpowered at n = 5, needs n >= 12' (or '> 200'), '' for a powered design."""
    if not power or power.get("powered") or power.get("not_computed"):
        return ""
    return f"underpowered at n = {power['n']}, needs {need_text(power)}"


def describe(power: dict, sesoi: float, kind: str) -> str:
    """One cell: what the design can call reproduced and not reproduced at its n (80% power)."""
    if power.get("not_computed") or power.get("sd") is None:
        return power.get("not_computed") or "no sd to compute it from"
    pilot = f" (pilot {power['pilot_sd']:.3g})" if power.get("pilot_sd") else " (no pilot: the run's own)"
    what = f"n = {power['n']}, sd {power['sd']:.3g}{pilot}: "
    if kind == "equivalence":
        within = power["reproduced_within"]
        what += (f"reproduced when the 90% interval lies within -/+ {sesoi:g} ("
                 + (f"80% power for |effect| <= {within:.3g})" if within > 0 else "under 80% power even at a true 0)")
                 + f"; not reproduced (80% power) if |effect| >= {power['not_reproduced_beyond']:.3g}")
    else:
        what += (f"reproduced if effect >= {power['reproduced_from']:.3g}, not reproduced if effect <= "
                 f"{power['not_reproduced_below']:+.3g}")
    return what + ("; powered for both" if power.get("powered") else f"; both at 80% power need {need_text(power)}")


def apply(verdict, scale, pilot: Optional[dict] = PILOT_SD):
    """The verdict's power at its n (the declared seeds before a run), from the model's `pilot` (None: not computed);
    an inconclusive line whose design cannot reach both verdicts reads "underpowered": its interval could not have
    decided it."""
    finding = verdict.finding
    if finding.experiment is None:
        return verdict
    if pilot is None:
        verdict.power = {"not_computed": f"{NOT_COMPUTED} (no pilot run of its own: RESULTS/{PILOT_DIR})"}
    else:
        verdict.power = assess(finding, verdict.rows, len(seeds_of(EXPERIMENTS[finding.experiment], scale)), pilot)
        if verdict.outcome == INCONCLUSIVE and verdict.power and not verdict.power["powered"]:
            verdict.outcome = UNDERPOWERED
    return verdict

"""What each line's design can decide at its n, from the per-seed sd of its effect: power, decided before the run.

A direction line's interval is m -/+ t(0.975, n-1) se, se = sd / sqrt(n). With 80% power (t(0.80, n-1) more
standard errors) it calls "reproduced" a true effect of at least max(SESOI + t80 se, (t95 + t80) se), and "not
reproduced" one of at most SESOI - (t95 + t80) se; when that is below zero not even an absent effect is called not
reproduced: the design is **underpowered**. An equivalence (90% interval, TOST) calls an absent effect reproduced
with 80% power when (t95 + t90) se <= margin. The n a line needs is the smallest at which it is powered.

The sd: the 2026-11-24 pilot's (`PILOT_SD`, 3 seeds, 120-step trials, before any declared run) and the run's own;
the larger decides, so a design the pilot flattered is still called underpowered once its run shows the spread.
Per row at its own level; a finding's power is its weakest row's. Each model's pilot is its own: its results folder's
pilot.json (pilot.py), else PILOT_SD for the embedded model it was measured on; a model without one gets no power
labels rather than borrow an sd.
"""
import json
import math
from pathlib import Path
from typing import Optional

from .experiments import EXPERIMENTS, seeds_of
from .verdicts import INCONCLUSIVE, UNDERPOWERED

# Per-seed sd of each paired effect in the 2026-11-24 pilot (n = 3, 120-step trials, fraction 0.03 and 0.25):
# half-width * sqrt(3) / t(0.975, 2) (docs/measurements/2026-11-24-reproduction.md; its raw trials were not kept).
PILOT_SD = {"reinit at 0.25": 0.017, "reinit at 0.03": 0.005, "permute": 0.016, "freeze STS": 0.002,
            "transfer": 0.025, "dynamics L2": 0.011}
PILOT_MODEL = "minilm"      # the model the 2026-11-24 pilot ran on
PILOT_FILE = "pilot.json"   # RESULTS/pilot.json: another model's own pilot (pilot.py)
POWER = 0.80
MAX_N = 200


def pilot_of(results_dir: Path, model: str) -> Optional[dict]:
    """The per-seed sds of the folder's model's own pilot ({PILOT_SD key: sd}): RESULTS/pilot.json's "sd", else
    PILOT_SD for the model it was measured on; None where the model has none."""
    path = Path(results_dir) / PILOT_FILE
    if path.exists():
        return {k: float(v) for k, v in json.loads(path.read_text(encoding="utf-8"))["sd"].items()}
    return PILOT_SD if model == PILOT_MODEL else None


def _t(q: float, df: float) -> float:
    from scipy import stats
    return float(stats.t.ppf(q, df))


NOT_COMPUTED = "power not yet computed for this model"


def pilot_sd(keys: tuple, pilot: Optional[dict] = None) -> Optional[float]:
    """The pilot's sd of a line whose effect combines the pilot's effects `keys` (independent: in quadrature);
    None where the pilot (PILOT_SD unless given) lacks one of them."""
    pilot = PILOT_SD if pilot is None else pilot
    if not keys or any(k not in pilot for k in keys):
        return None
    return math.sqrt(sum(pilot[k] ** 2 for k in keys))


def reach(sd: float, n: int, sesoi: float, kind: str = "direction") -> dict:
    """What a design of n units with per-unit sd `sd` calls reproduced and not reproduced with 80% power."""
    if n < 2 or sd is None or not math.isfinite(sd):
        return {"n": n, "sd": sd, "powered": False, "reproduced_from": None, "not_reproduced_below": None}
    se, df = sd / math.sqrt(n), n - 1
    if kind == "equivalence":
        t_level, t_power = _t(0.95, df), _t(POWER, df)
        return {"n": n, "sd": sd, "powered": (t_level + _t(1 - (1 - POWER) / 2, df)) * se <= sesoi,
                "reproduced_within": sesoi - (t_level + t_power) * se,
                "not_reproduced_beyond": sesoi + (t_level + t_power) * se}
    t_level, t_power = _t(0.975, df), _t(POWER, df)
    below = sesoi - (t_level + t_power) * se
    return {"n": n, "sd": sd, "powered": below >= 0, "not_reproduced_below": below,
            "reproduced_from": max(sesoi + t_power * se, (t_level + t_power) * se)}


def needs(sd: float, sesoi: float, kind: str = "direction") -> Optional[int]:
    """The smallest n at which the design is powered (None beyond MAX_N)."""
    if sd is None or not math.isfinite(sd):
        return None
    for n in range(2, MAX_N + 1):
        if reach(sd, n, sesoi, kind)["powered"]:
            return n
    return None


def assess(finding, rows: list, declared_n: int, pilot: Optional[dict] = None) -> Optional[dict]:
    """The finding's power: its pilot's design at the declared n, its run's (each row's sd and n), and the label's:
    the weakest row at the larger of the two sds."""
    measured = [r.estimate for r in rows if r.estimate and r.estimate.get("std") is not None]
    declared = pilot_sd(finding.pilot, pilot)
    if not measured and declared is None:
        return None
    worst = None
    for estimate in measured or [{"n": declared_n, "std": None}]:
        n = estimate["n"] or 0
        sds = [x for x in (declared, estimate.get("std")) if x is not None]
        sd = max(sds) if sds else None
        found = {**reach(sd, n, finding.sesoi, finding.kind), "needs": needs(sd, finding.sesoi, finding.kind),
                 "achieved_sd": estimate.get("std")}
        if worst is None or (found["needs"] or MAX_N + 1) > (worst["needs"] or MAX_N + 1):
            worst = found
    worst["pilot_sd"] = declared
    return worst


def need_text(power: dict) -> str:
    """'n >= 12', or 'n > 200' where no n up to MAX_N would do."""
    return f"n >= {power['needs']}" if power.get("needs") else f"n > {MAX_N}"


def label(power: Optional[dict]) -> str:
    """'underpowered at n = 5, needs n >= 12' (or '> 200'), '' for a powered design."""
    if not power or power.get("powered") or power.get("not_computed"):
        return ""
    return f"underpowered at n = {power['n']}, needs {need_text(power)}"


def describe(power: Optional[dict], sesoi: float, kind: str) -> str:
    """One cell: what the design can call reproduced and not reproduced at its n (80% power)."""
    if power and power.get("not_computed"):
        return power["not_computed"]
    if not power or power.get("sd") is None:
        return "no sd to compute it from"
    sds = f"sd {power['sd']:.3g}" + (f" (pilot {power['pilot_sd']:.3g})" if power.get("pilot_sd") else
                                     " (no pilot: the run's own)")
    if kind == "equivalence":
        within = power["reproduced_within"]
        what = (f"n = {power['n']}, {sds}: reproduced when the 90% interval lies within -/+ {sesoi:g} ("
                + (f"80% power for |effect| <= {within:.3g})" if within > 0 else "under 80% power even at a true 0)")
                + f"; not reproduced (80% power) if |effect| >= {power['not_reproduced_beyond']:.3g}")
    else:
        what = (f"n = {power['n']}, {sds}: reproduced if effect >= {power['reproduced_from']:.3g}, not reproduced "
                f"if effect <= {power['not_reproduced_below']:+.3g}")
    return what + ("; powered for both" if power.get("powered") else f"; both at 80% power need {need_text(power)}")


def apply(verdict, scale, pilot: Optional[dict] = PILOT_SD):
    """The verdict's power at its n (the declared seeds before a run), from the model's `pilot` (None: the model has
    none, and its power is not computed); an inconclusive line whose design cannot reach both verdicts reads
    "underpowered" instead: its interval could not have decided it."""
    finding = verdict.finding
    if finding.experiment is None:
        return verdict
    if pilot is None:
        verdict.power = {"not_computed": f"{NOT_COMPUTED} (no pilot of its own: RESULTS/{PILOT_FILE})"}
        return verdict
    declared_n = len(seeds_of(EXPERIMENTS[finding.experiment], scale))
    verdict.power = assess(finding, verdict.rows, declared_n, pilot)
    if verdict.outcome == INCONCLUSIVE and verdict.power and not verdict.power["powered"]:
        verdict.outcome = UNDERPOWERED
    return verdict

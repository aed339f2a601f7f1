"""Each report line's disclosure (what was run), the sentence that says what decides it, and its machine-readable
record (report.json), all from the verdict and the kept trials it read.

The disclosure states what every `--scale cpu` line shares but the papers do not: the learning rate, the
precision and the re-initialisation policy (the steps trained are each run's budget line in runs.md).
"""
import math

import numpy as np

from . import power
from .verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED, UNDERPOWERED

DEFAULT_LR = 1e-4   # ablate.py's --lr default: every sweep of the kept runs, which pass no --lr
POLICY = {"all": "every weight of a re-drawn layer (Singh & Giovanardi re-draw its linear weights only)",
          "linear": "the linear weights of a re-drawn layer"}


def _records(results, experiment: str, sweeps=None) -> list:
    """The experiment's trials, of the `sweeps` its run made where given (a follow-up's own sweeps beside the first
    run's)."""
    return [r for (e, s), rs in results.records.items() if e == experiment and (not sweeps or s in sweeps)
            for r in rs]


def disclosure(results, finding, metas: dict) -> str:
    """lr, precision and re-initialisation policy of the trials the line read: its
    experiment's, and where it read others (a data-size line's other fraction), each of theirs with its run.
    `metas`: {experiment: (run label, its kept.KeptRun or None)}, the line's own experiment first."""
    if finding.experiment is None:
        return ""
    if len(metas) == 1:
        return _disclosed(results, next(iter(metas)), next(iter(metas.values()))[1])
    text = " + ".join(f"{e} ({source} run): {_disclosed(results, e, meta)}" for e, (source, meta) in metas.items())
    # a run refuses a mix of devices or weights within itself; a line reading several runs says where they differ,
    # comparing only what each run records
    where = {e: (run.device, run.weights) if run else ("", "") for e, (_, run) in metas.items()}
    if any(len({w[i] for w in where.values() if w[i]}) > 1 for i in (0, 1)):
        text += "; its arms trained apart: " + "; ".join(
            f"{e} on {device or 'an unrecorded device'}" + (f", from weights {weights}" if weights else "")
            for e, (device, weights) in where.items())
    return text


def _disclosed(results, experiment: str, run) -> str:
    """`run`: the kept.KeptRun the line read, None where it read none. The steps each trial trained are the run's
    budget line in runs.md."""
    sweeps = run.sweeps if run else {}
    records = _records(results, experiment, sweeps)
    if not records:
        return "not run"
    lrs = {_lr(args) for args in sweeps.values()} or {DEFAULT_LR}
    parts = [f"lr {', '.join(f'{x:.0e}'.replace('e-0', 'e-') for x in sorted(lrs))}",
             f"precision {', '.join(sorted({str(r.get('precision', '?')) for r in records}))}"]
    policies = sorted({r["params"]["policy"] for r in records if (r.get("params") or {}).get("policy")})
    if policies:
        parts.append("re-drawn: " + "; ".join(POLICY.get(p, p) for p in policies))
    return "; ".join(parts)


def _lr(args: list) -> float:
    return float(args[args.index("--lr") + 1]) if "--lr" in args else DEFAULT_LR


def _interval(estimate) -> str:
    if not estimate or estimate.get("ci95_low") is None:
        return "no interval"
    level = estimate.get("level", 0.95)
    return f"the {level:.0%} interval [{estimate['ci95_low']:+.3f}, {estimate['ci95_high']:+.3f}]"


def _row_reason(row, sesoi: float, kind: str) -> str:
    e = row.estimate
    where = _interval(e)
    if kind == "equivalence":
        inside = "lies within" if row.verdict == REPRODUCED else "lies wholly outside" \
            if row.verdict == NOT_REPRODUCED else "crosses"
        return f"{where} {inside} -/+ {sesoi:g}"
    if row.verdict == REPRODUCED:
        return f"{where} lies above 0 and the estimate {e['mean']:+.3f} reaches {sesoi:g}"
    if row.verdict == NOT_REPRODUCED:
        return f"{where} ends below the SESOI {sesoi:g}"
    return f"{where} holds 0 or the estimate {e['mean']:+.3f} falls short of {sesoi:g}"


def decides(v) -> str:
    """One sentence: what decides this line (the row and the comparison that give its verdict)."""
    f = v.finding
    if v.outcome == NOT_TESTABLE:
        return f"Not testable here: {f.untestable}."
    pending = [r for r in v.rows if r.pending]
    if v.outcome == NOT_RUN:
        return (f"Not run yet: the follow-up `{pending[0].pending}` would measure it ({pending[0].label})." if pending
                else "Not run yet: its experiment has no kept results.")
    measured = [r for r in v.rows if r.estimate and not r.pending]
    name = v.outcome[0].upper() + v.outcome[1:]
    if len(measured) == 1:
        lead = f"{name}: {_row_reason(measured[0], f.sesoi, f.kind)}"
    else:
        undecided = (INCONCLUSIVE, UNDERPOWERED)   # an undecided line names the row that left it undecided
        wanted = undecided if v.outcome in undecided else (v.outcome,)
        key = [r for r in measured if r.verdict in wanted] or measured
        which = "every row, e.g." if f.combine == "all" and v.outcome == REPRODUCED else "row"
        lead = f"{name}: {which} '{key[0].label}': {_row_reason(key[0], f.sesoi, f.kind)}"
        if f.combine == "all" and v.outcome == NOT_REPRODUCED:
            lead += " (one failing row fails the whole: tested at 1 - alpha/rows)"
    if v.outcome == UNDERPOWERED:
        lead += f"; {power.label(v.power)}: at this n even an absent effect would not read not reproduced"
    elif v.outcome == INCONCLUSIVE and pending:
        lead += f"; the part '{pending[0].label}' is pending (follow-up `{pending[0].pending}`)"
    return lead + "."


def _number(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def record(v, protocol: int, disclosed: str, sentence: str) -> dict:
    """The line as data: report.json's entry."""
    f = v.finding
    rows = [{"label": r.label, "effect": _number((r.estimate or {}).get("mean")),
             "interval": [_number((r.estimate or {}).get("ci95_low")), _number((r.estimate or {}).get("ci95_high"))],
             "level": (r.estimate or {}).get("level", 0.95) if r.estimate else None,
             "n": (r.estimate or {}).get("n"), "verdict": r.verdict, "pending": r.pending or None}
            for r in v.rows]
    first = rows[0] if len(rows) == 1 else None
    powered = {k: _number(x) if isinstance(x, (float, np.floating)) else x for k, x in (v.power or {}).items()}
    return {"finding": f.id, "paper": f.paper, "quote": f.quote, "tested": f.tested if f.experiment else None,
            "run": v.run, "protocol": protocol, "experiment": f.experiment,
            "reads": [{"experiment": e, "run": source} for e, source in v.reads],
            "effect": first["effect"] if first else None, "interval": first["interval"] if first else None,
            "n": first["n"] if first else None, "rows": rows, "sesoi": f.sesoi, "kind": f.kind,
            "combine": f.combine, "sesoi_reason": f.sesoi_reason, "sesoi_from_pilot": f.sesoi_from_pilot,
            "power": powered or None, "verdict": v.outcome,
            "verdict_text": outcome_text(v),
            "decides": sentence, "disclosure": disclosed}


def fmt(estimate) -> str:
    if not estimate:
        return "no results"
    mean, low, high = estimate.get("mean"), estimate.get("ci95_low"), estimate.get("ci95_high")
    if mean is None or not math.isfinite(mean):
        return "nothing to measure"
    if low is None:
        return f"{mean:+.3f} [no interval], n={estimate.get('n')}"
    level = estimate.get("level", 0.95)
    shown = "" if level == 0.95 else f" ({level:.1%} CI)".replace(".0%", "%")
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]{shown}, n={estimate.get('n')}"


def outcome_text(v) -> str:
    """The verdict as the report shows it: an underpowered line says its n and what it needs."""
    return power.label(v.power) if v.outcome == UNDERPOWERED else v.outcome


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def effect_cell(v) -> str:
    if v.outcome in (NOT_TESTABLE, NOT_RUN) or not v.rows:
        return "-"
    if len(v.rows) == 1 and not v.rows[0].pending:
        return fmt(v.rows[0].estimate)
    return "<br>".join(row_text(r) for r in v.rows)


def row_text(r) -> str:
    if r.pending:
        return f"{r.label}: pending (follow-up `{r.pending}`)"
    adjusted = r.adjusted is not r.estimate and r.adjusted and r.adjusted.get("ci95_low") is not None
    extra = f"; Bonferroni {fmt(r.adjusted).split(', n=')[0]}" if adjusted else ""
    return f"{r.label}: {fmt(r.estimate)} ({r.verdict}{extra})"

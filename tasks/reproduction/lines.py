"""Each report line as text, from its verdict and the kept runs it read: its effect as the tables show it, the
sentence that says what decides it, and its disclosure: what every `--scale cpu` line shares but the papers do not
(the learning rate, the precision, the re-initialisation policy; the steps trained are each run's budget line)."""
import math

from . import power
from .follow_ups import FIRST
from .kept import KeptRuns
from .verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

DEFAULT_LR = 1e-4   # ablate.py's --lr default: every sweep of the kept runs, which pass no --lr
POLICY = {"all": "every weight of a re-drawn layer (Singh & Giovanardi re-draw its linear weights only)",
          "linear": "the linear weights of a re-drawn layer"}


def disclosure(runs: KeptRuns, v, label: str) -> str:
    """lr, precision and re-initialisation policy of the kept runs the line read (`v.reads`), each named with its
    run where it read several, and where those trained apart (a run refuses a mix of devices or weights itself)."""
    if v.finding.experiment is None:
        return ""
    e = v.finding.experiment
    reads = v.reads or ((e, label if e in runs.of(label) else FIRST),)
    read = {x: runs.kept(source, x) or (None, {}) for x, source in reads}
    if len(reads) == 1:
        return _disclosed(*read[reads[0][0]])
    text = " + ".join(f"{x} ({source} run): {_disclosed(*read[x])}" for x, source in reads)
    where = {x: (run.device, run.weights) if run else ("", "") for x, (run, _) in read.items()}
    if any(len({w[i] for w in where.values()} - {""}) > 1 for i in (0, 1)):
        text += "; its arms trained apart: " + "; ".join(
            f"{x} on {device or 'an unrecorded device'}" + (f", from weights {weights}" if weights else "")
            for x, (device, weights) in where.items())
    return text


def _disclosed(run, sweeps: dict) -> str:
    records = [r for rs in sweeps.values() for r in rs]
    if not records:
        return "not run"
    lrs = {float(a[a.index("--lr") + 1]) if "--lr" in a else DEFAULT_LR for a in run.sweeps.values()} or {DEFAULT_LR}
    policies = sorted({r.params["policy"] for r in records if r.params.get("policy")})
    return "; ".join([f"lr {', '.join(f'{x:.0e}'.replace('e-0', 'e-') for x in sorted(lrs))}",
                      f"precision {', '.join(sorted({r.precision or '?' for r in records}))}",
                      *(["re-drawn: " + "; ".join(POLICY.get(p, p) for p in policies)] if policies else [])])


def _row_reason(row, sesoi: float, kind: str) -> str:
    e = row.estimate
    where = "no interval" if e.low is None else f"the {e.level:.0%} interval [{e.low:+.3f}, {e.high:+.3f}]"
    if kind == "equivalence":
        inside = {REPRODUCED: "lies within", NOT_REPRODUCED: "lies wholly outside"}.get(row.verdict, "crosses")
        return f"{where} {inside} -/+ {sesoi:g}"
    return where + {REPRODUCED: f" lies above 0 and the estimate {e.mean:+.3f} reaches {sesoi:g}",
                    NOT_REPRODUCED: f" ends below the SESOI {sesoi:g}"}.get(
        row.verdict, f" holds 0 or the estimate {e.mean:+.3f} falls short of {sesoi:g}")


def decides(v) -> str:
    """One sentence: what decides this line (the row and the comparison that give its verdict)."""
    f, pending = v.finding, [r for r in v.rows if r.pending]
    if v.outcome == NOT_TESTABLE:
        return f"Not testable here: {f.untestable}."
    if v.outcome == NOT_RUN:
        return (f"Not run yet: the follow-up `{pending[0].pending}` would measure it ({pending[0].label})." if pending
                else "Not run yet: its experiment has no kept results.")
    lead = _lead(v)
    if v.outcome in power.UNDECIDED:
        lead += f"; {power.label(v.power)}: at this n even an absent effect would not read not reproduced"
    elif v.outcome == INCONCLUSIVE and pending:
        lead += f"; the part '{pending[0].label}' is pending (follow-up `{pending[0].pending}`)"
    return lead + "."


def _lead(v) -> str:
    """'Verdict: row 'label': its interval against the line's rule', naming the row that decides (or left it
    undecided)."""
    f, measured = v.finding, [r for r in v.rows if r.estimate and not r.pending]
    undecided = (INCONCLUSIVE, *power.UNDECIDED)
    wanted = undecided if v.outcome in undecided else (v.outcome,)
    key = next((r for r in measured if r.verdict in wanted), measured[0])   # undecided: the row that left it so
    every = f.combine == "all" and v.outcome == REPRODUCED
    which = "" if len(measured) == 1 else f"{'every row, e.g.' if every else 'row'} '{key.label}': "
    lead = f"{v.outcome[0].upper()}{v.outcome[1:]}: {which}{_row_reason(key, f.sesoi, f.kind)}"
    if which and f.combine == "all" and v.outcome == NOT_REPRODUCED:
        lead += " (one failing row fails the whole: tested at 1 - alpha/rows)"
    return lead


def fmt(e, n: bool = True) -> str:
    """'+0.012 [-0.003, +0.027] (90% CI), n=5': the level said where it is not 95%."""
    if e is None or e.mean is None or not math.isfinite(e.mean):
        return "nothing measured"
    shown = "" if e.level == 0.95 else f" ({e.level:.1%} CI)".replace(".0%", "%")
    interval = f"[{e.low:+.3f}, {e.high:+.3f}]{shown}" if e.low is not None else "[-]"
    return f"{e.mean:+.3f} {interval}" + (f", n={e.n}" if n else "")


def effect_cell(v) -> str:
    """The paper page's effect cell: one row's estimate, or each row with its verdict (and its Bonferroni interval
    where the line's rule reads that one)."""
    if v.outcome in (NOT_TESTABLE, NOT_RUN) or not v.rows:
        return "-"
    if len(v.rows) == 1 and not v.rows[0].pending:
        return fmt(v.rows[0].estimate)
    return "<br>".join(f"{r.label}: pending (follow-up `{r.pending}`)" if r.pending else
                       f"{r.label}: {fmt(r.estimate)} ({r.verdict}" + (
                           f"; Bonferroni {fmt(r.adjusted, n=False)}" if r.adjusted is not r.estimate and r.adjusted
                           and r.adjusted.low is not None else "") + ")" for r in v.rows)

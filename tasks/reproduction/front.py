"""The report's front page: a row per finding (each model's first-run verdict and effect against the SESOI, the
verdict after Holm, what the follow-ups did), the multiplicity line and the forest plot; and the rules behind them,
which runs.md states. The first run gives the headline; a follow-up is a sensitivity analysis, never counted."""
import math

from scipy import stats

from .findings import PAGES
from .follow_ups import FIRST, FOLLOW_UPS
from .kept import KeptRuns
from .lines import fmt
from .power import need_text
from .verdicts import (
    NOT_REPRODUCED,
    NOT_RUN,
    NOT_TESTABLE,
    REPRODUCED,
    UNDERPOWERED,
    Estimate,
    decide,
    level_of,
)

P_VALUES = ("p-values. Every line's interval is a t-interval, mean -/+ t(df) sd / sqrt(n), whatever its unit "
            "(`tasks/ablation/statistics.py`), so inverting it gives the one-sided p of \"effect > 0\" exactly. An "
            "equivalence's p is TOST's (the larger of its two one-sided p's); a line whose rows must all hold takes "
            "its largest row p (intersection-union), one that needs any row the smallest times the rows (Bonferroni).")
FRAGILE = 0.25   # a decisive bound within this share of the SESOI of its decision line reads "fragile"
FRAGILE_WHY = (f"A decisive bound (the lower one against 0 for a reproduced line, the upper against the SESOI for a "
               f"not reproduced one, the nearer margin for an equivalence) within {FRAGILE:g} x the SESOI of its line "
               f"reads *fragile*: a share of the SESOI means the same on accuracies and ratios; a quarter flags a "
               f"bound a tenth of a point above 0 on a one-point SESOI (the permute first run). Chosen with the kept "
               f"results in view, it changes no verdict.")
MULTIPLICITY = ("Multiplicity: if nothing were real, a tested line reads a false \"reproduced\" with probability at "
                "most its one-sided alpha, 0.025 (a direction's 95% lower bound above 0; Bonferroni's for a line that "
                "needs any row) or 0.05 (an equivalence's TOST at 90%), so the family's expected false ones are at "
                "most their sum. Holm's step-down over the headline lines with a p-value keeps the chance of any "
                "false one at those alphas; a reproduced line it does not keep reads \"not after Holm\". A \"not "
                "reproduced\" is its own test (the interval below the SESOI: a false one when the effect is in fact at "
                "least the SESOI, each at most 0.025, or 0.05 for an equivalence) and Holm's correction above does "
                "not cover it: the chance of at least one false \"not reproduced\" in the family is larger than any "
                "one line's:")
WORD = {REPRODUCED: "holds", NOT_REPRODUCED: "fails"}
COLOURS = {REPRODUCED: "tab:green", NOT_REPRODUCED: "tab:red"}


def alpha(finding) -> float:
    """The one-sided size of a line's "reproduced": 0.025 (95% lower bound above 0), 0.05 (TOST at 90%)."""
    return (1 - level_of(finding.kind)) / 2


def p_value(v) -> float:
    """The line's one-sided p for its "reproduced" side (P_VALUES); nan where it has none."""
    rows = [r.estimate for r in v.rows if r.estimate and not r.pending]
    if v.outcome in (NOT_RUN, NOT_TESTABLE) or not rows or any(r.pending for r in v.rows) \
            or not all(e.n and 0 < (e.std or math.nan) < math.inf for e in rows):
        return math.nan
    ps, margin = [], v.finding.sesoi
    for e in rows:
        se, df = e.std / math.sqrt(e.n), e.n - 1 if e.df is None else e.df
        ps.append(max(stats.t.sf((e.mean + margin) / se, df), stats.t.sf((margin - e.mean) / se, df))
                  if v.finding.kind == "equivalence" else float(stats.t.sf(e.mean / se, df)))
    return min(1.0, len(ps) * min(ps)) if v.finding.combine == "any" else max(ps)


def holm(found: dict) -> dict:
    """{finding id: (p, Holm-adjusted p, verdict after Holm)} over the lines with a p. Each p is divided by its line's
    alpha, so Holm's step-down compares the sorted ratios with 1 / (m - i); only a "reproduced" can change."""
    ratios = {fid: q for fid, v in found.items() if not math.isnan(q := p_value(v) / alpha(v.finding))}
    out, running, m = {}, 0.0, len(ratios)
    for i, (fid, q) in enumerate(sorted(ratios.items(), key=lambda x: x[1])):
        running = max(running, (m - i) * q)
        v = found[fid]
        kept = v.outcome != REPRODUCED or running <= 1
        out[fid] = (q * alpha(v.finding), min(1.0, running * alpha(v.finding)), v.outcome if kept else "not after Holm")
    return out


def multiplicity(found: dict, name: str) -> str:
    """The family's expected false "reproduced" if nothing were real, and how many it shows before and after Holm."""
    tested = [v for v in found.values() if not math.isnan(p_value(v))]
    after = sum(x[2] == REPRODUCED for x in holm(found).values())
    return (f"**{name}**: {len(tested)} headline lines tested ({sum(v.finding.kind == 'equivalence' for v in tested)} "
            f"equivalences): at most {sum(alpha(v.finding) for v in tested):.2f} false \"reproduced\" expected by "
            f"chance; {sum(v.outcome == REPRODUCED for v in tested)} reproduced, {after} after Holm.")


def decisive(v):
    """(the row that decides the line, its bound's distance from its decision line) for a decided line, else (its
    first row with an interval or None, None). Where one row decides (an "all" line's failing row, an "any" line's
    holding one, at Bonferroni's level: verdicts.py) it is the clearest such row; where every row must, the nearest."""
    rows = [r for r in v.rows if r.estimate and not r.pending and r.estimate.low is not None]
    f, best = v.finding, None
    union = (f.combine, v.outcome) in (("all", NOT_REPRODUCED), ("any", REPRODUCED))
    for r in rows if v.outcome in WORD else ():
        e = r.adjusted if union and r.adjusted else r.estimate
        if decide(e, f.sesoi, f.kind) != v.outcome:
            continue
        low, high = e.low, e.high
        if f.kind == "equivalence":
            gap = min(low + f.sesoi, f.sesoi - high) if v.outcome == REPRODUCED else max(low - f.sesoi, -f.sesoi - high)
        else:
            gap = low if v.outcome == REPRODUCED else f.sesoi - high
        if best is None or (gap > best[1] if union else gap < best[1]):
            best = (r, gap)
    return best or (rows[0] if rows else None, None)


def fragile(v) -> bool:
    gap = decisive(v)[1]
    return gap is not None and gap <= FRAGILE * v.finding.sesoi


def device(runs: KeptRuns, v) -> str:
    """Where the line's trials trained (cpu, cuda): the kind each kept run it read records (KeptRun.device)."""
    read = [runs.kept(source, experiment) for experiment, source in v.reads]
    kinds = {found.run.device for found in read if found is not None}
    return "+".join(sorted(kinds - {""})) or "-"


def estimate_of(row) -> Estimate:
    """A report line's row (record.RowLine) as an estimate: mean, bounds and level (its n not needed here)."""
    return Estimate(None, row.effect, low=row.interval[0], high=row.interval[1], level=row.level)


def _rows_text(line) -> str:
    """'(2 of 2 rows hold)', or 'mixed: 1 of 2 rows holds' where its rows disagree; '' for one row."""
    held, rows = line.holding
    if rows <= 1:
        return ""
    return f"mixed: {held} of {rows} rows hold{'s' if held == 1 else ''}" if line.mixed else f"({held} of {rows} " \
        f"rows hold)"


def verdict_cell(line) -> str:
    """A headline line on the front page: its verdict (an undecided one with the n it needs), fragile, its decisive
    row's effect [interval], how many rows hold, whether its rule was revised after its data, and for a line whose
    confirmatory run is registered but not run, that first; `line` a record.Line, None where the model has none."""
    if line is None:
        return "-"
    outcome = line.verdict
    text = f"**{outcome}**" if outcome in WORD else f"underpowered ({need_text(line.power)})" \
        if outcome == UNDERPOWERED else line.verdict_text
    row = line.rows[line.decisive] if line.decisive is not None else None
    effect = f": {fmt(estimate_of(row), n=False)}" if row else ""
    cell = text + (" *fragile*" if line.fragile else "") + effect + (" " + _rows_text(line) if _rows_text(line) else "")
    if line.registered:
        return f"{line.registered}; pilot: {cell}"
    return cell + (" *revised*" if line.revised_after_data else "")


def declared_counts(lines: list) -> dict:
    """Of the headline lines with data: how many were declared before their data, how many revised (or declared)
    after it, and how many of those await a registered confirmatory run."""
    found = [x for x in lines if x.headline and x.data_dates]
    return {"before_data": sum(not x.revised_after_data for x in found),
            "revised_after_data": sum(x.revised_after_data for x in found),
            "confirmatory_registered": sum(bool(x.registered) for x in found)}


def sensitivity(fid: str, by_run: dict, runs: KeptRuns, headline) -> list:
    """What the other runs did to the line, in words, grouped by outcome: the follow-ups, and the first run
    where a confirmatory run is the headline (then the first is its pilot); a disagreement with the headline
    run and a change of device (two things changed at once) said."""
    groups, ours = {}, run_words(headline.run)
    for label, found in by_run.items():
        v = found.get(fid)
        if label == headline.run or v is None or v.outcome in (NOT_RUN, NOT_TESTABLE):
            continue
        before, after = device(runs, headline), device(runs, v)
        moved = f"{before} to {after}" if "-" not in (before, after) and before != after else ""
        unlike = headline.outcome != NOT_RUN and v.outcome != headline.outcome and bool(
            WORD.keys() & {v.outcome, headline.outcome})
        groups.setdefault((unlike, WORD.get(v.outcome, "undecided")), {}).setdefault(moved, []).append(
            run_words(label) + (" (the pilot)" if label == FIRST else ""))
    return [f"{f'**unlike {ours}**: ' if unlike else ''}{word} with " + "; ".join(
        ", ".join(texts) + (f" and the device changed together ({moved})" if moved else "")
        for moved, texts in by_move.items()) for (unlike, word), by_move in groups.items()]


def run_words(label: str) -> str:
    """A run as the sensitivity cells name it: "the first run", a follow-up's own words ("lr 2e-5")."""
    return "the first run" if label == FIRST else FOLLOW_UPS[label].words if label in FOLLOW_UPS else label


def table(findings: list, models: dict, cells: dict) -> list:
    """A row per finding: each model's headline line (`models`: {name: {finding id: report.json record}}, the
    report's own model first, then each other named by its report's folder), the SESOI, Holm's verdict on the first
    and what the follow-ups did (`cells`)."""
    names = list(models)
    lines = [" | ".join(["| finding | claim", f"`{names[0]}` headline: verdict, effect [CI]",
                         *(f"[{n}]({n}/report.md) headline" for n in names[1:]),
                         f"SESOI | after Holm ({' / '.join(names)}) | follow-ups: sensitivity |"]),
             "|---" * (5 + len(names)) + "|"]
    for f in findings:
        equivalence = " (equiv.)" if f.kind == "equivalence" else ""
        lines.append(" | ".join([f"| [{f.id}]({PAGES[f.paper]}.md#{f.id})", f.claim,
                                 *(verdict_cell(by_id.get(f.id)) for by_id in models.values()),
                                 f"{f.sesoi:g}{equivalence}", " / ".join(after_holm(m.get(f.id)) for m in
                                                                          models.values()),
                                 "; ".join(cells[f.id]) or "-"]) + " |")
    return lines


def after_holm(line) -> str:
    """'same' where Holm keeps a headline line's verdict, its verdict after Holm where not, '-' without a p."""
    if line is None or line.holm is None:
        return "-"
    return "same" if line.holm.verdict == line.verdict else f"**{line.holm.verdict}**"


def _panel(ax, fs: list, models: dict) -> None:
    """One paper's lines: a point per row of each model's headline line, in SESOI units."""
    for y, f in enumerate(fs):
        if f.kind == "equivalence":
            ax.fill_betweenx([y - 0.4, y + 0.4], -1, 1, color="tab:blue", alpha=0.1, linewidth=0)
        for i, m in enumerate(models.values()):
            line = m.get(f.id)
            shown = [r for r in (line.rows if line else ()) if r.effect is not None and r.interval[0] is not None]
            for j, r in enumerate(shown):
                colour, s = COLOURS.get(line.verdict, "grey"), f.sesoi
                dropped = line.holm is not None and line.holm.verdict != line.verdict
                ax.errorbar(r.effect / s, y + 0.3 * i + 0.3 * j / len(shown), fmt="x" if dropped else "D" if i else "o",
                            xerr=[[(r.effect - r.interval[0]) / s], [(r.interval[1] - r.effect) / s]], color=colour,
                            ms=3 if i else 4, capsize=2, mfc="white" if line.fragile else colour)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axvline(1, color="tab:blue", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(fs)), [f.id for f in fs], fontsize=7)
    ax.set_ylim(len(fs) - 0.3, -0.6)
    ax.set_xscale("symlog", linthresh=2)


def forest(findings: list, papers: dict, models: dict, path) -> None:
    """One panel per paper: each headline line's rows, effect and interval in units of its SESOI (so accuracies and
    ratios share an axis: linear within -/+ 2, logarithmic beyond), the SESOI at 1 (the margin -/+ 1 for an
    equivalence), coloured by the line's verdict (green reproduced, red not reproduced, grey undecided; hollow:
    fragile; a cross: a reproduced line Holm drops); `models` as `table`'s, the report's own model dots, each
    other diamonds below it."""
    from ..ablation.drawing import new_figure, png_bytes
    from ..fileio import atomic_write_bytes
    per = {p: fs for p in papers if (fs := [f for f in findings if f.paper == p
                                            and any(m.get(f.id) and m[f.id].decisive is not None
                                                    for m in models.values())])}
    if not per:
        return
    fig = new_figure(figsize=(8, 1.0 + 0.34 * sum(len(fs) for fs in per.values()) + 0.5 * len(per)))
    axes = fig.subplots(len(per), 1, sharex=True, squeeze=False, height_ratios=[len(fs) + 1 for fs in per.values()])
    for ax, (paper, fs) in zip(axes[:, 0], per.items()):
        _panel(ax, fs, models)
        ax.set_title(papers[paper], fontsize=8, loc="left")
    names = list(models)
    axes[-1, 0].set_xlabel("headline effect / SESOI, a point per row (linear within -/+ 2, logarithmic beyond; 0: no "
                           "effect; dashed 1: the SESOI; shaded: an equivalence's margin)\ngreen reproduced, red not "
                           "reproduced, grey undecided; hollow: fragile; a cross: not after Holm"
                           + (f"; dots {names[0]}, diamonds {', '.join(names[1:])}" if names[1:] else ""), fontsize=7)
    atomic_write_bytes(path, png_bytes(fig))

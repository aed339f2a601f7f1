"""report.md from the kept results alone (`kept.py`): per paper, every finding's line with its
verdict on each run (the first, then any labelled follow-up), the experiments with their wall time, the
figures and the protocol history. Nothing here trains; `reproduce.py --report-only` is this."""
import json
from pathlib import Path

from ..fileio import atomic_write_text
from . import compare, experiments, kept, null_baseline, plan, power
from .curves import budget_line, learning_curve_link, learning_curves, run_lines, unfinished  # noqa: F401  (tests' names)
from .findings import FINDINGS, PAPERS
from .follow_ups import FOLLOW_UPS
from .judging import counts_line, counts_of, declared, explain, labels_of, verdicts  # noqa: F401
from .lines import cell, effect_cell, fmt, outcome_text, record  # noqa: F401

RULE = ("Each effect is signed so that the paper's direction is positive. **Reproduced**: the 95% interval lies "
        "above zero and its point estimate reaches the smallest effect of interest (SESOI). **Not reproduced**: the "
        "whole interval lies below the SESOI (absent, reversed, or too small to matter). **Inconclusive**: "
        "otherwise. A 'no effect' finding (equivalence) reads the 90% interval (TOST): reproduced when it lies "
        "within -/+ the SESOI, not reproduced when it lies wholly outside. A finding whose rows must all hold is "
        "reproduced when each row is at its own level (intersection-union) and not reproduced when one row is at "
        "1 - alpha/rows (Bonferroni); one that needs any row, the other way round. Where configurations share one "
        "reference the interval carries the reference's noise: the seed is the unit for the heads of a layer, a "
        "two-level model over seeds and orders for random layer orders (`tasks/ablation/statistics.py`; the "
        "coverage of each shape is tested in `tests/test_interval_coverage.py`). **Underpowered**: an "
        "inconclusive line whose design, at its n and the larger of its pilot's and its own per-seed sd, cannot "
        "call an absent effect not reproduced (or, for an equivalence, an absent difference reproduced) with 80% "
        "power (`tasks/reproduction/power.py`): its n says what it needs. Rules and SESOIs were declared before "
        "the declared runs (`tasks/reproduction/findings/`), after a 3-seed pilot (2026-11-24) whose spread "
        "informed the SESOIs the report marks.")


def null_note(finding_id: str, null) -> str:
    """The null baseline's ratio for a ratio line (null_baseline.py), '' where it has none."""
    found = (null or {}).get("ratios", {}).get(finding_id)
    if not found:
        return ""
    return (f"null baseline: an equal relative perturbation of every layer ({null['relative']:g} of each weight's "
            f"norm, {len(null['seeds'])} random directions, `python -m tasks.reproduction.null_baseline`, "
            f"{null['sitting']['date']}, commit {null['sitting']['commit']}) gives {found['mean']:+.3f} "
            f"({found['min']:+.3f} to {found['max']:+.3f}"
            + (f"; {null_baseline.CAVEAT[finding_id]}" if finding_id in null_baseline.CAVEAT else "")
            + "): a change that favours no layer gives this ratio; "
            "the line's effect is to be read against it, not against zero (the follow-up "
            "hao-null-perturbation's rows: the fine-tuned ratio minus the null's)")


def paper_section(paper: str, by_run: dict, explained: dict, null=None, columns=(), first_name: str = "",
                  cut=frozenset()) -> list:
    """The paper's table (a column per other model with kept results), each line's notes, and where other models
    have results, the table comparing the models line by line. `cut`: the (run, experiment) pairs kept unfinished,
    whose lines say so."""
    extra_head, extra_rule = compare.header(columns)
    lines = [f"## {PAPERS[paper]}", "", f"`../shared/papers/{paper}`", "",
             "| finding | the paper says | tested here | run | effect [95% CI] | SESOI | power (80%) | verdict | "
             "the embedded model |" + extra_head,
             "|---|---|---|---|---|---|---|---|---|" + extra_rule]
    for f in (f for f in FINDINGS if f.paper == paper):
        for label, found in by_run.items():
            v = found.get(f.id)
            if v is None:
                continue
            g = v.finding   # a follow-up may re-declare it (its own measure and SESOI)
            tested = g.tested if g.experiment else f"not testable here: {g.untestable}"
            sesoi = f"{g.sesoi:g}" + (" (equivalence)" if g.kind == "equivalence" else "")
            follow = FOLLOW_UPS.get(label)   # a follow-up's run has its own protocol number
            protocol = follow.protocol if follow else g.protocol
            unfinished = "; its run is unfinished, see its experiment" if (label, g.experiment) in cut else ""
            lines.append(f"| <a id=\"{f.id}\"></a>`{f.id}` | \"{cell(f.quote)}\" | {cell(tested)} | {label} "
                         f"(protocol {protocol}{unfinished}) | {effect_cell(v)} | {sesoi} | "
                         f"{cell(power.describe(v.power, g.sesoi, g.kind))} | **{outcome_text(v)}** | "
                         f"{cell(g.model_note)} |" + compare.cells(columns, label, f.id, v))
    notes = [finding_note(f, by_run, explained, null, columns) for f in FINDINGS if f.paper == paper]
    return lines + ["", *notes, "", *compare.table(paper, by_run, columns, first_name)]


def unfinished_runs(runs: dict) -> frozenset:
    """The (run label, experiment) pairs whose kept trials lack some of their seeds (curves.unfinished)."""
    return frozenset((label, name) for label, by_experiment in runs.items()
                     for name, (meta, sweeps) in by_experiment.items() if unfinished(meta, sweeps))


def finding_note(f, by_run: dict, explained: dict, null, columns) -> str:
    """The line's note: the paper's setting, comparison, metric and SESOI, what decides it on each run, and where
    other models disagree with the first."""
    extra = [f"the paper's setting: {f.setting}", f"its comparison: {f.comparison}", f"metric: {f.metric}",
             f"SESOI {f.sesoi:g}: {f.sesoi_reason}"
             + (" (the 2026-11-24 3-seed pilot's spread informed it)" if f.sesoi_from_pilot else "")]
    for label in by_run:
        if f.id in explained.get(label, {}):
            disclosed, sentence = explained[label][f.id]
            extra.append(f"what decides it ({label}): {sentence}" + (f" Run: {disclosed}" if disclosed else ""))
    if null_note(f.id, null):
        extra.append(null_note(f.id, null))
    if f.experiment:
        extra.append(f"experiment: [{f.experiment}](#experiment-{f.experiment})")
    if f.untestable:
        extra.append(("not testable here: " if not f.experiment else "part not tested here: ") + f.untestable)
    if f.elsewhere:
        extra.append(f"where it can be tested: `{f.elsewhere}`")
    disagreement = compare.note(f, by_run, columns)
    if disagreement:
        extra.append(disagreement)
    return f"- `{f.id}`: " + "; ".join(extra) + "."


def experiments_section(runs: dict, ctx, report_dir: Path) -> list:
    lines = ["## Experiments", "",
             f"Estimated minutes at the {ctx.scale.name} scale on a CPU: trials x expected steps x a measured "
             f"seconds a step (`tasks/reproduction/plan.py`).", ""]
    for e in experiments.EXPERIMENTS.values():
        found = plan.experiment_minutes(e, ctx)
        seeds = e.seeds or ctx.scale.seeds
        lines += [f"### <a id=\"experiment-{e.name}\"></a>{e.name}", "", e.what + ".", "",
                  f"Seeds: {seeds}. Findings: " + ", ".join(f"[{f.id}](#{f.id})" for f in FINDINGS
                                                           if f.experiment == e.name) + ".", ""]
        if found is not None:
            lines += [f"Estimate: {found:.0f} min.", ""]
        for label, by_experiment in runs.items():
            if e.name in by_experiment:
                lines += run_lines(report_dir, e, label, by_experiment[e.name], "results/")
    return lines


def history_section(runs: dict, ctx) -> list:
    lines = ["## Protocol history", "",
             "Before this report's declarations (issue 27), the report tested reworded claims with 3 seeds and no "
             "SESOI: its verdict table and the follow-ups made then are kept in "
             "[the README's history](README.md#history-the-report-before-issue-27).", ""]
    for label in labels_of(runs):
        follow = FOLLOW_UPS.get(label)
        reason = f": {follow.reason} (protocol {follow.protocol})" if follow else ": the declared protocol"
        read = (f"re-reads `{follow.reads}`: " if follow and follow.reads else "")
        ran = sorted(runs.get(label) or (follow.experiments if follow else ()))
        lines.append(f"- `{label}`" + reason + " - " + read + (", ".join(ran) or "nothing kept yet") + ".")
    lines += ["", "Declared follow-ups still pending (minutes on a CPU, `tasks/reproduction/plan.py`):", ""]
    lines += [f"- {line.replace(': python', ': `python', 1)}`: {FOLLOW_UPS[line.split(' ', 1)[0]].reason}."
              for line in plan.lines(FOLLOW_UPS, runs, ctx)
              if not FOLLOW_UPS[line.split(' ', 1)[0]].reads]
    if not runs:
        lines.append("- No run kept yet.")
    return lines + [""]


NULL_FILE = null_baseline.PATH.name   # kept beside the runs' folders
README_START = "<!-- reproduction-counts: rewritten by `python reproduce.py --report-only`, do not edit -->"
README_END = "<!-- /reproduction-counts -->"


def update_readme(readme: Path, counts: dict, others=()) -> bool:
    """Rewrite the counts between README's markers from the report's, the first model's then a line per other
    model's (`compare.readme_lines`); False where the markers are absent."""
    text = Path(readme).read_text(encoding="utf-8") if Path(readme).exists() else ""
    if README_START not in text or README_END not in text:
        return False
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    block = "".join(f"{line}\n" for line in (counts_line(counts), *others))
    atomic_write_text(readme, f"{head}{README_START}\n{block}{README_END}{tail}")
    return True


DEPARTURES = ["## Departures from the papers", "",
              "- The model: at the cpu scale the embedded all-MiniLM-L6-v2 (6 x 384, a sentence-pair contrastive "
              "encoder trained on Quora duplicates and NLI among others, zero-shot STS 0.838, not an MLM). Each "
              "line says what it can carry.",
              "- The data: the course's SST-5, Quora and STS in place of GLUE; GLUE tasks run through `--task-file` "
              "and `--tasks ROLE=NAME`.",
              "- Depth: 'last', 'middle' and 'low' layers are thirds of the model.",
              "- The budget: the scale's, shown above; the papers trained 3-9 epochs.", ""]


def write(results_dir: Path, report_path: Path, ctx, readme=None) -> Path:
    """report.md, report.json and the README's counts from the kept results: the first model's (`ctx`'s, at the
    results folder's root) and every other model's beside it (RESULTS/models/SLUG, compare.py)."""
    runs = kept.load(results_dir)
    null = null_baseline.load(Path(results_dir) / NULL_FILE)
    by_run = verdicts(runs, ctx, null)
    explained = explain(runs, by_run)
    counts = counts_of(by_run)
    columns = compare.others(results_dir, ctx, NULL_FILE)
    report_dir = Path(report_path).parent
    lines = ["# Reproduction report", "",
             "Written by `reproduce.py` from the raw results in [results/](results/README.md) "
             "(`python reproduce.py --report-only` rewrites it without training): do not edit by hand.", "",
             f"Scale **{ctx.scale.name}** ({ctx.scale.note}); model **{ctx.model}** ({ctx.n} layers); tasks "
             + ", ".join(f"{role} = {task}" for role, task in ctx.tasks.items()) + ".", "",
             *compare.introduce(columns), RULE, "", counts_line(counts), ""]
    cut = unfinished_runs(runs)
    for paper in PAPERS:
        lines += paper_section(paper, by_run, explained, null, columns, ctx.model, cut)
    lines += experiments_section(runs, ctx, report_dir)
    lines += compare.section(columns, report_dir)
    lines += history_section(runs, ctx)
    atomic_write_text(report_path, "\n".join(lines + DEPARTURES) + "\n")
    write_json(Path(report_path).with_suffix(".json"), by_run, explained, counts, ctx, null, columns, cut)
    if readme:
        update_readme(readme, counts, compare.readme_lines(columns))
    return Path(report_path)


def write_json(path: Path, by_run: dict, explained: dict, counts: dict, ctx, null=None, columns=(),
               cut=frozenset()) -> None:
    """report.json: every line as data (finding, paper, quote, what was tested, run, effect, interval, n, SESOI,
    power, verdict, what decides it, what was run), the first model's, with `models`: each model's entry on it."""
    entries = []
    for label, found in by_run.items():
        for fid, v in found.items():
            follow = FOLLOW_UPS.get(label)
            disclosed, sentence = explained[label][fid]
            line = record(v, follow.protocol if follow else v.finding.protocol, disclosed, sentence)
            entries.append({**line, "unfinished_run": (label, v.finding.experiment) in cut,
                            "null_baseline": (null or {}).get("ratios", {}).get(fid),
                            "models": compare.entries(label, fid, v, line, ctx.model, columns)})
    data = {"scale": ctx.scale.name, "model": ctx.model, "layers": ctx.n, "tasks": ctx.tasks,
            "counts_first_run": counts, "lines": entries,
            "models": compare.summary(ctx.model, ctx, counts, columns)}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")

"""report.md from the kept results alone (`kept.py`): per paper, every finding's line with its
verdict on each run (the first, then any labelled follow-up), the experiments with their wall time, the
figures and the protocol history. Nothing here trains; `reproduce.py --report-only` is this."""
import json
import math
from pathlib import Path

import numpy as np

from ..ablation.drawing import legend, new_figure, png_bytes
from ..ablation.plateau import coarse_holdout
from ..fileio import atomic_write_bytes, atomic_write_text
from . import experiments, kept, null_baseline, plan, power
from .findings import FINDINGS, PAPERS
from .follow_ups import FIRST, FOLLOW_UPS
from .lines import decides, disclosure, record
from .measures import MEASURES
from .verdicts import NOT_RUN, NOT_TESTABLE, UNDERPOWERED, VERDICTS, judge

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


def declared(label: str) -> list:
    """The findings a run is judged on: a follow-up's re-declarations (`FollowUp.declares`) in place of the first's."""
    follow = FOLLOW_UPS.get(label)
    own = {f.id: f for f in (follow.declares if follow else ())}
    return [own.get(f.id, f) for f in FINDINGS]


def labels_of(runs: dict) -> list:
    """The first run, each follow-up with kept results, and each that re-reads a kept run (trains nothing)."""
    kept_labels = [FIRST, *sorted(set(runs) - {FIRST})]
    return kept_labels + [label for label, f in FOLLOW_UPS.items()
                          if f.reads and f.reads in runs and label not in kept_labels]


def verdicts(runs: dict, ctx, null=None) -> dict:
    """{run label: {finding id: Verdict}} for the first run and each follow-up that has results (or re-reads some);
    `null` the layer ratios' null baseline (null_baseline.load) that measures against it read."""
    out = {}
    for label in labels_of(runs):
        follow = FOLLOW_UPS.get(label)
        results = kept.results_for(runs, follow.reads if follow and follow.reads else label)
        results.null = null
        covered = set(runs.get(label, {}))
        out[label] = {}
        for f in declared(label):
            if follow and (follow.reads or follow.declares) and f.id not in follow.findings:
                continue
            if label != FIRST and not (follow and follow.reads) and f.experiment not in covered:
                continue
            if f.experiment is None or not results.has(f.experiment):
                out[label][f.id] = power.apply(judge(f, label, []), ctx.scale)
            else:
                rows = MEASURES[f.measure](results, ctx, **f.keywords)
                out[label][f.id] = power.apply(judge(f, label, rows), ctx.scale)
    return out


def explain(runs: dict, by_run: dict) -> dict:
    """{run label: {finding id: (disclosure, what decides it)}} from the kept trials each line read."""
    out = {}
    for label, found in by_run.items():
        results = kept.results_for(runs, label)
        out[label] = {}
        for fid, v in found.items():
            experiment = v.finding.experiment
            source = runs.get(label, {}).get(experiment) or runs.get(FIRST, {}).get(experiment)
            out[label][fid] = (disclosure(results, v.finding, source[0] if source else {}), decides(v))
    return out


def counts_of(by_run: dict) -> dict:
    """{verdict: lines} of the first run."""
    return {v: sum(x.outcome == v for x in by_run.get(FIRST, {}).values())
            for v in (*VERDICTS, NOT_RUN, NOT_TESTABLE)}


def counts_line(counts: dict) -> str:
    """'37 findings, first run: 8 reproduced, ...', in the verdicts' order whatever the dict's."""
    order = [v for v in (*VERDICTS, NOT_RUN, NOT_TESTABLE) if v in counts]
    return f"{sum(counts.values())} findings, first run: " + ", ".join(f"{counts[v]} {v}" for v in order) + "."


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _effect(v) -> str:
    if v.outcome in (NOT_TESTABLE, NOT_RUN) or not v.rows:
        return "-"
    if len(v.rows) == 1 and not v.rows[0].pending:
        return fmt(v.rows[0].estimate)
    return "<br>".join(_row(r) for r in v.rows)


def _row(r) -> str:
    if r.pending:
        return f"{r.label}: pending (follow-up `{r.pending}`)"
    adjusted = r.adjusted is not r.estimate and r.adjusted and r.adjusted.get("ci95_low") is not None
    extra = f"; Bonferroni {fmt(r.adjusted).split(', n=')[0]}" if adjusted else ""
    return f"{r.label}: {fmt(r.estimate)} ({r.verdict}{extra})"


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


def paper_section(paper: str, by_run: dict, explained: dict, null=None) -> list:
    lines = [f"## {PAPERS[paper]}", "", f"`../shared/papers/{paper}`", "",
             "| finding | the paper says | tested here | run | effect [95% CI] | SESOI | power (80%) | verdict | "
             "the embedded model |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []
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
            lines.append(f"| <a id=\"{f.id}\"></a>`{f.id}` | \"{_cell(f.quote)}\" | {_cell(tested)} | {label} "
                         f"(protocol {protocol}) | {_effect(v)} | {sesoi} | "
                         f"{_cell(power.describe(v.power, g.sesoi, g.kind))} | **{outcome_text(v)}** | "
                         f"{_cell(g.model_note)} |")
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
        notes.append(f"- `{f.id}`: " + "; ".join(extra) + ".")
    return lines + ["", *notes, ""]


def _figure_links(report_dir: Path, experiment, label: str) -> list:
    out = []
    for sweep, plot in experiment.figures:
        name = f"{experiment.name}-{label}-{plot}.png"
        if (report_dir / "figures" / name).exists():
            out.append(f"![{experiment.name} ({label}): {plot}](figures/{name})")
    return out


def budget_line(sweeps: dict) -> str:
    """How the trials' budget ended: on a plateau of held-out training rows, or at the cap (a trial that hit the
    cap may not have converged, and its verdict then partly measures convergence speed)."""
    records = [r for rs in sweeps.values() for r in rs if r.get("steps") is not None]
    if not records:
        return "Budget: no trained trials."
    probes = [r for r in records if r.get("mode") == "probe"]
    if probes and len(probes) == len(records):
        converged = sum(bool((r.get("info") or {}).get("converged")) for r in probes)
        return (f"Budget: no fine-tuning steps: linear probes on frozen layers, {converged} of {len(probes)} "
                f"converged (penalty chosen on held-out training rows).")
    steps = sorted(r["steps"] for r in records)
    plateau = [((r.get("budget") or {}).get("plateau") or {}) for r in records]
    stopped = sum(bool(p.get("stopped")) for p in plateau)
    told = f"{stopped} of {len(records)} stopped on a held-out plateau, {len(records) - stopped} at the cap" \
        if any(plateau) else "a fixed step budget (no plateau stopping in these results)"
    return (f"Budget: steps trained {steps[0]}-{steps[-1]} (median {steps[len(steps) // 2]}); {told}."
            + coarse_holdout_note(plateau))


def coarse_holdout_note(plateaus: list) -> str:
    """The plateau rule's warning (`plateau.coarse_holdout`) for each held-out set of the run too small for it."""
    notes = sorted({coarse_holdout(p.get("metric", ""), sum((p.get("holdout_rows") or {}).values()),
                                   p.get("tolerance") or 0) or "" for p in plateaus} - {""})
    return "".join(f" Warning: {note}; the learning curves show it." for note in notes)


MAX_COLOURED_GROUPS = 10  # beyond this many configurations a legend is unreadable: every trial is drawn grey


def learning_curves(sweeps: dict):
    """Each sweep's trials as held-out score against steps, a dot where each stopped: whether the budget took the
    trials to their plateau. Held-out rows are a share of the trial's own training data, never dev. `sweeps` maps
    a sweep's name to its trial records (`results.jsonl` rows); None when no trial kept a held-out curve."""
    panels = {}
    for name, records in sweeps.items():  # one panel per sweep and data fraction: their held-out sets differ
        records = [r for r in records if (r.get("budget") or {}).get("heldout_curve")]
        fractions = sorted({r.get("data_fraction") for r in records}, key=str)
        for fraction in fractions:
            title = name if len(fractions) == 1 else f"{name}, fraction {fraction:g}"
            panels[title] = [r for r in records if r.get("data_fraction") == fraction]
    if not panels:
        return None
    columns = min(3, len(panels))
    rows_of_panels = math.ceil(len(panels) / columns)
    fig = new_figure(figsize=(5.0 * columns, 3.4 * rows_of_panels))
    axes = np.atleast_1d(fig.subplots(rows_of_panels, columns)).ravel()
    for ax, (name, records) in zip(axes, sorted(panels.items())):
        group_of = {id(r): str(r.get("group") or r.get("config")) for r in records}
        groups = sorted(set(group_of.values()))
        coloured = len(groups) <= MAX_COLOURED_GROUPS
        labelled = set()
        for r in sorted(records, key=lambda r: (group_of[id(r)], r.get("seed", 0))):
            group = group_of[id(r)]
            curve = r["budget"]["heldout_curve"]
            colour = f"C{groups.index(group) % 10}" if coloured else "0.5"
            label = group if coloured and group not in labelled else None
            labelled.add(group)
            steps, scores = [p["step"] for p in curve], [p["score"] for p in curve]
            ax.plot(steps, scores, color=colour, linewidth=0.8, alpha=0.7, label=label)
            ax.plot(steps[-1:], scores[-1:], "o", color=colour, markersize=3)
        held_out = {task: rows for r in records
                    for task, rows in ((r["budget"].get("plateau") or {}).get("holdout_rows") or {}).items()}
        ax.set_title(f"{name}: {len(records)} trials" + (", held-out rows " + ", ".join(
            f"{task} {rows}" for task, rows in sorted(held_out.items())) if held_out else ""), fontsize=9)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("held-out training rows: score")
        if coloured:
            legend(ax)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Learning curves on each trial's held-out training rows (a dot: where the trial stopped)",
                 fontsize=10)
    return fig


def learning_curve_link(report_dir: Path, name: str, label: str, sweeps: dict) -> list:
    """Draw the run's learning curves from its kept results (so `--report-only` draws them too) and link them."""
    fig = learning_curves(sweeps)
    if fig is None:
        return []
    file = f"{name}-{label}-learning-curves.png"
    (report_dir / "figures").mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(report_dir / "figures" / file, png_bytes(fig))
    return [f"![{name} ({label}): learning curves on held-out training rows](figures/{file})"]


def experiments_section(runs: dict, ctx, report_dir: Path) -> list:
    lines = ["## Experiments", "",
             f"Estimated minutes at the {ctx.scale.name} scale: trials x (expected steps x seconds per step + "
             f"{experiments.TRIAL_OVERHEAD_S:g} s) (`SECONDS_PER_STEP` in `tasks/reproduction/experiments.py`, "
             f"measured on one core; * marks a guessed figure), in one process and with two one-thread workers "
             f"({experiments.PARALLEL_SPEEDUP}x).", ""]
    for e in experiments.EXPERIMENTS.values():
        one, two, guessed = experiments.estimate_minutes(e, ctx)
        seeds = e.seeds or ctx.scale.seeds
        lines += [f"### <a id=\"experiment-{e.name}\"></a>{e.name}", "", e.what + ".", "",
                  f"Seeds: {seeds}. Findings: " + ", ".join(f"[{f.id}](#{f.id})" for f in FINDINGS
                                                           if f.experiment == e.name) + ".", ""]
        if ctx.scale.name == "cpu":
            lines += [f"Estimate: {one:.0f} min in one process, {two:.0f} min with --workers 2"
                      f"{' (*)' if guessed else ''}.", ""]
        for label, by_experiment in runs.items():
            if e.name not in by_experiment:
                continue
            meta, sweeps = by_experiment[e.name]
            trials = sum(len(r) for r in sweeps.values())
            sittings = "; ".join(f"{s['date']}, commit {s['commit']}, {s['cpu']}, {s['wall_time_s'] / 60:.1f} min "
                                 f"wall, +{s.get('trials_added', '?')} trials" for s in meta.get("sittings", []))
            lines += [f"Run `{label}`: {trials} trials, seeds {meta.get('seeds')}, in `results/{e.name}/{label}/`. "
                      f"Sittings: {sittings}.", "", budget_line(sweeps), ""]
            lines += [*learning_curve_link(report_dir, e.name, label, sweeps), *_figure_links(report_dir, e, label), ""]
    return lines


def history_section(runs: dict, scale) -> list:
    lines = ["## Protocol history", "",
             "Before this report's declarations (issue 27), the report tested reworded claims with 3 seeds and no "
             "SESOI: its verdict table and the follow-ups made then are kept in "
             "[the README's history](README.md#history-the-report-before-issue-27).", ""]
    for label in labels_of(runs):
        follow = FOLLOW_UPS.get(label)
        reason = f": {follow.reason} (protocol {follow.protocol})" if follow else ": the declared protocol"
        read = (f"re-reads `{follow.reads}`: " if follow and follow.reads else "")
        lines.append(f"- `{label}`" + reason + " - " + read
                     + ", ".join(sorted(runs.get(label) or follow.experiments)) + ".")
    lines += ["", "Declared follow-ups still pending (minutes scaled from the kept first runs' wall times, "
              "`tasks/reproduction/plan.py`):", ""]
    lines += [f"- {line.replace(': python', ': `python', 1)}`: {FOLLOW_UPS[line.split(' ', 1)[0]].reason}."
              for line in plan.lines(FOLLOW_UPS, runs, scale)
              if not FOLLOW_UPS[line.split(' ', 1)[0]].reads]
    if not runs:
        lines.append("- No run kept yet.")
    return lines + [""]


NULL_FILE = null_baseline.PATH.name   # kept beside the runs' folders
README_START = "<!-- reproduction-counts: rewritten by `python reproduce.py --report-only`, do not edit -->"
README_END = "<!-- /reproduction-counts -->"


def update_readme(readme: Path, counts: dict) -> bool:
    """Rewrite the counts between README's markers from the report's (False where the markers are absent)."""
    text = Path(readme).read_text(encoding="utf-8") if Path(readme).exists() else ""
    if README_START not in text or README_END not in text:
        return False
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    atomic_write_text(readme, f"{head}{README_START}\n{counts_line(counts)}\n{README_END}{tail}")
    return True


def write(results_dir: Path, report_path: Path, ctx, readme=None) -> Path:
    runs = kept.load(results_dir)
    by_run = verdicts(runs, ctx, null_baseline.load(Path(results_dir) / NULL_FILE))
    explained = explain(runs, by_run)
    counts = counts_of(by_run)
    report_dir = Path(report_path).parent
    lines = ["# Reproduction report", "",
             "Written by `reproduce.py` from the raw results in [results/](results/README.md) "
             "(`python reproduce.py --report-only` rewrites it without training): do not edit by hand.", "",
             f"Scale **{ctx.scale.name}** ({ctx.scale.note}); model **{ctx.model}** ({ctx.n} layers); tasks "
             + ", ".join(f"{role} = {task}" for role, task in ctx.tasks.items()) + ".", "", RULE, "",
             counts_line(counts), ""]
    for paper in PAPERS:
        lines += paper_section(paper, by_run, explained, null_baseline.load(Path(results_dir) / NULL_FILE))
    lines += experiments_section(runs, ctx, report_dir)
    lines += history_section(runs, ctx.scale)
    lines += ["## Departures from the papers", "",
              "- The model: at the cpu scale the embedded all-MiniLM-L6-v2 (6 x 384, a sentence-pair contrastive "
              "encoder trained on Quora duplicates and NLI among others, zero-shot STS 0.838, not an MLM). Each "
              "line says what it can carry.",
              "- The data: the course's SST-5, Quora and STS in place of GLUE; GLUE tasks run through `--task-file` "
              "and `--tasks ROLE=NAME`.",
              "- Depth: 'last', 'middle' and 'low' layers are thirds of the model.",
              "- The budget: the scale's, shown above; the papers trained 3-9 epochs.", ""]
    atomic_write_text(report_path, "\n".join(lines) + "\n")
    write_json(Path(report_path).with_suffix(".json"), by_run, explained, counts, ctx,
               null_baseline.load(Path(results_dir) / NULL_FILE))
    if readme:
        update_readme(readme, counts)
    return Path(report_path)


def write_json(path: Path, by_run: dict, explained: dict, counts: dict, ctx, null=None) -> None:
    """report.json: every line as data (finding, paper, quote, what was tested, run, effect, interval, n, SESOI,
    power, verdict, what decides it, what was run), so others can aggregate it."""
    entries = []
    for label, found in by_run.items():
        for fid, v in found.items():
            follow = FOLLOW_UPS.get(label)
            disclosed, sentence = explained[label][fid]
            entries.append({**record(v, follow.protocol if follow else v.finding.protocol, disclosed, sentence),
                            "null_baseline": (null or {}).get("ratios", {}).get(fid)})
    data = {"scale": ctx.scale.name, "model": ctx.model, "layers": ctx.n, "tasks": ctx.tasks,
            "counts_first_run": counts, "lines": entries}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")

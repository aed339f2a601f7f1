"""The report from the kept results alone (`kept.py`; `reproduce.py --report-only` is this; nothing here trains):
report.md, the front page (a row per finding, the multiplicity line, the forest plot: front.py); a page per paper
(each finding's quote once, its setting, each run's line on each model and what decides it); runs.md (the rule,
the experiments with their wall times and figures, other models' runs, the pending follow-ups); report.json."""
import json
import textwrap
from pathlib import Path

from ..fileio import atomic_write_text
from . import compare, experiments, front, null_baseline, plan, power
from . import verdicts as verdicts_module
from .curves import budget_line, learning_curve_link, run_lines, unfinished  # noqa: F401  (tests' names)
from .findings import FINDINGS, PAGES, PAPERS
from .follow_ups import FIRST, FOLLOW_UPS
from .judging import counts_line, counts_of, explain, labels_of, verdicts  # noqa: F401
from .lines import cell, effect_cell, outcome_text
from .models import MODELS_DIR

RULE = verdicts_module.__doc__.split("\n", 2)[2] + (
    "\nWhere configurations share one reference the interval carries the reference's noise: the seed is the unit for "
    "the heads of a layer, a two-level model over seeds and orders for random layer orders "
    "(`tasks/ablation/statistics.py`; each shape's coverage in `tests/test_interval_coverage.py`). Underpowered: "
    "`tasks/reproduction/power.py`. Rules and SESOIs were declared before the declared runs "
    "(`tasks/reproduction/findings/`), after a 3-seed pilot (2026-11-24) whose spread informed the SESOIs marked so. "
    "The first run gives the headline; a later run is a sensitivity analysis, chosen after it, never counted.")
NULL_FILE = null_baseline.PATH.name   # kept beside the runs' folders
README_START = "<!-- reproduction-counts: rewritten by `python reproduce.py --report-only`, do not edit -->"
README_END = "<!-- /reproduction-counts -->"
FOREST = "figures/forest.png"


def null_note(finding_id: str, null, layers: int) -> str:
    """The null baseline's ratio for a ratio line (null_baseline.py, each direction's ratio floored as it says)."""
    spec = next((r for r in null_baseline.RATIOS if r[0] == finding_id), None)
    found = null_baseline.replicates(null, *spec[1:], layers) if spec and null else []
    if not found:
        return ""
    caveat = f"; {null_baseline.CAVEAT[finding_id]}" if finding_id in null_baseline.CAVEAT else ""
    return (f"Null baseline: an equal relative perturbation of every layer ({null['relative']:g} of each weight's "
            f"norm, {len(found)} random directions, {null['sitting']['date']}) gives {sum(found) / len(found):+.3f} "
            f"({min(found):+.3f} to {max(found):+.3f}; the lower third's mean floored at {null_baseline.FLOOR:g} of "
            f"the upper's{caveat}): the follow-up hao-null-perturbation reads the line against it.")


def line_rows(f, models: list, cut) -> tuple:
    """A finding's table rows (a run x model each) and what decides each."""
    rows, notes = [], []
    for m in models:
        for label, found in m.by_run.items():
            v = found.get(f.id)
            if v is None:
                continue
            g = v.finding   # a follow-up may re-declare it (its own measure and SESOI)
            follow = FOLLOW_UPS.get(label)
            kind = f"sensitivity, protocol {follow.protocol}" if follow else f"declared, protocol {g.protocol}"
            if (label, g.experiment) in cut:
                kind += "; its run is unfinished"
            fragile = " *fragile*" if front.fragile(v) else ""
            adjusted = m.holm[f.id][2] if label == FIRST and f.id in m.holm else "-"
            rows.append(f"| {label} ({kind}) | {m.name} | {front.device(m.runs, v)} | {cell(effect_cell(v))} | "
                        f"**{outcome_text(v)}**{fragile} | {adjusted} | "
                        f"{cell(power.describe(v.power, g.sesoi, g.kind)) if v.power else '-'} |")
            disclosed, sentence = m.explained[label][f.id]
            tested = f" Tested: {g.tested}." if g.tested != f.tested else ""
            notes.append(f"- {label}, {m.name}: {sentence}{tested}" + (f" Run: {disclosed}." if disclosed else ""))
    return rows, notes


def paper_page(paper: str, models: list, cut, layers: int) -> list:
    lines = [f"# {PAPERS[paper]}", "", f"[Front page](report.md) · [the rule and the runs](runs.md) · the paper's "
             f"text: `../shared/papers/{paper}`", ""]
    for f in (f for f in FINDINGS if f.paper == paper):
        rows, notes = line_rows(f, models, cut)
        sesoi = f"SESOI {f.sesoi:g}" + (" (equivalence margin)" if f.kind == "equivalence" else "")
        lines += [f"## <a id=\"{f.id}\"></a>`{f.id}`: {f.claim}", "", f"> \"{f.quote}\"", "",
                  f"The paper: {f.setting}; its comparison: {f.comparison}; metric: {f.metric}.", "",
                  f"Tested here: {f.tested if f.experiment else 'not testable here: ' + f.untestable}. {sesoi}: "
                  f"{f.sesoi_reason}" + (" (the 2026-11-24 pilot's spread informed it)" if f.sesoi_from_pilot
                                         else "") + f". On the embedded model: {f.model_note}", ""]
        extra = [null_note(f.id, models[0].null, layers),
                 f"Experiment: [{f.experiment}](runs.md#experiment-{f.experiment})." if f.experiment else "",
                 f"Not tested here: {f.untestable}." if f.untestable and f.experiment else "",
                 f"Where it can be tested: `{f.elsewhere}`." if f.elsewhere else ""]
        lines += [x for x in extra if x] + [""]
        if rows:
            lines += ["| run | model | device | effect [95% CI] | verdict | after Holm | power (80%) |",
                      "|---|---|---|---|---|---|---|", *rows, "", *notes, ""]
    return lines


def experiments_section(models: list, ctx, report_dir: Path) -> list:
    """Each experiment, its estimate and every model's kept runs of it (another model's under results/models/SLUG/)."""
    lines = ["## Experiments", "",
             f"Estimated minutes at the {ctx.scale.name} scale on a CPU: trials x expected steps x a measured "
             f"seconds a step (`tasks/reproduction/plan.py`).", ""]
    for e in experiments.EXPERIMENTS.values():
        found = plan.experiment_minutes(e, ctx)
        lines += [f"### <a id=\"experiment-{e.name}\"></a>{e.name}", "", e.what + ".", "",
                  f"Seeds: {e.seeds or ctx.scale.seeds}. Findings: " + ", ".join(
                      f"[{f.id}]({PAGES[f.paper]}.md#{f.id})" for f in FINDINGS if f.experiment == e.name) + ".", ""]
        if found is not None:
            lines += [f"Estimate: {found:.0f} min.", ""]
        for m in models:
            folder, prefix = (f"results/{MODELS_DIR}/{m.name}/", f"{m.name}-") if m.model else ("results/", "")
            for label, by_experiment in m.runs.items():
                if e.name in by_experiment:
                    lines += run_lines(report_dir, e, label, by_experiment[e.name], folder, prefix)
    return lines


def pending_section(runs: dict, ctx) -> list:
    """The declared follow-ups that still train (a follow-up that re-reads a kept run has its verdicts already)."""
    lines = ["## Pending follow-ups", "", "Minutes on a CPU, `tasks/reproduction/plan.py`:", ""]
    lines += [f"- {line.replace(': python', ': `python', 1)}`: {FOLLOW_UPS[line.split(' ', 1)[0]].reason}."
              for line in plan.lines(FOLLOW_UPS, runs, ctx) if not FOLLOW_UPS[line.split(' ', 1)[0]].reads]
    return lines + [""]


def update_readme(readme: Path, counts: dict, others=()) -> bool:
    """Rewrite the first runs' counts between README's markers, the first model's then a line per other model's;
    False where the markers are absent."""
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


def sensitivity(models: list) -> dict:
    """{finding id: what each model's follow-ups did to it, in words (front.sensitivity)}."""
    return {f.id: [x for i, m in enumerate(models) for x in front.sensitivity(
        f.id, m.by_run, m.runs, m.by_run.get(FIRST, {}).get(f.id), f"{m.name[:8]}: " if i else "")] for f in FINDINGS}


def front_page(ctx, models: list, cut=frozenset()) -> list:
    return ["# Reproduction report", "",
             "Written by `reproduce.py` from the raw results in [results/](results/README.md) (`python reproduce.py "
             "--report-only` rewrites it and its pages without training): do not edit by hand.", "",
             f"Scale **{ctx.scale.name}** ({ctx.scale.note}). Model **{ctx.model}** ({ctx.n} layers; the papers' "
             f"BERT-base is 12 x 768); tasks " + ", ".join(f"{r} = {t}" for r, t in ctx.tasks.items()) + ".", "",
             *compare.introduce(models[1:]),
             "**How to read it.** The first run, declared with its rule and SESOI before it ran, gives each "
             "headline verdict and the counts; follow-ups (the last column) are sensitivity analyses chosen after "
             "it, never counted. Reproduced: the 95% interval above 0 and the estimate at least the SESOI; not "
             "reproduced: the interval below the SESOI; underpowered: undecided, and the design could not have "
             "decided it ([the whole rule](runs.md#the-rule)). Effects are signed so that the paper's direction is "
             f"positive. *Fragile*: the decisive bound within {front.FRAGILE:g} x the SESOI of its decision line "
             "([why](runs.md#the-rule)). The null baseline's ratio (follow-up hao-null-perturbation) floors its "
             f"lower third's mean at {null_baseline.FLOOR:g} of its upper's: a near-zero bottom-layer attention JS "
             "would otherwise make the ratio measure its denominator.", "",
             *(f"- First runs, **{m.name}**: {counts_line(m.counts)}" for m in models), "",
             front.MULTIPLICITY, "",
             *(f"- {front.multiplicity(m.by_run.get(FIRST, {}), m.name)}" for m in models), "",
             *(["**Unfinished** runs (some trials lack seeds; see [the runs](runs.md)): "
                + ", ".join(f"{e} ({label})" for label, e in sorted(cut)) + ".", ""] if cut else []),
             f"![Forest plot: each finding's first-run effect in units of its SESOI, per paper]({FOREST})", "",
             *front.table(FINDINGS, models, sensitivity(models)),
             "", "Details, a page per paper: " + ", ".join(f"[{PAGES[p]}]({PAGES[p]}.md)" for p in PAPERS)
             + "; [the rule, the experiments and the runs](runs.md).", ""]


def wrap(lines: list) -> list:
    """Prose at 120 characters a line (markdown joins them); tables, headings and lists as they are."""
    return [x if x[:1] in "|#!-" else textwrap.fill(x, 120, break_long_words=False, break_on_hyphens=False)
            for x in lines]


def write(results_dir: Path, report_path: Path, ctx, readme=None) -> Path:
    """report.md, the paper pages, runs.md, report.json and the README's counts from the kept results: the first
    model's (`ctx`'s, at the results folder's root) and every other model's beside it (RESULTS/models/SLUG)."""
    models = [compare.column(None, results_dir, ctx, NULL_FILE), *compare.others(results_dir, ctx, NULL_FILE)]
    first, columns, runs = models[0], models[1:], models[0].runs
    report_dir = Path(report_path).parent
    cut = frozenset((label, name) for label, by_experiment in runs.items()
                    for name, (meta, sweeps) in by_experiment.items() if unfinished(meta, sweeps))
    (report_dir / "figures").mkdir(parents=True, exist_ok=True)
    front.forest(FINDINGS, PAPERS, [(m.name, m.by_run.get(FIRST, {})) for m in models], report_dir / FOREST)
    atomic_write_text(report_path, "\n".join(wrap(front_page(ctx, models, cut))))
    for paper in PAPERS:
        atomic_write_text(report_dir / f"{PAGES[paper]}.md", "\n".join(paper_page(paper, models, cut, ctx.n)))
    details = ["# The rule, the experiments and the runs", "", "[Front page](report.md)", "", "## The rule", "",
               RULE, "", front.FRAGILE_WHY[0].upper() + front.FRAGILE_WHY[1:] + ".", "", front.MULTIPLICITY[:-1]
               + ".", "", front.__doc__.split("\n\n", 2)[2].strip(), "", *experiments_section(models, ctx, report_dir),
               *pending_section(runs, ctx), *DEPARTURES]
    atomic_write_text(report_dir / "runs.md", "\n".join(details))
    write_json(Path(report_path).with_suffix(".json"), models, ctx, cut)
    if readme:
        update_readme(readme, first.counts, compare.readme_lines(columns))
    return Path(report_path)


def write_json(path: Path, models: list, ctx, cut=frozenset()) -> None:
    """report.json: every line as data (finding, paper, quote, what was tested, run, effect, interval, n, SESOI,
    power, verdict, what decides it, what was run, where it trained, Holm, fragile), the first model's, with
    `models`: each model's entry on it."""
    first, lines = models[0], []
    for label, found in first.by_run.items():
        for v in found.values():
            line, entries = compare.entries(label, v, models, FOLLOW_UPS[label].protocol if label in FOLLOW_UPS
                                            else v.finding.protocol)
            lines.append({**line, "unfinished_run": (label, v.finding.experiment) in cut, "models": entries})
    data = {"scale": ctx.scale.name, "model": ctx.model, "layers": ctx.n, "tasks": ctx.tasks,
            "counts_first_run": first.counts, "lines": lines, "models": compare.summary(models),
            "multiplicity": {m.name: front.multiplicity(m.by_run.get(FIRST, {}), m.name) for m in models},
            "fragile_margin_share_of_sesoi": front.FRAGILE,
            "sensitivity": {fid: [x.replace("**", "") for x in cell] for fid, cell in sensitivity(models).items()}}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")

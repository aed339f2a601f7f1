"""The report of one results folder's model from its kept results alone (`kept.py`; `reproduce.py --report-only` is
this; nothing here trains): report.md, the front page (a row per finding, the multiplicity line, the forest plot:
front.py); a page per paper (each finding's quote once, its setting, each run's line and what decides it); runs.md
(the rule, the experiments with their wall times and figures, the pending follow-ups); report.json. Another model's
runs are kept in a results folder of their own, with a report of their own, which the front page links."""
import csv
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..fileio import atomic_write_text
from . import experiments, front, kept, null_baseline, plan, power
from . import verdicts as verdicts_module
from .curves import budget_line, learning_curve_link, run_lines, unfinished  # noqa: F401  (tests' names)
from .findings import FINDINGS, PAGES, PAPERS
from .follow_ups import FIRST, FOLLOW_UPS
from .judging import counts_line, counts_of, explain, labels_of, verdicts  # noqa: F401
from .lines import cell, effect_cell, outcome_text, record

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
CHECKOUT = Path(__file__).resolve().parents[2]
PRETRAINING = CHECKOUT / "docs" / "pretraining-results"
RESULTS = Path("docs/reproduction/results")   # reproduce.py's default --results: the embedded model's


@dataclass
class Judged:
    """The folder's model judged on its kept runs: every run's verdicts, what decides each, its counts and Holm."""
    ctx: experiments.Context
    runs: dict
    by_run: dict                # {run label: {finding id: Verdict}}
    null: Optional[dict]        # the null baseline its ratio lines read (null_baseline.load)
    pilot: bool                 # whether its power has a pilot (power.pilot_of)
    weights: str                # the sha256 prefix of its weights its runs record

    def __post_init__(self):
        self.explained = explain(self.runs, self.by_run)   # {run label: {finding id: (disclosure, what decides it)}}
        self.counts, self.holm = counts_of(self.by_run), front.holm(self.by_run.get(FIRST, {}))


def judged(results_dir: Path, ctx) -> Judged:
    """The model's verdicts on the folder's kept runs, with its own pilot (power) and null baseline."""
    runs = kept.load(results_dir)
    kept.check_one_setting(runs, ctx.scale.name, ctx.model)
    null, pilot = null_baseline.load(results_dir / NULL_FILE), power.pilot_of(results_dir, ctx.model)
    weights = {run.weights for by_experiment in runs.values() for run, _ in by_experiment.values()} - {""}
    return Judged(ctx, runs, verdicts(runs, ctx, null, pilot), null, pilot is not None, min(weights, default=""))


def credentials(weights: str) -> Optional[str]:
    """What was measured of a model pretrained here whose weights' sha256 begins `weights`: its held-out masked
    accuracy and, per data fraction, its SST gain over the same network untrained, paired by seed, from the
    pretraining record of its weights (docs/pretraining-results/*/summary.csv names each rung by its weights' hash;
    ladder.json holds the accuracy); None where there is none."""
    for summary in sorted(PRETRAINING.glob("*/summary.csv")) if weights else ():
        with open(summary, newline="", encoding="utf-8") as handle:
            rows = [r for r in csv.DictReader(handle) if f"weights={weights}" in r["config"]
                    and r["metric"] == "dev/sst" and r["change_mean"]]
        if rows:
            ladder = json.loads((summary.parent / "ladder.json").read_text(encoding="utf-8"))
            tokens = int(rows[0]["config"].split("tokens=")[1].split(",")[0])   # the rung whose weights match
            rung = next(r for r in ladder["rungs"].values() if r["tokens"] == tokens and "held_out" in r)
            gains = "; ".join(f"{float(r['change_mean']):+.3f} [{float(r['change_ci95_low']):+.3f}, "
                              f"{float(r['change_ci95_high']):+.3f}] at fraction {float(r['data_fraction']):g} (n = "
                              f"{r['change_n']})" for r in rows)
            where = summary.parent.relative_to(PRETRAINING.parents[1])
            return (f"masked-LM pretraining on the course's text by pretrain.py (not BERT), held-out masked-token "
                    f"accuracy {rung['held_out']['masked_accuracy']:.3f}; its pretraining's SST gain over the same "
                    f"network untrained, paired by seed: {gains} (`{where}/`)")
    return None


def model_credentials(m: Judged) -> Optional[str]:
    """What was measured of the model, for any but the embedded one the pilot ran on (DEPARTURES describes it)."""
    if m.ctx.model == power.PILOT_MODEL:
        return None
    return credentials(m.weights) or ("no pretraining record of its weights in docs/pretraining-results/: nothing "
                                      "measured of its pretraining")


def other_reports(report_dir: Path) -> list:
    """A line linking each other model's report kept in a folder beside this one (FOLDER/report.json)."""
    out = []
    for path in sorted(Path(report_dir).glob("*/report.json")):
        other = json.loads(path.read_text(encoding="utf-8"))
        out += [f"Another model, in a report of its own: [{path.parent.name}]({path.parent.name}/report.md) "
                f"(`{other['model']}`, {other['layers']} layers; {other['credentials']}; "
                f"{counts_line(other['counts_first_run'])[:-1]}).", ""]
    return out


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


def line_rows(f, m: Judged, cut) -> tuple:
    """A finding's table rows (a run each) and what decides each."""
    rows, notes = [], []
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
        rows.append(f"| {label} ({kind}) | {front.device(m.runs, v)} | {cell(effect_cell(v))} | "
                    f"**{outcome_text(v)}**{fragile} | {adjusted} | "
                    f"{cell(power.describe(v.power, g.sesoi, g.kind)) if v.power else '-'} |")
        disclosed, sentence = m.explained[label][f.id]
        tested = f" Tested: {g.tested}." if g.tested != f.tested else ""
        notes.append(f"- {label}: {sentence}{tested}" + (f" Run: {disclosed}." if disclosed else ""))
    return rows, notes


def paper_page(paper: str, m: Judged, cut) -> list:
    lines = [f"# {PAPERS[paper]}", "", f"[Front page](report.md) · [the rule and the runs](runs.md) · the paper's "
             f"text: `../shared/papers/{paper}`", ""]
    for f in (f for f in FINDINGS if f.paper == paper):
        rows, notes = line_rows(f, m, cut)
        sesoi = f"SESOI {f.sesoi:g}" + (" (equivalence margin)" if f.kind == "equivalence" else "")
        lines += [f"## <a id=\"{f.id}\"></a>`{f.id}`: {f.claim}", "", f"> \"{f.quote}\"", "",
                  f"The paper: {f.setting}; its comparison: {f.comparison}; metric: {f.metric}.", "",
                  f"Tested here: {f.tested if f.experiment else 'not testable here: ' + f.untestable}. {sesoi}: "
                  f"{f.sesoi_reason}" + (" (the 2026-11-24 pilot's spread informed it)" if f.sesoi_from_pilot
                                         else "") + f". On the embedded model: {f.model_note}", ""]
        extra = [null_note(f.id, m.null, m.ctx.n),
                 f"Experiment: [{f.experiment}](runs.md#experiment-{f.experiment})." if f.experiment else "",
                 f"Not tested here: {f.untestable}." if f.untestable and f.experiment else "",
                 f"Where it can be tested: `{f.elsewhere}`." if f.elsewhere else ""]
        lines += [x for x in extra if x] + [""]
        if rows:
            lines += ["| run | device | effect [95% CI] | verdict | after Holm | power (80%) |",
                      "|---|---|---|---|---|---|", *rows, "", *notes, ""]
    return lines


def experiments_section(m: Judged, report_dir: Path) -> list:
    """Each experiment, its estimate and the model's kept runs of it."""
    ctx = m.ctx
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
        for label, by_experiment in m.runs.items():
            if e.name in by_experiment:
                lines += run_lines(report_dir, e, label, by_experiment[e.name], "results/")
    return lines


def with_results(command: str, results_dir: Path) -> str:
    """A reproduce.py command given --results where the folder is not the default one (a path in the checkout
    relative to it)."""
    folder = Path(results_dir).resolve()
    shown = folder.relative_to(CHECKOUT) if folder.is_relative_to(CHECKOUT) else folder
    flag = "" if shown == RESULTS else f"--results {shown} "
    return command.replace("python reproduce.py ", f"python reproduce.py {flag}", 1)


def pending_section(runs: dict, ctx, results_dir: Path) -> list:
    """The declared follow-ups that still train (a follow-up that re-reads a kept run has its verdicts already)."""
    lines = ["## Pending follow-ups", "", "Minutes on a CPU, `tasks/reproduction/plan.py`:", ""]
    lines += [f"- {with_results(line, results_dir).replace(': python', ': `python', 1)}`: "
              f"{FOLLOW_UPS[line.split(' ', 1)[0]].reason}."
              for line in plan.lines(FOLLOW_UPS, runs, ctx) if not FOLLOW_UPS[line.split(' ', 1)[0]].reads]
    return lines + [""]


def update_readme(readme: Path, counts: dict) -> bool:
    """Rewrite the first runs' counts between README's markers; False where the markers are absent."""
    text = Path(readme).read_text(encoding="utf-8") if Path(readme).exists() else ""
    if README_START not in text or README_END not in text:
        return False
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    atomic_write_text(readme, f"{head}{README_START}\n{counts_line(counts)}\n{README_END}{tail}")
    return True


EMBEDDED = ("at the cpu scale the embedded all-MiniLM-L6-v2 (6 x 384, a sentence-pair contrastive encoder trained on "
            "Quora duplicates and NLI among others, zero-shot STS 0.838, not an MLM). Each line says what it can carry")


def departures(m: Judged) -> list:
    measured = model_credentials(m)
    model = EMBEDDED if measured is None else f"`{m.ctx.model}`, {m.ctx.n} layers: {measured}"
    return ["## Departures from the papers", "", f"- The model: {model}.",
            "- The data: the course's SST-5, Quora and STS in place of GLUE; GLUE tasks run through `--task-file` "
            "and `--tasks ROLE=NAME`.",
            "- Depth: 'last', 'middle' and 'low' layers are thirds of the model.",
            "- The budget: the scale's, shown above; the papers trained 3-9 epochs.", ""]


def sensitivity(m: Judged) -> dict:
    """{finding id: what the follow-ups did to it, in words (front.sensitivity)}."""
    return {f.id: front.sensitivity(f.id, m.by_run, m.runs, m.by_run.get(FIRST, {}).get(f.id)) for f in FINDINGS}


def front_page(m: Judged, report_dir: Path, cut=frozenset()) -> list:
    ctx, measured = m.ctx, model_credentials(m)
    pilot = "" if m.pilot else f"; {power.NOT_COMPUTED}: it has no pilot of its own"
    return ["# Reproduction report", "",
            "Written by `reproduce.py` from the raw results in [results/](results/README.md) (`python reproduce.py "
            "--report-only` rewrites it and its pages without training): do not edit by hand.", "",
            f"Scale **{ctx.scale.name}** ({ctx.scale.note}). Model **{ctx.model}** ({ctx.n} layers; the papers' "
            f"BERT-base is 12 x 768); tasks " + ", ".join(f"{r} = {t}" for r, t in ctx.tasks.items()) + ".", "",
            *([f"What was measured of it: {measured}{pilot}. Each line's page says what the embedded model can "
               f"carry, not what this one can.", ""] if measured else []),
            *other_reports(report_dir),
            "**How to read it.** The first run, declared with its rule and SESOI before it ran, gives each "
            "headline verdict and the counts; follow-ups (the last column) are sensitivity analyses chosen after "
            "it, never counted. Reproduced: the 95% interval above 0 and the estimate at least the SESOI; not "
            "reproduced: the interval below the SESOI; underpowered: undecided, and the design could not have "
            "decided it ([the whole rule](runs.md#the-rule)). Effects are signed so that the paper's direction is "
            f"positive. *Fragile*: the decisive bound within {front.FRAGILE:g} x the SESOI of its decision line "
            "([why](runs.md#the-rule)). The null baseline's ratio (follow-up hao-null-perturbation) floors its "
            f"lower third's mean at {null_baseline.FLOOR:g} of its upper's: a near-zero bottom-layer attention JS "
            "would otherwise make the ratio measure its denominator.", "",
            counts_line(m.counts), "",
            front.MULTIPLICITY, "", front.multiplicity(m.by_run.get(FIRST, {}), ctx.model), "",
            *(["**Unfinished** runs (some trials lack seeds; see [the runs](runs.md)): "
               + ", ".join(f"{e} ({label})" for label, e in sorted(cut)) + ".", ""] if cut else []),
            f"![Forest plot: each finding's first-run effect in units of its SESOI, per paper]({FOREST})", "",
            *front.table(FINDINGS, m.by_run.get(FIRST, {}), m.holm, sensitivity(m)),
            "", "Details, a page per paper: " + ", ".join(f"[{PAGES[p]}]({PAGES[p]}.md)" for p in PAPERS)
            + "; [the rule, the experiments and the runs](runs.md).", ""]


def wrap(lines: list) -> list:
    """Prose at 120 characters a line (markdown joins them); tables, headings and lists as they are."""
    return [x if x[:1] in "|#!-" else textwrap.fill(x, 120, break_long_words=False, break_on_hyphens=False)
            for x in lines]


def write(results_dir: Path, report_path: Path, ctx, readme=None) -> Path:
    """report.md, the paper pages, runs.md, report.json and the README's counts from the folder's kept results
    (one model's: `ctx`'s)."""
    m = judged(results_dir, ctx)
    report_dir = Path(report_path).parent
    cut = frozenset((label, name) for label, by_experiment in m.runs.items()
                    for name, (meta, sweeps) in by_experiment.items() if unfinished(meta, sweeps))
    (report_dir / "figures").mkdir(parents=True, exist_ok=True)
    front.forest(FINDINGS, PAPERS, m.by_run.get(FIRST, {}), report_dir / FOREST)
    atomic_write_text(report_path, "\n".join(wrap(front_page(m, report_dir, cut))))
    for paper in PAPERS:
        atomic_write_text(report_dir / f"{PAGES[paper]}.md", "\n".join(paper_page(paper, m, cut)))
    details = ["# The rule, the experiments and the runs", "", "[Front page](report.md)", "", "## The rule", "",
               RULE, "", front.FRAGILE_WHY[0].upper() + front.FRAGILE_WHY[1:] + ".", "", front.MULTIPLICITY[:-1]
               + ".", "", front.__doc__.split("\n\n", 2)[2].strip(), "", *experiments_section(m, report_dir),
               *pending_section(m.runs, ctx, results_dir), *departures(m)]
    atomic_write_text(report_dir / "runs.md", "\n".join(details))
    write_json(Path(report_path).with_suffix(".json"), m, cut)
    if readme:
        update_readme(readme, m.counts)
    return Path(report_path)


def write_json(path: Path, m: Judged, cut=frozenset()) -> None:
    """report.json: every line as data (finding, paper, quote, what was tested, run, effect, interval, n, SESOI,
    power, verdict, what decides it, what was run, where it trained, Holm, fragile), and what was measured of the
    model (`credentials`, null for the embedded one)."""
    lines = []
    for label, found in m.by_run.items():
        for v in found.values():
            line = record(v, FOLLOW_UPS[label].protocol if label in FOLLOW_UPS else v.finding.protocol,
                          *m.explained[label][v.finding.id])
            p, adjusted, verdict = m.holm.get(v.finding.id, (None,) * 3) if label == FIRST else (None,) * 3
            lines.append({**line, "headline": label == FIRST, "device": front.device(m.runs, v),
                          "fragile": front.fragile(v), "unfinished_run": (label, v.finding.experiment) in cut,
                          "holm": {"p": p, "p_adjusted": adjusted, "verdict": verdict} if verdict else None})
    ctx = m.ctx
    data = {"scale": ctx.scale.name, "model": ctx.model, "layers": ctx.n, "tasks": ctx.tasks, "weights": m.weights,
            "credentials": model_credentials(m), "pilot": m.pilot, "counts_first_run": m.counts, "lines": lines,
            "multiplicity": front.multiplicity(m.by_run.get(FIRST, {}), ctx.model),
            "fragile_margin_share_of_sesoi": front.FRAGILE,
            "sensitivity": {fid: [x.replace("**", "") for x in cell] for fid, cell in sensitivity(m).items()}}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")

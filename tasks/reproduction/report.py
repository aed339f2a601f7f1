"""The report of one results folder's model from its kept results alone (`reproduce.py --report-only`; nothing here
trains): report.md, the front page (front.py); a page per paper (each finding's quote once, each run's line and what
decides it); runs.md (the rule, the experiments, the pending follow-ups); report.json, every line as data."""
import csv
import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError

from ..fileio import atomic_write_text
from . import experiments, front, judging, kept, null_baseline, plan, power, verdicts
from .curves import run_lines, unfinished
from .findings import FINDINGS, PAGES, PAPERS
from .follow_ups import CONFIRMATORY, FIRST, FOLLOW_UPS, PLANNED_MINUTES
from .judging import counts_line, counts_of
from .lines import decides, disclosure, effect_cell
from .record import SCHEMA, Dated, Holm, Line, RowLine

README_START = "<!-- reproduction-counts: rewritten by `python reproduce.py --report-only`, do not edit -->"
README_END = "<!-- /reproduction-counts -->"
FOREST = "figures/forest.png"
CHECKOUT = Path(__file__).resolve().parents[2]
PRETRAINING = CHECKOUT / "docs" / "pretraining-results"
RESULTS = Path("docs/reproduction/results")   # reproduce.py's default --results: the embedded model's
UNITS = ("Where configurations share one reference the interval carries its noise: the seed is the unit for the "
         "heads of a layer, a two-level model over seeds and orders for random layer orders "
         "(`tasks/ablation/statistics.py`; coverage: `tests/tasks/ablation/test_interval_coverage.py`). "
         "Rules and SESOIs were declared (`tasks/reproduction/findings/`) after a 3-seed pilot (2026-11-24) "
         "whose spread informed the SESOIs "
         "marked so, and before their data except where a line's page reads \"revised after its data\" "
         "(`findings/history.py` dates each change and what the line read before it).")
EMBEDDED = ("at the cpu scale the embedded all-MiniLM-L6-v2 (6 x 384, a sentence-pair contrastive encoder trained on "
            "Quora duplicates and NLI among others, zero-shot STS 0.838, not an MLM). Each line says what it can carry")


@dataclass
class Judged:
    """A results folder's model judged on its kept runs, and each line as data (report.json's, the pages show it)."""
    ctx: experiments.Context
    runs: kept.KeptRuns
    by_run: dict                # {run label: {finding id: Verdict}}
    pilot: bool                 # whether its power has a pilot of its own (judging.pilot_of)
    weights: str                # the sha256 prefix of the weights its runs record
    credentials: Optional[str]  # what was measured of it; None for the embedded model the pilot ran on (EMBEDDED)
    identity: Optional[kept.Model] = None   # what the model is, as its kept runs record it

    def __post_init__(self):
        self.first = self.by_run[FIRST]
        self.cut = frozenset((label, name) for label, by_experiment in self.runs.items()
                             for name, kept_run in by_experiment.items() if unfinished(*kept_run))
        self.headline = judging.headline(self.by_run, self.cut)
        self.holm, self.counts = front.holm(self.headline), counts_of(self.headline)
        looks = judging.finished_looks(self.by_run, self.cut)
        self.cells = {f.id: front.sensitivity(f.id, looks, self.runs, self.headline[f.id]) for f in FINDINGS}
        self.lines = [self.record(label, v) for label, found in self.by_run.items() for v in found.values()]

    def record(self, label: str, v) -> Line:
        f, row = v.finding, front.decisive(v)[0]
        role = "headline" if self.headline[f.id] is v else "pilot" if label == FIRST else "sensitivity"
        p, adjusted, after = self.holm[f.id] if role == "headline" and f.id in self.holm else (None,) * 3
        dates = data_dates(self.runs, v)
        measured = [r for r in v.rows if r.estimate and not r.pending]
        return Line(
            f.id, f.paper, f.quote, f.tested if f.experiment else None, label, role, f.experiment,
            FOLLOW_UPS[label].protocol if label in FOLLOW_UPS else f.protocol + revised_since(f, dates),
            tuple(v.reads), row_lines(v), v.rows.index(row) if row else None, f.sesoi, f.kind, f.combine,
            f.sesoi_reason, f.sesoi_from_pilot, v.outcome,
            power.label(v.power) if v.outcome in power.UNDECIDED else v.outcome,
            v.power, decides(v),
            disclosure(self.runs, v, label), front.device(self.runs, v), front.fragile(v),
            (label, f.experiment) in self.cut, Holm(p, adjusted, after) if after else None,
            _dated(f.declared), tuple(map(_dated, f.revisions)), f.rule_date, dates, *history(f, dates),
            judging.registered(f.id, self.by_run, self.ctx.model, self.cut) if label == FIRST else "",
            (sum(r.verdict == verdicts.REPRODUCED for r in measured), len(measured)))


def row_lines(v) -> tuple:
    """Each row of the verdict as report.json keeps it."""
    return tuple(map(_row_line, v.rows))


def _row_line(row) -> RowLine:
    e = row.estimate
    unmeasured = (None, None, (None, None), None)
    figures = unmeasured if e is None else (_number(e.mean), e.level, (_number(e.low), _number(e.high)), e.n)
    return RowLine(row.label, *figures, row.verdict, row.pending or None)


def _dated(r) -> Dated:
    """A Revision as report.json keeps it (a follow-up's re-declaration has none of its own: empty)."""
    return Dated(r.date, r.commit, r.what, r.before) if r else Dated("", "", "", "")


def data_dates(runs: kept.KeptRuns, v) -> tuple:
    """(first, last) date of the data of the kept runs the line read, "YYYY-MM-DD HH:MM" UTC; () without
    data: from the first trial's end (a sitting keeps an experiment's trials when it finishes, so the first
    sitting's date can come hours after them) to the last sitting's."""
    read = [found for found in (runs.kept(source, experiment) for experiment, source in v.reads) if found]
    dates = sorted(s.date.removesuffix(" UTC") for found in read for s in found.run.sittings)
    ends = [r.finished_at for found in read for records in found.sweeps.values() for r in records
            if r.finished_at]
    first = min(ends, default="").replace("T", " ")[:16]
    return (min(first or dates[0], dates[0]), dates[-1]) if dates else ()


def history(f, dates: tuple) -> tuple:
    """(what the line's history is, whether its rule changed after its data): before its data where its rule's last
    change precedes its first sitting; else each change since the data, dated, with what it read before."""
    if not dates or not f.declared:
        return "no data yet" if f.declared else "", False
    if f.rule_date < dates[0]:
        return "declared before its data", False
    after = [r for r in f.revisions if r.date >= dates[0]]
    if not after:
        return (f"declared after its data: {f.declared.date} ({f.declared.commit}), its data from {dates[0]}",
                True)
    return "revised after its data: " + "; ".join(
        f"{r.date} ({r.commit or 'issue 54'}): {r.what}" + (f"; before: {r.before}" if r.before else "")
        for r in after), True


def revised_since(f, dates: tuple) -> int:
    """How many of the line's revisions came after its data (each a new protocol of its first run's line)."""
    return sum(r.date >= dates[0] for r in f.revisions) if dates else 0


def _number(x):
    """A float as JSON has it (None for nan or infinity); anything else as it is."""
    return (float(x) if math.isfinite(x) else None) if isinstance(x, float) else x


def judged(results_dir: Path, ctx) -> Judged:
    """The model's verdicts on the folder's kept runs, with its own pilot (power) and null baseline."""
    runs = kept.load(results_dir)
    kept.check_one_setting(runs, ctx.scale.name, ctx.model)
    null, pilot = null_baseline.load(results_dir / null_baseline.PATH.name), judging.pilot_of(results_dir, ctx.model)
    weights = min({run.weights for run in runs.runs()} - {""}, default="")
    measured = None if ctx.model == power.PILOT_MODEL else credentials(weights) or (
        "no pretraining record of its weights in docs/pretraining-results/: nothing measured of its pretraining")
    return Judged(ctx, runs, judging.verdicts(runs, ctx, null, pilot), pilot is not None, weights, measured,
                  kept.identity_of(runs))


def credentials(weights: str) -> Optional[str]:
    """Held-out masked accuracy and, per data fraction, the SST gain over the same network untrained (paired by
    seed) of a model pretrained here whose weights' sha256 begins `weights`, from its pretraining record
    (docs/pretraining-results/*/summary.csv names each rung by its weights' hash; ladder.json holds the accuracy)."""
    for summary in sorted(PRETRAINING.glob("*/summary.csv")) if weights else ():
        rows = [r for r in csv.DictReader(summary.read_text(encoding="utf-8").splitlines())
                if f"weights={weights}" in r["config"] and r["metric"] == "dev/sst" and r["change_mean"]]
        if rows:
            tokens = int(rows[0]["config"].split("tokens=")[1].split(",")[0])   # the rung whose weights match
            ladder = json.loads((summary.parent / "ladder.json").read_text(encoding="utf-8"))["rungs"].values()
            accuracy = next(r for r in ladder if r["tokens"] == tokens and "held_out" in r)["held_out"]
            gains = "; ".join(f"{float(r['change_mean']):+.3f} [{float(r['change_ci95_low']):+.3f}, "
                              f"{float(r['change_ci95_high']):+.3f}] at fraction {float(r['data_fraction']):g} (n = "
                              f"{r['change_n']})" for r in rows)
            return (f"masked-LM pretraining on the course's text by pretrain.py (not BERT), held-out masked-token "
                    f"accuracy {accuracy['masked_accuracy']:.3f}; its pretraining's SST gain over the same network "
                    f"untrained, paired by seed: {gains} (`{summary.parent.relative_to(CHECKOUT)}/`)")
    return None


def other_reports(report_dir: Path) -> dict:
    """{folder: report.json, its lines as `Line`s} of each other model's report kept in a folder beside this one."""
    out = {}
    for path in sorted(report_dir.glob("*/report.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:   # a report.json older than the column it feeds
            raise UserError(f"{path} is stale: rewrite it with python reproduce.py --report-only --results "
                            f"{path.parent / 'results'}")
        out[path.parent.name] = {**data, "lines": [Line.from_json(x, str(path)) for x in data["lines"]]}
    return out


def _finding_head(f) -> list:
    """A finding's quote, the paper's setting, what is tested here and its SESOI, once."""
    sesoi = f"SESOI {f.sesoi:g}" + (" (equivalence margin)" if f.kind == "equivalence" else "")
    pilot = " (the 2026-11-24 pilot's spread informed it)" if f.sesoi_from_pilot else ""
    tested = f.tested if f.experiment else "not testable here: " + f.untestable
    return [f"## <a id=\"{f.id}\"></a>`{f.id}`: {f.claim}", "", f"> \"{f.quote}\"", "",
            f"The paper: {f.setting}; its comparison: {f.comparison}; metric: {f.metric}.", "",
            f"Tested here: {tested}. {sesoi}: {f.sesoi_reason}{pilot}. On the embedded model: {f.model_note}", "",
            *([f"Experiment: [{f.experiment}](runs.md#experiment-{f.experiment})."
               + (f" Not tested here: {f.untestable}." if f.untestable else ""), ""] if f.experiment else []),
            *([f"Where it can be tested: `{f.elsewhere}`.", ""] if f.elsewhere else [])]


def _declaration(x: Line) -> str:
    """'Rule declared DATE (commit); data DATE to DATE: declared before its data.' and a registered run's line."""
    data = f"; data {x.data_dates[0]} to {x.data_dates[1]}" if x.data_dates else ""
    return (f"Rule (rows, SESOI, interval model, direction) last changed {x.rule_date}; declared {x.declared.date} "
            f"({x.declared.commit}){data}: {x.history}." + (f" The **{x.registered}**: this run is its pilot."
                                                           if x.registered else ""))


def _run_row(x: Line, m: Judged, f) -> str:
    v = m.by_run[x.run][f.id]   # a follow-up may re-declare its finding (its own measure and SESOI)
    can = power.describe(v.power, v.finding.sesoi, v.finding.kind).replace("|", "\\|") if v.power else "-"
    kind = "sensitivity" if x.role == "sensitivity" else "confirmatory" if x.run != FIRST else \
        "revised after its data" if x.revised_after_data else "declared"
    return (f"| {x.run} ({kind}, {x.role if x.role != 'sensitivity' else 'not counted'}, protocol {x.protocol}"
            f"{'; its run is unfinished' if x.unfinished_run else ''}) | {x.device} | {effect_cell(v)} | "
            f"**{x.verdict_text}**{' *fragile*' if x.fragile else ''} | {x.holm.verdict if x.holm else '-'} | "
            f"{can} |")


def paper_page(paper: str, m: Judged) -> list:
    """Each finding of the paper: its quote, setting and SESOI once, then a row per run and what decides each."""
    lines = [f"# {PAPERS[paper]}", "", f"[Front page](report.md) · [the rule and the runs](runs.md) · the paper's "
             f"text: `../shared/papers/{paper}`", ""]
    for f in (f for f in FINDINGS if f.paper == paper):
        lines += _finding_head(f)
        found = [x for x in m.lines if x.finding == f.id]
        if not found:
            continue
        lines += ["| run | device | effect [CI], each row with its verdict | verdict | after Holm | power (80%) |",
                  "|---" * 6 + "|", *(_run_row(x, m, f) for x in found), ""]
        lines += [f"- {x.run}: {x.decides}" + (f" Tested: {x.tested}." if x.tested not in (f.tested, None) else "")
                  + (f" Run: {x.disclosure}." if x.disclosure else "") for x in found]
        lines += ["", *(_declaration(x) for x in found if x.run == FIRST and x.declared.date), ""]
    return lines


def results_flag(results_dir: Path) -> str:
    """A reproduce.py command's '--results FOLDER ' where the folder is not the default one (relative in the
    checkout), else ''."""
    folder = Path(results_dir).resolve()
    shown = folder.relative_to(CHECKOUT) if folder.is_relative_to(CHECKOUT) else folder
    return "" if shown == RESULTS else f"--results {shown} "


def runs_page(m: Judged, report_dir: Path, results_dir: Path) -> list:
    """The rule; each experiment, its estimate and the model's kept runs of it; the declared follow-ups that still
    train (one that re-reads a kept run has its verdicts already); the departures from the papers."""
    ctx = m.ctx
    lines = ["# The rule, the experiments and the runs", "", "[Front page](report.md)", "", "## The rule", "",
             verdicts.__doc__.split("\n", 2)[2], UNITS, "", front.FRAGILE_WHY, "", front.MULTIPLICITY[:-1] + ".", "",
             front.P_VALUES, "", "## Experiments", "",
             f"Estimated minutes at the {ctx.scale.name} scale on a CPU in {cpu_precision(ctx)}: each "
             f"trial's expected steps x a measured seconds a step, or a probe's or comparison's measured "
             f"seconds (`tasks/reproduction/plan.py`: medians over the kept runs in that precision, the one "
             f"most of them trained in).", ""]
    for e in experiments.EXPERIMENTS.values():
        minutes = plan.experiment_minutes(e, ctx)
        lines += [f"### <a id=\"experiment-{e.name}\"></a>{e.name}", "", e.what + ".", "",
                  f"Seeds: {e.seeds or ctx.scale.seeds}. Findings: " + ", ".join(
                      f"[{f.id}]({PAGES[f.paper]}.md#{f.id})" for f in FINDINGS if f.experiment == e.name) + ".", "",
                  *([f"Estimate: {minutes:.0f} min.", ""] if minutes is not None else [])]
        for label, by_experiment in m.runs.items():
            if e.name in by_experiment:
                lines += run_lines(report_dir, e, label, by_experiment[e.name], "results/")
    lines += ["## Pending follow-ups", "",
              f"Minutes on a CPU in {cpu_precision(ctx)}, `tasks/reproduction/plan.py`:", ""]
    lines += confirmatory_lines(m)
    lines += [f"- {line.replace(': python', ': `python', 1)}`: {FOLLOW_UPS[line.split(' ', 1)[0]].reason}."
              for line in plan.lines(FOLLOW_UPS, m.runs, ctx, results_flag(results_dir))
              if not FOLLOW_UPS[line.split(' ', 1)[0]].reads]
    model = f"`{ctx.model}`, {ctx.n} layers: {m.credentials}" if m.credentials else EMBEDDED
    return lines + ["", "## Departures from the papers", "", f"- The model: {model}.",
                    "- The data: the course's SST-5, Quora and STS in place of GLUE; GLUE tasks run through "
                    "`--task-file` and `--tasks ROLE=NAME`.",
                    "- Depth: 'last', 'middle' and 'low' layers are thirds of the model.",
                    "- The budget: the scale's, shown above; the papers trained 3-9 epochs.", ""]


def cpu_precision(ctx) -> str:
    """The precision the CPU estimates read (`plan.usual_precision`); "any precision" where none was kept."""
    return plan.usual_precision(ctx.scale.name, "cpu") or "any precision"


def confirmatory_lines(m: Judged) -> list:
    """What a confirmatory run would need, from the power figures: each headline line revised after its data or
    underpowered, its n and the minutes of that n on two cores (its experiment and those its findings read), and
    whether the registered run carries it (or left it undecided); past a GPU day's n, a line is left out."""
    ctx, out = m.ctx, []
    for x in (x for x in m.lines if x.headline and x.power and x.power.needs and x.experiment):
        if x.verdict == verdicts.UNDECIDABLE or not (x.revised_after_data or x.verdict == verdicts.UNDERPOWERED):
            continue
        e = experiments.EXPERIMENTS[x.experiment]
        per_seed = sum((plan.experiment_minutes(experiments.EXPERIMENTS[y], ctx) or 0)
                       / len(experiments.seeds_of(experiments.EXPERIMENTS[y], ctx.scale)) for y in (e.name, *e.needs))
        carried = x.finding in CONFIRMATORY.findings and CONFIRMATORY.model in ("", ctx.model)
        why = "revised after its data" if x.revised_after_data else "underpowered"
        where = (f"the registered run left it undecided at n = {x.power.n}" if x.run == CONFIRMATORY.label
                 else "registered" if carried else "not registered: past the budget")
        out.append(f"{x.finding} ({why}): needs n >= {x.power.needs:,}, ~{x.power.needs * per_seed:,.0f} min "
                   f"of {', '.join((e.name, *e.needs))} on two cores; {where}")
    head = ["What the power figures ask of a confirmatory run, line by line (`python reproduce.py --plan` sizes the "
            "registered one; lines undecidable at this scale are left out; lines of one experiment share its seeds, so "
            "their minutes do not add):", ""]
    return head + [f"- {x}" for x in sorted(out, key=lambda x: "not registered" in x)] + [""] if out else []


def update_readme(readme: Path, counts: dict) -> bool:
    """Rewrite the first runs' counts between README's markers; False where the markers are absent."""
    head, start, rest = (Path(readme).read_text(encoding="utf-8") if Path(readme).exists() else "").partition(
        README_START)
    _, end, tail = rest.partition(README_END)
    if not end:
        return False
    atomic_write_text(readme, f"{head}{start}\n{counts_line(counts)}\n{end}{tail}")
    return True


HAO_LARGE = "BERT-large model"   # Hao et al.'s Section 1, quoted (tests/tasks/reproduction/test_history.py finds it)
HOW_TO_READ = (
    "**How to read it.** Each line's headline is its first run, or, where a confirmatory run registered for it has "
    "kept results, that run (the first then its pilot); follow-ups (the last column) are sensitivity analyses, never "
    "counted. The **SESOI** is the smallest effect of interest: the least effect, in the line's own unit, that the "
    "paper's claim needs, fixed with the line's rule. Reproduced: the interval above 0 and the estimate at least the "
    "SESOI; not reproduced: the interval below the SESOI; underpowered: undecided, on a design that could not have "
    "decided it at its n; undecidable at this scale: the n it needs is past what a GPU day's seeds give ([the rule]"
    "(runs.md#the-rule)); effects signed so that the paper's direction is positive. The interval is the 95% one for a "
    "direction, the 90% one (TOST) for an equivalence (marked \"90% CI\"). A line of several rows shows its decisive "
    "row's effect and \"(k of n rows hold)\": how many of its rows hold at their own level; \"mixed\" where some hold "
    "and some do not (each row on its page). *Fragile*: the decisive bound within {fragile:g} x the SESOI of its "
    "decision line. A ratio line reads the model's ratio minus its own null's (an equal relative perturbation of "
    "every layer), whose lower third is floored at {floor:g} of its upper, lest a near-zero bottom-layer attention JS "
    "make the ratio measure its denominator. *Revised*: its rule changed after its first run's data was seen "
    "(dated on its page, with what it read before); only the other lines were declared before their data.")


def declared_line(counts: dict) -> str:
    """How many headline lines were declared before their data, and how many were revised after it."""
    return (f"Of the lines with data, {counts['before_data']} were declared before it and "
            f"{counts['revised_after_data']} revised (or declared) after it, their rule's dates and what they read "
            f"before on their pages. The confirmatory run registered {CONFIRMATORY.registered} "
            f"({len(CONFIRMATORY.findings)} lines on fresh seeds, planned at ~{PLANNED_MINUTES} min on "
            f"two cores when registered: [runs.md](runs.md#pending-follow-ups)) heads each line once the "
            f"experiments it reads are finished, the first run standing as the pilot; lines (revised or "
            f"underpowered) still awaiting it: {counts['confirmatory_registered']}.")


def front_page(m: Judged, others: dict, models: dict) -> list:
    """`others`: {folder: report.json} of the other models' reports beside it; `models`: front.table's."""
    ctx = m.ctx
    pilot = "" if m.pilot else f"; {power.NOT_COMPUTED}: it has no pilot of its own"
    return ["# Reproduction report", "",
            "Written by `reproduce.py` from the raw results in [results/](results/README.md) (`python reproduce.py "
            "--report-only` rewrites it and its pages without training): do not edit by hand.", "",
            f"Scale **{ctx.scale.name}** ({ctx.scale.note}). Model **{ctx.model}** ({ctx.n} layers; four of the papers "
            f"used BERT-base, 12 x 768, Hao et al. BERT-large, 24 x 1024: \"{HAO_LARGE}\"); tasks "
            + ", ".join(f"{r} = {t}" for r, t in ctx.tasks.items()) + ".", "",
            *([f"What it is: {m.identity.describe()}; {kept.REBUILT}.", ""] if m.identity and m.identity.recipe
              else []),
            *([f"What was measured of it: {m.credentials}{pilot}. Each line's page says what the embedded model can "
               f"carry, not what this one can.", ""] if m.credentials else []),
            *[x for name, data in others.items() for x in (
                f"Another model, in a report of its own: [{name}]({name}/report.md) (`{data['model']}`, "
                f"{data['layers']} layers; {data['credentials']}; {counts_line(data['counts_headline'])[:-1]}).", "")],
            HOW_TO_READ.format(fragile=front.FRAGILE, floor=null_baseline.FLOOR), "", counts_line(m.counts), "",
            declared_line(front.declared_counts(m.lines)), "",
            front.MULTIPLICITY, "", front.multiplicity(m.headline, ctx.model), "",
            *(["**Unfinished** runs (some trials lack seeds; see [the runs](runs.md)): "
               + ", ".join(f"{e} ({label})" for label, e in sorted(m.cut)) + ".", ""] if m.cut else []),
            f"![Forest plot: each finding's headline effect, a point per row, in units of its SESOI]({FOREST})", "",
            *front.table(FINDINGS, models, m.cells),
            "", "Details, a page per paper: " + ", ".join(f"[{PAGES[p]}]({PAGES[p]}.md)" for p in PAPERS)
            + "; [the rule, the experiments and the runs](runs.md).", ""]


def write(results_dir: Path, report_path: Path, ctx, readme=None) -> Path:
    """report.md, the paper pages, runs.md, report.json (every line as data: Judged.record; what was measured of the
    model: null for the embedded one) and the README's counts from the folder's kept results (`ctx`'s model's)."""
    m, report_dir = judged(results_dir, ctx), Path(report_path).parent
    others = other_reports(report_dir)
    models = {name: {x.finding: x for x in data["lines"] if x.headline}
              for name, data in {ctx.model: {"lines": m.lines}, **others}.items()}
    (report_dir / "figures").mkdir(parents=True, exist_ok=True)
    front.forest(FINDINGS, PAPERS, models, report_dir / FOREST)
    atomic_write_text(report_path, "\n".join(x if x[:1] in "|#!-" else textwrap.fill(   # prose at 120 a line
        x, 120, break_long_words=False, break_on_hyphens=False) for x in front_page(m, others, models)))
    for paper in PAPERS:
        atomic_write_text(report_dir / f"{PAGES[paper]}.md", "\n".join(paper_page(paper, m)))
    atomic_write_text(report_dir / "runs.md", "\n".join(runs_page(m, report_dir, results_dir)))
    data = {"scale": ctx.scale.name, "model": ctx.model, "layers": ctx.n, "tasks": ctx.tasks, "weights": m.weights,
            "credentials": m.credentials, "pilot": m.pilot, "counts_headline": m.counts, "schema": SCHEMA,
            "lines": [x.to_json() for x in m.lines], "counts_declared": front.declared_counts(m.lines),
            "multiplicity": front.multiplicity(m.headline, ctx.model), "fragile_margin_share_of_sesoi": front.FRAGILE,
            "recipe": m.identity.recipe if m.identity else "",
            "masked_accuracy": m.identity.masked_accuracy if m.identity else None,
            "sensitivity": {fid: [x.replace("**", "") for x in cell] for fid, cell in m.cells.items()}}
    atomic_write_text(Path(report_path).with_suffix(".json"), json.dumps(data, indent=1, sort_keys=True) + "\n")
    if readme:
        update_readme(readme, m.counts)
    return Path(report_path)

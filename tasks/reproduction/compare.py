"""Other models beside the first: each judged on its own kept runs (RESULTS/models/SLUG, models.py) with the same
declarations, its power from its own pilot and its own null baseline, and shown beside the first model's verdict on
every line: a column in each paper's table, a row per model in the line's comparison table, an entry per model
in report.json's `models`, and a line of counts in the README's block.

Two models disagree on a line when both decide it and their verdicts differ (one reproduced, the other not
reproduced); an undecided verdict is no evidence either way. A disagreeing line says so, and which model the
paper's setting resembles where its finding declares it (`Finding.setting_resembles`).

The columns and report.json's entries sit on the first model's lines (its runs); a run only another model has (a
follow-up the first has not run) shows in the comparison tables and under "Other models".
"""
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from . import curves, experiments, kept, models, null_baseline
from .findings import FINDINGS
from .judging import counts_line, counts_of, explain, verdicts
from .lines import cell, effect_cell, outcome_text, record
from .power import describe
from .verdicts import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

DECIDED = (REPRODUCED, NOT_REPRODUCED)
DISAGREE = "models disagree"
FIRST_KEYS = ("run", "effect", "interval", "n", "verdict", "verdict_text")   # the line's own fields have the rest
ENTRY_KEYS = (*FIRST_KEYS, "protocol", "rows", "power", "decides", "disclosure")


@dataclass
class Column:
    """One model's verdicts on its own kept runs."""
    model: models.Model
    ctx: experiments.Context
    runs: dict
    by_run: dict                # {run label: {finding id: Verdict}}
    explained: dict             # {run label: {finding id: (disclosure, what decides it)}}
    counts: dict
    has_pilot: bool


def column(model: models.Model, root: Path, ctx, null_file: str) -> Column:
    """A model's column: its kept runs judged at its own depth, with its own pilot (power) and null baseline."""
    folder = model.results(root)
    runs = kept.load(folder)
    depths = kept.depths(runs) - {None}
    own = dataclasses.replace(ctx, n=depths.pop() if len(depths) == 1 else ctx.n, model=model.name)
    pilot = models.pilot(model, root)
    by_run = verdicts(runs, own, null_baseline.load(folder / null_file), pilot)
    return Column(model, own, runs, by_run, explain(runs, by_run), counts_of(by_run), pilot is not None)


def others(root: Path, ctx, null_file: str) -> list:
    """A Column per other model with kept results, in their slugs' order."""
    return [column(m, root, ctx, null_file) for m in models.others(root)]


def disagree(first, other) -> bool:
    return first is not None and other is not None and first.outcome in DECIDED and other.outcome in DECIDED \
        and first.outcome != other.outcome


def resembles(finding) -> str:
    if finding.setting_resembles:
        return f"the paper's setting resembles {finding.setting_resembles}"
    return "which model the paper's setting resembles is not declared yet (`setting_resembles`)"


def header(columns: list) -> tuple:
    """The paper table's extra header cells and separators, one per other model."""
    return "".join(f" {c.model.slug} |" for c in columns), "---|" * len(columns)


def cells(columns: list, label: str, finding_id: str, first) -> str:
    """A table row's extra cells: each model's verdict and effect on the same line and run, and a disagreement."""
    out = ""
    for c in columns:
        v = c.by_run.get(label, {}).get(finding_id)
        if v is None or v.outcome in (NOT_RUN, NOT_TESTABLE):
            out += f" {v.outcome if v else '-'} |"
            continue
        mark = f" (**{DISAGREE}**)" if disagree(first, v) else ""
        out += f" **{outcome_text(v)}**{mark}: {cell(effect_cell(v))} |"
    return out


def note(finding, by_run: dict, columns: list) -> str:
    """The line's note where another model's verdict disagrees with the first's on some run, '' elsewhere."""
    found = [(label, c) for label, by in by_run.items() for c in columns
             if disagree(by.get(finding.id), c.by_run.get(label, {}).get(finding.id))]
    if not found:
        return ""
    which = "; ".join(f"{label}: {by_run[label][finding.id].outcome} on the first model, "
                      f"{c.by_run[label][finding.id].outcome} on {c.model.slug}" for label, c in found)
    return f"{DISAGREE} ({which}): {resembles(finding)}"


def table(paper: str, by_run: dict, columns: list, first_name: str) -> list:
    """Per line another model has results for: a row per model (run, effect, power, verdict)."""
    rows = []
    labels = list(dict.fromkeys([*by_run, *(label for c in columns for label in c.by_run)]))  # a run only they have too
    for f in (f for f in FINDINGS if f.paper == paper):
        for label in labels:
            theirs = [(c, c.by_run.get(label, {}).get(f.id)) for c in columns]
            if not any(v and v.outcome not in (NOT_RUN, NOT_TESTABLE) for _, v in theirs):
                continue
            first = by_run.get(label, {}).get(f.id)
            for name, v in [(first_name, first), *((c.model.slug, v) for c, v in theirs)]:
                if v is None:
                    continue
                mark = f" ({DISAGREE})" if v is not first and disagree(first, v) else ""
                rows.append(f"| `{f.id}` | {label} | {name} | {cell(effect_cell(v))} | "
                            f"{cell(_power(v))} | **{outcome_text(v)}**{mark} |")
    if not rows:
        return []
    return ["Each model on its own kept runs (power from its own pilot):", "",
            "| finding | run | model | effect [95% CI] | power (80%) | verdict |", "|---|---|---|---|---|---|",
            *rows, ""]


def _power(v) -> str:
    return describe(v.power, v.finding.sesoi, v.finding.kind) if v.power else "-"


def introduce(columns: list) -> list:
    """The report's header lines naming each other model."""
    out = []
    for c in columns:
        identity = c.model.identity or {}
        pilot = f"`{models.MODELS_DIR}/{c.model.slug}/{models.PILOT_FILE}`"
        power = f"power from its own pilot ({pilot})" if c.has_pilot else \
            f"power not yet computed for this model: it has no pilot of its own ({pilot})"
        out += [f"Beside it: model **{c.model.slug}** (`{identity.get('path', c.model.name)}`, hash "
                f"{identity.get('hash', '?')[:12]}, {c.ctx.n} layers; {power}): its column in each table, its runs "
                f"under [other models](#other-models). {counts_line(c.counts)}", ""]
    return out


def section(columns: list, report_dir: Path) -> list:
    """Each other model's kept runs: trials, sittings, budgets and learning curves."""
    if not columns:
        return []
    lines = ["## Other models", ""]
    for c in columns:
        folder = f"results/{models.MODELS_DIR}/{c.model.slug}/"
        lines += [f"### {c.model.slug}", "", f"`{c.model.name}`, {c.ctx.n} layers, kept in `{folder}`.", ""]
        for e in experiments.EXPERIMENTS.values():
            for label, by_experiment in c.runs.items():
                if e.name in by_experiment:
                    lines += [f"{e.name}:", "", *curves.run_lines(report_dir, e, label, by_experiment[e.name],
                                                                 folder, f"{c.model.slug}-")]
    return lines


def readme_lines(columns: list) -> list:
    """The README block's line per other model, after the first model's."""
    return [f"Model `{c.model.slug}`: {counts_line(c.counts)}" for c in columns]


def entries(label: str, finding_id: str, first, first_entry: dict, first_name: str, columns: list) -> list:
    """report.json's per-model entries of a line: the first model's (its core fields: the line's own fields are
    its whole record), then each other's on the same run, whole."""
    out = []
    for c in columns:
        v = c.by_run.get(label, {}).get(finding_id)
        if v is None:
            continue
        disclosed, sentence = c.explained[label][finding_id]
        line = record(v, first_entry["protocol"], disclosed, sentence)
        out.append({"model": c.model.name, "slug": c.model.slug, "first_model": False,
                    "models_disagree": disagree(first, v), **{k: line[k] for k in ENTRY_KEYS}})
    return [{"model": first_name, "slug": None, "first_model": True,
             "models_disagree": any(x["models_disagree"] for x in out), **{k: first_entry[k] for k in FIRST_KEYS}},
            *out]


def summary(first_name: str, ctx, counts: dict, columns: list) -> list:
    """report.json's `models`: each model, its depth, whether it has its own pilot, its counts."""
    return [{"model": first_name, "slug": None, "layers": ctx.n, "pilot": True, "counts_first_run": counts},
            *({"model": c.model.name, "slug": c.model.slug, "identity": c.model.identity, "layers": c.ctx.n,
               "pilot": c.has_pilot, "counts_first_run": c.counts} for c in columns)]

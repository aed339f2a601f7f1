"""Other models beside the first: each judged on its own kept runs (RESULTS/models/SLUG, models.py) with the same
declarations, its power from its own pilot and its own null baseline, shown beside the first model's verdict on
every line (the front page's column, each finding's rows, report.json's `models`, a README counts line).

Two models disagree on a line when both decide it and their verdicts differ; an undecided verdict is no evidence
either way. No model is named the one the paper resembles: each is introduced by what was measured of it (its
held-out masked accuracy and its pretraining's measured gain over random weights, read from the pretraining
record of its weights in docs/pretraining-results/).
"""
import csv
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import experiments, front, kept, models, null_baseline
from .follow_ups import FIRST
from .judging import counts_line, counts_of, explain, verdicts
from .lines import fmt, record
from .power import NOT_COMPUTED
from .verdicts import NOT_REPRODUCED, REPRODUCED

DECIDED = (REPRODUCED, NOT_REPRODUCED)
FIRST_KEYS = ("run", "effect", "interval", "n", "verdict", "verdict_text")   # the line's own fields have the rest
ENTRY_KEYS = (*FIRST_KEYS, "protocol", "rows", "power", "decides", "disclosure")


@dataclass
class Column:
    """One model's verdicts on its own kept runs: the first model's (`model` None: `ctx` names it) or another's."""
    ctx: experiments.Context
    runs: dict
    by_run: dict                # {run label: {finding id: Verdict}}
    model: Optional[models.Model] = None
    null: Optional[dict] = None   # the null baseline its ratio lines read (null_baseline.load)
    has_pilot: bool = True

    def __post_init__(self):
        self.explained = explain(self.runs, self.by_run)   # {run label: {finding id: (disclosure, what decides it)}}
        self.counts, self.holm = counts_of(self.by_run), front.holm(self.by_run.get(FIRST, {}))
        self.name = self.model.slug if self.model else self.ctx.model


def column(model: Optional[models.Model], root: Path, ctx, null_file: str) -> Column:
    """A model's column: its kept runs judged at its own depth, with its own pilot (power) and null baseline (the
    first model's, `model` None: at the results folder's root with the declared pilot)."""
    folder = model.results(root) if model else Path(root)
    runs = kept.load(folder)
    null = null_baseline.load(folder / null_file)
    if model is None:
        return Column(ctx, runs, verdicts(runs, ctx, null), null=null)
    depths = kept.depths(runs) - {None}
    own = dataclasses.replace(ctx, n=depths.pop() if len(depths) == 1 else ctx.n, model=model.name)
    pilot = models.pilot(model, root)
    return Column(own, runs, verdicts(runs, own, null, pilot), model, has_pilot=pilot is not None)


def others(root: Path, ctx, null_file: str) -> list:
    """A Column per other model with kept results, in their slugs' order."""
    return [column(m, root, ctx, null_file) for m in models.others(root)]


def disagree(first, other) -> bool:
    return first is not None and other is not None and first.outcome in DECIDED and other.outcome in DECIDED \
        and first.outcome != other.outcome


PRETRAINING = Path(__file__).resolve().parents[2] / "docs" / "pretraining-results"


def credentials(model: models.Model) -> str:
    """What was measured of a pretrained model: its held-out masked accuracy and, per data fraction, its SST gain
    over the same network untrained, paired by seed, from the pretraining record of its weights
    (docs/pretraining-results/*/summary.csv names each rung by its weights' hash; ladder.json holds the accuracy)."""
    weights = (model.identity or {}).get("weights_sha256", "")[:12]
    for summary in sorted(PRETRAINING.glob("*/summary.csv")) if weights else ():
        with open(summary, newline="", encoding="utf-8") as handle:
            rows = [r for r in csv.DictReader(handle) if f"weights={weights}" in r["config"]
                    and r["metric"] == "dev/sst" and r["change_mean"]]
        if rows:
            ladder = json.loads((summary.parent / "ladder.json").read_text(encoding="utf-8"))
            tokens = int(rows[0]["config"].split("tokens=")[1].split(",")[0])   # the rung whose weights match
            rung = next(r for r in ladder["rungs"].values() if r["tokens"] == tokens and "held_out" in r)
            accuracy = rung["held_out"]["masked_accuracy"]
            gains = "; ".join(f"{float(r['change_mean']):+.3f} [{float(r['change_ci95_low']):+.3f}, "
                              f"{float(r['change_ci95_high']):+.3f}] at fraction {float(r['data_fraction']):g} (n = "
                              f"{r['change_n']})" for r in rows)
            where = summary.parent.relative_to(PRETRAINING.parents[1])
            return (f"held-out masked-token accuracy {accuracy:.3f}; its pretraining's SST gain over the same network "
                    f"untrained, paired by seed: {gains} (`{where}/`)")
    return "no pretraining record of its weights in docs/pretraining-results/: nothing measured of its pretraining"


def introduce(columns: list) -> list:
    """The front page's lines naming each other model by what was measured of it."""
    out = []
    for c in columns:
        identity = c.model.identity or {}
        scarce = c.by_run.get("first", {}).get("singh-scarce")
        row = scarce.rows[0].estimate if scarce and scarce.rows and scarce.rows[0].estimate else None
        gain = f"; here, pretrained minus every layer re-drawn on 256 SST sentences: {fmt(row)}" if row else ""
        pilot = "power from its own pilot" if c.has_pilot else f"{NOT_COMPUTED}: it has no pilot of its own"
        out += [f"Beside it: model **{c.model.slug}** (`{identity.get('path', c.model.name)}`, {c.ctx.n} layers, "
                f"masked-LM pretraining on the course's text; {credentials(c.model)}{gain}; {pilot}). "
                f"Neither model is BERT: each line's page says what the embedded model can carry.", ""]
    return out


def readme_lines(columns: list) -> list:
    """The README block's line per other model, after the first model's."""
    return [f"Model `{c.model.slug}`: {counts_line(c.counts)}" for c in columns]


def _entry(c: Column, label: str, v, protocol: int, keys=None) -> dict:
    """A line's record (lines.record) on model `c` (only `keys` of it where given), and what the front page shows of
    it: its device, whether it is fragile, and (a first run's) Holm."""
    line = record(v, protocol, *c.explained[label][v.finding.id])
    p, adjusted, verdict = c.holm.get(v.finding.id, (None,) * 3) if label == FIRST else (None,) * 3
    return {**({k: line[k] for k in keys} if keys else line), "headline": label == FIRST,
            "device": front.device(c.runs, v), "fragile": front.fragile(v),
            "holm": {"p": p, "p_adjusted": adjusted, "verdict": verdict} if verdict else None}


def entries(label: str, v, columns: list, protocol: int) -> tuple:
    """report.json's line on the first model (its whole record) and the line's per-model entries: the first
    model's core fields, then each other's entry on the same run."""
    first, fid = columns[0], v.finding.id
    out = [{"model": c.model.name, "slug": c.name, "first_model": False, "models_disagree": disagree(v, w),
            **_entry(c, label, w, protocol, ENTRY_KEYS)}
           for c in columns[1:] for w in [c.by_run.get(label, {}).get(fid)] if w is not None]
    return _entry(first, label, v, protocol), [
        {"model": first.name, "slug": None, "first_model": True, "models_disagree": any(x["models_disagree"]
                                                                                       for x in out),
         **_entry(first, label, v, protocol, FIRST_KEYS)}, *out]


def summary(columns: list) -> list:
    """report.json's `models`: each model, its depth, whether it has its own pilot, its counts."""
    return [{"model": c.model.name if c.model else c.name, "slug": c.model and c.name, "layers": c.ctx.n,
             "pilot": c.has_pilot, "counts_first_run": c.counts, **({"identity": c.model.identity} if c.model else {})}
            for c in columns]

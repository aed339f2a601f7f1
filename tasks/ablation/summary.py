"""What a sweep's finished trials add up to: intervals over seeds, summary.csv, the plots and their TensorBoard run.

`sweep` here is a `sweep.Sweep`: its folder, mode, fingerprint, tasks and
study (whose `reference` names the configuration each one is compared with,
`pools` the means over configurations, and `figures` draws the plots).

summary.csv has one row per configuration (or pool), data fraction and metric:
the final evaluation's mean and 95% interval over seeds (`statistics.py` says
which values are the units), the best evaluation's beside it (best_*), and the
paired change from the study's reference configuration at the same seeds
(change_*); dynamics' fine-tuning rows are compared with the seed-vs-seed floor (the change minus two seeds'
difference, its interval over the seeds, `statistics.floor_difference`).

`learning_curves` draws each trial's held-out score against its steps (the plateau rule's curve, `plateau.py`):
whether the budget took the trials to their plateau; the reproduction's report draws it for each kept run.
"""
import csv
import io
import math
from pathlib import Path

import numpy as np

from ..fileio import atomic_write_bytes, atomic_write_text, safe_join
from .drawing import legend, new_figure, png_bytes
from .line import BEST, FAILED  # BEST: summarised beside the final evaluation (dev/), not as its own rows
from .statistics import change, estimate, pooled_interval, unit_of

SUMMARY = "summary.csv"
SUMMARY_COLUMNS = ("mode", "config", "data_fraction", "metric", "n", "mean", "std", "ci95_low", "ci95_high",
                   "best_mean", "best_ci95_low", "best_ci95_high",
                   "reference", "change_n", "change_mean", "change_ci95_low", "change_ci95_high")


def finished(records: list, mode: str, fp: str) -> list:
    """This sweep's successful trials, one record per trial however many files hold it (the latest), so a
    trial run twice counts once in the intervals."""
    latest = {}
    for r in records:
        if r.ok and r.mode == mode and r.fingerprint == fp and \
                (r.key not in latest or r.finished_at >= latest[r.key].finished_at):
            latest[r.key] = r
    return list(latest.values())


def tally(sweep, trials: list, records: list, write: bool = True) -> bool:
    """Print how many of the sweep's trials are finished, missing and failed, over every results file, and
    write summary.csv and the plots; a shard (write=False) writes them only once the sweep is complete, so
    two shards finishing at once both write the same thing. Whether they were written."""
    keys = [t.key(sweep.fingerprint) for t in trials]
    # In plan order, not the results files' order, which workers and shards finishing in any order would
    # carry into summary.csv's rows.
    place = {key: i for i, key in enumerate(keys)}
    ok = sorted(finished(records, sweep.config.mode, sweep.fingerprint), key=lambda r: place.get(r.key, len(place)))
    ok_keys = {r.key for r in ok}
    failed_keys = {r.key for r in records if r.status == FAILED} - ok_keys
    n_ok, n_failed = sum(k in ok_keys for k in keys), sum(k in failed_keys for k in keys)
    print(f"sweep: {len(trials)} trials: {n_ok} finished, {len(trials) - n_ok - n_failed} missing, {n_failed} "
          f"failed", flush=True)
    if not write and n_ok < len(trials):
        return False
    study = sweep.study
    rows = summarise(ok, lambda params: study.reference(sweep, params), lambda params: study.pools(sweep, params))
    write_summary(sweep.out / SUMMARY, rows)
    written = write_plots(sweep, ok, rows, headline_metric(sweep.inputs.tasks))
    print(f"summary: {sweep.out / SUMMARY}; plots: {', '.join(written) or 'none'}", flush=True)
    return True


def headline_metric(tasks) -> str:
    """The metric a plot shows: the task's own for one task, the course's overall score for several."""
    return f"dev/{tasks[0]}" if len(tasks) == 1 else "dev/overall"


def _by_unit(members: list) -> dict:
    """metric -> {unit: value}: the unit is the trial's seed, or its pair of seeds for a seed-vs-seed trial."""
    values = {}
    for r in members:
        for name, value in r.metrics.items():
            values.setdefault(name, {})[unit_of(r)] = value
    return values


def summarise(records: list, reference=lambda params: None, pools=lambda params: {}) -> list:
    """One row per configuration group (and pool), data fraction and metric, over the seeds of `records` (finished
    trials' `TrialLine`s).

    `reference(params)`: the group a configuration is compared with, or None. `pools({group: params})`:
    {label: (params, [groups])}, the means over configurations to add.
    """
    sweeps = {}
    for r in records:
        sweeps.setdefault((r.mode, r.data_fraction), {}).setdefault(r.group, []).append(r)
    rows = []
    for (mode, fraction), groups in sweeps.items():
        values = {group: _by_unit(members) for group, members in groups.items()}
        params = {group: members[0].params for group, members in groups.items()}
        labelled = [(group, params[group], [group]) for group in groups]
        labelled += [(label, p, members) for label, (p, members) in pools(params).items()]
        for label, p, members in labelled:
            ref = reference(p)
            rows += _rows(dict(mode=mode, config=label, data_fraction=fraction), p, [values[m] for m in members],
                          ref, values.get(ref))
    return rows


def _rows(where: dict, params: dict, members: list, ref, ref_values) -> list:
    """A configuration's (one member) or a pool's rows, one per metric."""
    rows = []
    for metric in members[0]:
        if metric.startswith(BEST):
            continue
        values = [m[metric] for m in members if metric in m]
        row = {**dict.fromkeys(SUMMARY_COLUMNS), **where, "metric": metric, **_interval(values), "params": params}
        best_metric = BEST + metric.split("/", 1)[1] if metric.startswith("dev/") else None
        best = [m[best_metric] for m in members if best_metric in m]
        if best:
            stats = _interval(best)
            row.update(best_mean=stats["mean"], best_ci95_low=stats["ci95_low"], best_ci95_high=stats["ci95_high"])
        paired = change(values, ref_values[metric]) if metric in (ref_values or {}) else None
        if paired is not None:
            row.update(reference=ref, change_n=paired["n"], change_mean=paired["mean"],
                       change_ci95_low=paired["ci95_low"], change_ci95_high=paired["ci95_high"])
        rows.append(row)
    return rows


def _interval(members: list) -> dict:
    """One configuration's values over its seeds (or seed pairs), or a pool's over its configurations."""
    return pooled_interval(members) if len(members) > 1 else estimate(members[0])


def write_summary(path: Path, rows: list):
    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\n")
    out.writerow(SUMMARY_COLUMNS)
    for row in rows:
        cells = [row[c] for c in SUMMARY_COLUMNS]
        out.writerow(["" if v is None else round(v, 6) if isinstance(v, float) else v for v in cells])
    atomic_write_text(path, buffer.getvalue())


def write_plots(sweep, records: list, rows: list, metric: str) -> list:
    """The study's figures as PNG files in plots/, and as images in TensorBoard (run 'summary')."""
    figures = {name: fig for name, fig in sweep.study.figures(sweep, records, rows, metric).items()
               if fig is not None}
    if not figures:
        return []
    from torch.utils.tensorboard import SummaryWriter

    written = []
    writer = SummaryWriter(str(safe_join(sweep.out, "tensorboard", "summary")))
    try:
        for name, fig in figures.items():
            path = safe_join(sweep.out, "plots", f"{name}.png")
            atomic_write_bytes(path, png_bytes(fig))
            writer.add_figure(f"ablation/{name}", fig, global_step=len(records))
            written.append(str(path))
    finally:
        writer.close()
    return written


MAX_COLOURED_GROUPS = 10  # beyond this many configurations a legend is unreadable: every trial is drawn grey


def learning_curves(sweeps: dict):
    """Each sweep's trials as held-out score against steps, a dot where each stopped: whether the budget took the
    trials to their plateau. Held-out rows are a share of the trial's own training data, never dev. `sweeps` maps
    a sweep's name to its trials' results lines (`TrialLine`); None when no trial kept a held-out curve."""
    panels = {}
    for name, records in sweeps.items():  # one panel per sweep and data fraction: their held-out sets differ
        trials = [t for t in records if t.heldout_curve]
        fractions = sorted({t.data_fraction for t in trials})
        for fraction in fractions:
            title = name if len(fractions) == 1 else f"{name}, fraction {fraction:g}"
            panels[title] = [t for t in trials if t.data_fraction == fraction]
    if not panels:
        return None
    columns = min(3, len(panels))
    rows_of_panels = math.ceil(len(panels) / columns)
    fig = new_figure(figsize=(5.0 * columns, 3.4 * rows_of_panels))
    axes = np.atleast_1d(fig.subplots(rows_of_panels, columns)).ravel()
    for ax, (name, trials) in zip(axes, sorted(panels.items())):
        _curves_panel(ax, name, trials)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Learning curves on each trial's held-out training rows (a dot: where the trial stopped)",
                 fontsize=10)
    return fig


def _curves_panel(ax, name: str, trials: list) -> None:
    """One sweep's (and fraction's) held-out curves, one colour per arm while there are few."""
    arms = sorted({t.group for t in trials})
    coloured = len(arms) <= MAX_COLOURED_GROUPS
    labelled = set()
    for t in sorted(trials, key=lambda t: (t.group, t.seed)):
        colour = f"C{arms.index(t.group) % 10}" if coloured else "0.5"
        label = t.group if coloured and t.group not in labelled else None
        labelled.add(t.group)
        steps, scores = [p["step"] for p in t.heldout_curve], [p["score"] for p in t.heldout_curve]
        ax.plot(steps, scores, color=colour, linewidth=0.8, alpha=0.7, label=label)
        ax.plot(steps[-1:], scores[-1:], "o", color=colour, markersize=3)
    held_out = {task: rows for t in trials if t.plateau for task, rows in t.plateau.holdout_rows.items()}
    ax.set_title(f"{name}: {len(trials)} trials" + (", held-out rows " + ", ".join(
        f"{task} {rows}" for task, rows in sorted(held_out.items())) if held_out else ""), fontsize=9)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("held-out training rows: score")
    if coloured:
        legend(ax)

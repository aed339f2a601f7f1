"""What a sweep's finished trials add up to: intervals over seeds, summary.csv, the plots and their TensorBoard run.

`sweep` here is a `sweep.Sweep`: its folder, mode, fingerprint, tasks and
study (whose `figures` draws the plots).
"""
import csv
import io
import math
from pathlib import Path

import numpy as np

from ..fileio import atomic_write_bytes, atomic_write_text, safe_join

SUMMARY = "summary.csv"
SUMMARY_COLUMNS = ("mode", "config", "data_fraction", "metric", "n", "mean", "std", "ci95_low", "ci95_high")


def finished(records: list, mode: str, fp: str) -> list:
    """This sweep's successful trials, one record per trial however many files hold it (the latest), so a
    trial run twice counts once in the intervals."""
    latest = {}
    for r in records:
        if r.get("status") == "ok" and r.get("mode") == mode and r.get("fingerprint") == fp and \
                r.get("finished_at", "") >= latest.get(r["key"], {}).get("finished_at", ""):
            latest[r["key"]] = r
    return list(latest.values())


def report(sweep, trials: list, records: list, write: bool = True) -> bool:
    """Print how many of the sweep's trials are finished, missing and failed, over every results file, and
    write summary.csv and the plots; a shard (write=False) writes them only once the sweep is complete, so
    two shards finishing at once both write the same thing. Whether they were written."""
    ok = finished(records, sweep.args.mode, sweep.fingerprint)
    ok_keys = {r["key"] for r in ok}
    failed_keys = {r["key"] for r in records if r.get("status") == "failed"} - ok_keys
    keys = [t.key(sweep.fingerprint) for t in trials]
    n_ok, n_failed = sum(k in ok_keys for k in keys), sum(k in failed_keys for k in keys)
    print(f"sweep: {len(trials)} trials: {n_ok} finished, {len(trials) - n_ok - n_failed} missing, {n_failed} "
          f"failed", flush=True)
    if not write and n_ok < len(trials):
        return False
    rows = summarise(ok)
    write_summary(sweep.out / SUMMARY, rows)
    written = write_plots(sweep, ok, rows, headline_metric(sweep.inputs.tasks))
    print(f"summary: {sweep.out / SUMMARY}; plots: {', '.join(written) or 'none'}", flush=True)
    return True


def headline_metric(tasks) -> str:
    """The metric a plot shows: the task's own for one task, the course's overall score for several."""
    return f"dev/{tasks[0]}" if len(tasks) == 1 else "dev/overall"


def trial_metrics(record: dict) -> dict:
    """Every number a trial measured: dev metrics as dev/<task>, per-layer curves as <curve>/<layer>."""
    out = {f"dev/{k}": v for k, v in (record.get("dev") or {}).items() if v is not None}
    for name, values in (record.get("curves") or {}).items():
        out.update({f"{name}/{i}": v for i, v in enumerate(values)})
    return out


def interval(values) -> dict:
    """Mean, sample std and 95% t-interval of the mean; no spread from a single value."""
    from scipy import stats
    x = np.asarray(values, dtype=np.float64)
    n, mean = len(x), float(x.mean())
    if n < 2:
        return {"n": n, "mean": mean, "std": None, "ci95_low": None, "ci95_high": None}
    std = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}


def summarise(records: list) -> list:
    """One row per configuration group, data fraction and metric, over the seeds."""
    groups = {}
    for r in records:
        groups.setdefault((r["mode"], r["group"], r["data_fraction"]), []).append(r)
    rows = []
    for (mode, group, fraction), members in groups.items():
        values = {}
        for r in members:
            for name, value in trial_metrics(r).items():
                values.setdefault(name, []).append(value)
        rows += [{"mode": mode, "config": group, "data_fraction": fraction, "metric": name, **interval(v),
                  "params": members[0]["params"]} for name, v in values.items()]
    return rows


def write_summary(path: Path, rows: list):
    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\n")
    out.writerow(SUMMARY_COLUMNS)
    for row in rows:
        out.writerow(["" if row[c] is None else round(row[c], 6) if isinstance(row[c], float) else row[c]
                      for c in SUMMARY_COLUMNS])
    atomic_write_text(path, buffer.getvalue())


def write_plots(sweep, records: list, rows: list, metric: str) -> list:
    """The study's figures as PNG files in plots/, and as images in TensorBoard (run 'summary')."""
    figures = {name: fig for name, fig in sweep.study.figures(sweep, records, rows, metric).items()
               if fig is not None}
    if not figures:
        return []
    from torch.utils.tensorboard import SummaryWriter
    from ..plots import png_bytes
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

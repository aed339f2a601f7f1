"""Each kept run's budget and learning curves, as the report shows them under its experiment: how the trials'
budget ended (a plateau of held-out training rows, or the cap), the plateau rule's warning where a held-out set is
too small for it, and every trial's held-out score against steps, drawn from the kept results."""
import math
from pathlib import Path

import numpy as np

from ..ablation.drawing import legend, new_figure, png_bytes
from ..ablation.plateau import coarse_holdout
from ..ablation.summary import Trial
from ..fileio import atomic_write_bytes


def figure_path(report_dir: Path, name: str, label: str, plot: str) -> Path:
    """Where a run's plot lies beside the report: figures/[SLUG-]EXPERIMENT-RUN-PLOT.png (`name` the experiment's,
    after a second model's slug and -)."""
    return Path(report_dir) / "figures" / f"{name}-{label}-{plot}.png"


def figure_links(report_dir: Path, experiment, label: str, prefix: str = "") -> list:
    """The sweeps' plots copied beside the report (`sweeps.copy_figures`; `prefix` a second model's slug and -)."""
    name = prefix + experiment.name
    return [f"![{name} ({label}): {plot}](figures/{path.name})" for _, plot in experiment.figures
            if (path := figure_path(report_dir, name, label, plot)).exists()]


def run_lines(report_dir: Path, experiment, label: str, kept_run: tuple, folder: str, prefix: str = "") -> list:
    """A kept run under its experiment: trials, seeds, folder, device and wall time, its budget and curves."""
    run, sweeps = kept_run
    trials = sum(len(r) for r in sweeps.values())
    where = f"trained on {run.device or 'an unrecorded device'}" + (f" from weights {run.weights}" if run.weights
                                                                     else "")
    short = unfinished(run, sweeps)
    missing = f" **Unfinished**: {'; '.join(short)}; its lines read the seeds it has." if short else ""
    return [f"Run `{label}`: {trials} trials, seeds {run.seeds}, in `{folder}{experiment.name}/{label}/`, {where}, "
            f"{run.wall_minutes:.1f} min wall.{missing}", "", budget_line(sweeps), "",
            *learning_curve_link(report_dir, f"{prefix}{experiment.name}", label, sweeps),
            *figure_links(report_dir, experiment, label, prefix), ""]


def unfinished(run, sweeps: dict) -> list:
    """'SWEEP ARM: seeds [...] of N' for each arm of a kept run (kept.KeptRun) that lacks some of the run's seeds
    (a comparison of seed pairs has one fewer), 'SWEEP: no trials' for a sweep with none: a run cut short."""
    out = []
    for label, records in sweeps.items():
        arms = {}
        for t in map(Trial.of, records):
            arms.setdefault((t.arm, t.pairs), set()).add(t.seed)
        out += [f"{label} {arm or 'all'}: seeds {sorted(got)} of {len(run.seeds)}"
                for (arm, pairs), got in arms.items() if len(got) < len(run.seeds) - pairs]
        out += [] if records else [f"{label}: no trials"]
    return out


def budget_line(sweeps: dict) -> str:
    """How the trials' budget ended: on a plateau of held-out training rows, or at the cap (a trial that hit the
    cap may not have converged, and its verdict then partly measures convergence speed)."""
    trials = [Trial.of(r) for rs in sweeps.values() for r in rs if r.get("steps") is not None]
    if not trials:
        return "Budget: no trained trials."
    probes = [t for t in trials if t.mode == "probe"]
    if probes and len(probes) == len(trials):
        converged = sum(bool(t.info.get("converged")) for t in probes)
        return (f"Budget: no fine-tuning steps: linear probes on frozen layers, {converged} of {len(probes)} "
                f"converged (penalty chosen on held-out training rows).")
    steps = sorted(t.steps for t in trials)
    stopped = sum(bool(t.plateau.get("stopped")) for t in trials)
    told = f"{stopped} of {len(trials)} stopped on a held-out plateau, {len(trials) - stopped} at the cap" \
        if any(t.plateau for t in trials) else "a fixed step budget (no plateau stopping in these results)"
    notes = sorted({coarse_holdout(t.plateau.get("metric", ""), sum(t.plateau.get("holdout_rows", {}).values()),
                                   t.plateau.get("tolerance") or 0) or "" for t in trials} - {""})
    return (f"Budget: steps trained {steps[0]}-{steps[-1]} (median {steps[len(steps) // 2]}); {told}."
            + "".join(f" Warning: {note}; the learning curves show it." for note in notes))


MAX_COLOURED_GROUPS = 10  # beyond this many configurations a legend is unreadable: every trial is drawn grey


def learning_curves(sweeps: dict):
    """Each sweep's trials as held-out score against steps, a dot where each stopped: whether the budget took the
    trials to their plateau. Held-out rows are a share of the trial's own training data, never dev. `sweeps` maps
    a sweep's name to its trial records (`results.jsonl` rows); None when no trial kept a held-out curve."""
    panels = {}
    for name, records in sweeps.items():  # one panel per sweep and data fraction: their held-out sets differ
        trials = [t for t in map(Trial.of, records) if t.heldout_curve]
        fractions = sorted({t.fraction for t in trials})
        for fraction in fractions:
            title = name if len(fractions) == 1 else f"{name}, fraction {fraction:g}"
            panels[title] = [t for t in trials if t.fraction == fraction]
    if not panels:
        return None
    columns = min(3, len(panels))
    rows_of_panels = math.ceil(len(panels) / columns)
    fig = new_figure(figsize=(5.0 * columns, 3.4 * rows_of_panels))
    axes = np.atleast_1d(fig.subplots(rows_of_panels, columns)).ravel()
    for ax, (name, trials) in zip(axes, sorted(panels.items())):
        arms = sorted({t.arm for t in trials})
        coloured = len(arms) <= MAX_COLOURED_GROUPS
        labelled = set()
        for t in sorted(trials, key=lambda t: (t.arm, t.seed)):
            colour = f"C{arms.index(t.arm) % 10}" if coloured else "0.5"
            label = t.arm if coloured and t.arm not in labelled else None
            labelled.add(t.arm)
            steps, scores = [p["step"] for p in t.heldout_curve], [p["score"] for p in t.heldout_curve]
            ax.plot(steps, scores, color=colour, linewidth=0.8, alpha=0.7, label=label)
            ax.plot(steps[-1:], scores[-1:], "o", color=colour, markersize=3)
        held_out = {task: rows for t in trials for task, rows in t.plateau.get("holdout_rows", {}).items()}
        ax.set_title(f"{name}: {len(trials)} trials" + (", held-out rows " + ", ".join(
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
    path = figure_path(report_dir, name, label, "learning-curves")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, png_bytes(fig))
    return [f"![{name} ({label}): learning curves on held-out training rows](figures/{path.name})"]

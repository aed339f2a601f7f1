"""Each kept run's budget and learning curves, as the report shows them under its experiment: how the trials'
budget ended (a plateau of held-out training rows, or the cap), the plateau rule's warning where a held-out set is
too small for it, and every trial's held-out score against steps, drawn from the kept results."""
from datetime import datetime, timezone
from pathlib import Path

from ..ablation.drawing import png_bytes
from ..ablation.plateau import coarse_holdout
from ..ablation.summary import learning_curves
from ..fileio import atomic_write_bytes
from .kept import busy_minutes, trial_spans


def figure_path(report_dir: Path, name: str, label: str, plot: str) -> Path:
    """Where a run's plot lies beside the report: figures/EXPERIMENT-RUN-PLOT.png (`name` the experiment's)."""
    return Path(report_dir) / "figures" / f"{name}-{label}-{plot}.png"


def run_lines(report_dir: Path, experiment, label: str, kept_run: tuple, folder: str) -> list:
    """A kept run under its experiment: trials, seeds, folder, device and wall time, its budget and curves, and the
    sweeps' plots copied beside the report (`sweeps.copy_figures`)."""
    run, sweeps = kept_run
    where = f"on {run.device or 'an unrecorded device'}" + (f" from weights {run.weights}" if run.weights else "")
    short = unfinished(run, sweeps)
    missing = f" **Unfinished**: {'; '.join(short)}; its lines read the seeds it has." if short else ""
    name = experiment.name
    return [f"Run `{label}`: {sum(map(len, sweeps.values()))} trials, seeds {run.seeds}, in `{folder}{name}/{label}/`, "
            f"trained {where}, {run.wall_minutes:.1f} min wall{busy_note(run, sweeps)}.{missing}", "",
            budget_line(sweeps), "",
            *learning_curve_link(report_dir, name, label, sweeps),
            *(f"![{name} ({label}): {plot}](figures/{path.name})" for _, plot in experiment.figures
              if (path := figure_path(report_dir, name, label, plot)).exists()), ""]


def busy_note(run, sweeps: dict) -> str:
    """Where its trials ran longer than its sittings' wall time (a sitting keeps an experiment's trials when
    it finishes, and a --gather sitting those its shards trained): the trials' own busy time and first day."""
    busy = busy_minutes(sweeps)
    if busy is None or busy <= run.wall_minutes + 1:
        return ""
    spans = trial_spans([r for found in sweeps.values() for r in found])
    began = datetime.fromtimestamp(min(start for start, _ in spans), timezone.utc)
    return (f" (its trials trained over {busy:.0f} min from {began:%Y-%m-%d %H:%M} UTC, some in sittings or "
            f"shards that kept nothing)")


def unfinished(run, sweeps: dict) -> list:
    """'SWEEP ARM: seeds [...] of N' for each arm of a kept run (kept.KeptRun) that lacks some of the run's seeds
    (a comparison of seed pairs has one fewer), 'SWEEP: no trials' for a sweep with none: a run cut short."""
    out = []
    for label, records in sweeps.items():
        arms = {}
        for t in records:
            arms.setdefault((t.group, t.pairs), set()).add(t.seed)
        out += [f"{label} {arm or 'all'}: seeds {sorted(got)} of {len(run.seeds)}"
                for (arm, pairs), got in arms.items() if len(got) < len(run.seeds) - pairs]
        out += [] if records else [f"{label}: no trials"]
    return out


def budget_line(sweeps: dict) -> str:
    """How the trials' budget ended: on a plateau of held-out training rows, or at the cap (a trial that hit the
    cap may not have converged, and its verdict then partly measures convergence speed)."""
    trials = [r for rs in sweeps.values() for r in rs if r.steps is not None]
    if not trials:
        return "Budget: no trained trials."
    probes = [t for t in trials if t.mode == "probe"]
    if probes and len(probes) == len(trials):
        converged = sum(bool(t.info.get("converged")) for t in probes)
        return (f"Budget: no fine-tuning steps: linear probes on frozen layers, {converged} of {len(probes)} "
                f"converged (penalty chosen on held-out training rows).")
    steps = sorted(t.steps for t in trials)
    stopped = sum(bool(t.plateau and t.plateau.stopped) for t in trials)
    told = f"{stopped} of {len(trials)} stopped on a held-out plateau, {len(trials) - stopped} at the cap" \
        if any(t.plateau for t in trials) else "a fixed step budget (no plateau stopping in these results)"
    notes = sorted({coarse_holdout(t.plateau.metric, sum(t.plateau.holdout_rows.values()), t.plateau.tolerance)
                    or "" for t in trials if t.plateau} - {""})
    return (f"Budget: steps trained {steps[0]}-{steps[-1]} (median {steps[len(steps) // 2]}); {told}."
            + "".join(f" Warning: {note}; the learning curves show it." for note in notes))


def learning_curve_link(report_dir: Path, name: str, label: str, sweeps: dict) -> list:
    """Draw the run's learning curves from its kept results (so `--report-only` draws them too) and link them."""
    fig = learning_curves(sweeps)
    if fig is None:
        return []
    path = figure_path(report_dir, name, label, "learning-curves")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, png_bytes(fig))
    return [f"![{name} ({label}): learning curves on held-out training rows](figures/{path.name})"]

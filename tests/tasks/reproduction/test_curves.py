"""curves.py: each kept run's budget line and learning curves, and a run kept unfinished said on its
experiment and its lines."""
import json
from dataclasses import replace

from tasks.ablation.line import Budget, PlateauAccount
from tasks.reproduction import curves
from tasks.reproduction import kept as reproduction_runs
from tasks.reproduction import report as reproduction_report
from tests.helpers.lines import trial_line
from tests.helpers.reproduction import CTX, LARGE, SMALL, finding_rows, kept_run, record, reinit, sitting


def _trial(group, rows, curve, fraction=0.03, metric="sst"):
    steps = curve[-1][0]
    plateau = PlateauAccount(3, 0.005, 0.1, 500, metric, True, steps, max(v for _, v in curve), None,
                             {metric: 10 * rows}, {metric: rows})
    budget = Budget(1000, 10, 100, 40, steps, [], plateau, [{"step": s, "score": v} for s, v in curve])
    return trial_line(group, 0, fraction=fraction, steps=steps, budget=budget)


def test_the_budget_shows_learning_curves_and_flags_a_held_out_set_too_small_to_decide_a_plateau(tmp_path):
    curve = [(40, 0.30), (80, 0.42), (120, 0.38), (160, 0.42)]
    small = {"reinit": [_trial("from=0", 26, curve), _trial("from=6", 26, curve)]}
    large = {"reinit": [_trial("from=0", 400, curve, fraction=0.25)]}
    pearson = {"sts": [_trial("from=6", 26, curve, metric="sts")]}   # a correlation moves by no one sentence
    line = curves.budget_line(small)
    assert "Warning: sst: 26 held-out rows, so one sentence is 0.038 of accuracy" in line
    assert "Warning" not in curves.budget_line(large)
    assert "Warning" not in curves.budget_line(pearson)
    links = curves.learning_curve_link(tmp_path, "reinit-small", "first", small)
    assert links == ["![reinit-small (first): learning curves on held-out training rows]"
                     "(figures/reinit-small-first-learning-curves.png)"]
    assert (tmp_path / "figures" / "reinit-small-first-learning-curves.png").read_bytes()[:4] == b"\x89PNG"
    no_curves = {"reinit": [replace(_trial("from=0", 26, curve), budget=None)]}
    assert curves.learning_curve_link(tmp_path, "x", "first", no_curves) == []


def test_a_probe_experiments_budget_says_probes_not_steps():
    probes = {"probe": [replace(record("layer=0,pooling=mean", s, 0.03, info={"converged": s == 0},
                                       mode="probe"),
                               steps=0) for s in range(2)]}
    line = curves.budget_line(probes)
    assert "linear probes on frozen layers, 1 of 2 converged" in line and "steps trained" not in line


def test_a_run_kept_unfinished_says_so_on_its_experiment_and_its_lines(tmp_path):
    rows = reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)
    cut = [r for r in rows[SMALL] if not (r.group == "from=3" and r.seed >= 3)]   # one arm lacks seeds 3, 4
    reproduction_runs.store(tmp_path / "results", kept_run("reinit-small", "first", range(5)),
                            {"reinit": cut},
                            sitting())
    meta, sweeps = reproduction_runs.load(tmp_path / "results")["first"]["reinit-small"]
    # a sweep never started
    assert curves.unfinished(meta, {**sweeps, "other": []})[-1] == "other: no trials"
    reproduction_runs.store(tmp_path / "results", kept_run("reinit-large", "first", range(5)),
                            {"reinit": rows[LARGE]},
                            sitting())
    reproduction_report.write(tmp_path / "results", tmp_path / "report.md", CTX)
    assert "**Unfinished**: reinit from=3: seeds [0, 1, 2] of 5" in (tmp_path / "runs.md").read_text()
    scarce = finding_rows(tmp_path, "singh-scarce")[0]
    assert "its run is unfinished" in scarce      # singh-scarce reads reinit-small
    data = json.loads((tmp_path / "report.json").read_text())
    assert {e["finding"]: e["unfinished_run"] for e in data["lines"]}["singh-scarce"] is True


def test_a_run_whose_trials_outlasted_its_sittings_says_when_they_trained():
    """Two trials of 5 minutes an hour apart, kept by a sitting of 1 minute (the earlier one kept nothing)."""
    trials = [trial_line("from=0", s, finished_at=end, wall_time_s=300.0)
              for s, end in ((0, "2026-11-25T10:05:00Z"), (1, "2026-11-25T11:05:00Z"))]
    run = replace(kept_run("reinit-small", "first", range(2)), sittings=[sitting(wall_time_s=60.0)])
    said = curves.busy_note(run, {"reinit": trials})
    assert said.startswith(" (its trials trained over 10 min from 2026-11-25 10:00 UTC, some in sittings")
    assert curves.busy_note(replace(run, sittings=[sitting(wall_time_s=600.0)]), {"reinit": trials}) == ""
    assert curves.busy_note(run, {"reinit": [replace(trials[0], finished_at="")]}) == ""
    # what --plan says a run took: the trials' 10 busy minutes, not the keeping sitting's 1 nor their span
    held = reproduction_runs.Kept
    assert held(run, {"reinit": trials}).minutes() == 10.0
    assert held(replace(run, sittings=[sitting(wall_time_s=900.0)]), {"reinit": trials}).minutes() == 15.0
    assert held(run, {"reinit": [replace(trials[0], wall_time_s=None)]}).minutes() == 1.0

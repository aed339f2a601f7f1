"""The planner's seconds a step: read from the kept runs' own trial records at plan and report time."""
import json
from dataclasses import replace

import pytest

import reproduce
from tasks.reproduction import experiments, follow_ups, kept, plan, sweeps
from tests.helpers import run_cli
from tests.helpers.lines import trial_line
from tests.helpers.reproduction import CTX, SMALL, kept_run, reinit, sitting


def _trial(finished: str, wall: float, steps: int, device: str = "cpu", **info):
    return trial_line("from=3", 0, fraction=0.25, steps=steps, finished_at=finished, wall_time_s=wall, device=device,
                      info=info)


def test_a_runs_rate_is_its_span_over_its_trials_steps():
    """Two trials, the first from 10:00:00 to 10:01:40, the second ending 10:03:20: 200 s over
    100 + 2 x 150 steps (the second a transfer trial, both stages)."""
    records = [_trial("2026-11-25T10:01:40Z", 100.0, 100),
               _trial("2026-11-25T10:03:20Z", 50.0, 150, total_steps=300)]
    assert plan.run_rate(records) == ("cpu", pytest.approx(200 / 400))
    assert plan.run_rate([replace(records[0], device="cuda:0")]) == ("cuda", pytest.approx(1.0))
    other_kind = _trial("2026-11-25T10:04:00Z", 5.0, 10, device="cuda:0")
    assert plan.run_rate(records + [other_kind]) is None
    assert plan.run_rate([replace(records[0], finished_at="")]) is None
    assert plan.run_rate([_trial("2026-11-25T10:01:40Z", 100.0, 0)]) is None   # a probe trains no steps


def test_the_rate_is_the_median_over_a_folders_kept_runs_by_scale_and_device(tmp_path):
    for name, seconds in (("a", 20.0), ("b", 30.0), ("c", 90.0)):
        folder = tmp_path / "reinit-small" / name
        folder.mkdir(parents=True)
        run = kept.KeptRun("reinit-small", name, 1, "cpu", "minilm", {}, [0], 6, {"reinit": []}, device="cpu")
        kept.write_run(folder / "run.json", run)
        (folder / "reinit.jsonl").write_text(json.dumps(_trial("2026-11-25T10:01:40Z", seconds, 100).to_json()) + "\n")
    assert plan.seconds_per_step(tmp_path) == {("cpu", "cpu"): pytest.approx(0.3)}
    assert plan.seconds_per_step(tmp_path / "absent") == {}


def test_the_embedded_models_kept_runs_give_the_measured_rates():
    """docs/measurements/2026-11-28-reproduction-seconds-per-step.md: medians of 0.231 s a step over 30
    CPU runs, 0.014 s over 7 runs on an H200."""
    assert plan.seconds_per_step() == {("cpu", "cpu"): pytest.approx(0.231, abs=5e-4),
                                       ("cpu", "cuda"): pytest.approx(0.014, abs=5e-4)}


def test_the_plan_shows_what_a_kept_run_took_beside_its_estimate(tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    rows = [replace(r, device="cpu") for r in reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)[SMALL]]
    kept.store(results_dir, kept_run("reinit-small", "first", range(5)), {"reinit": rows[:20]}, sitting())
    kept.store(results_dir, kept_run("reinit-small", "first", range(5)), {"reinit": rows},
                            sitting(wall_time_s=30.0))   # a second sitting adds its time
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--plan loaded the model"))
    code, out, err = run_cli(reproduce.main, ["--plan", "--results", str(results_dir)])
    assert code == 0, err
    lines = {x.split(":")[0]: x for x in out.splitlines()}
    assert "first run took 1.5 min on cpu" in lines["reinit-small"]
    assert "took" not in lines["reinit-large"] and "--only reinit-large" in lines["reinit-large"]


def test_every_experiment_that_fine_tunes_has_an_estimate_on_each_measured_device():
    for e in experiments.EXPERIMENTS.values():
        for device in ("cpu", "cuda"):
            assert plan.experiment_minutes(e, CTX, device) > 0 or e.name == "probe", e.name
    assert plan.experiment_minutes(experiments.EXPERIMENTS["probe"], CTX) == 0       # probes train no steps
    paper = experiments.Context(12, experiments.SCALES["paper"], dict(experiments.ROLES))
    # no measured rate
    assert plan.experiment_minutes(experiments.EXPERIMENTS["reinit-small"], paper) is None


def test_a_cost_estimate_is_trials_x_steps_x_the_measured_seconds_a_step():
    """Seeds come from the experiment (or its scale) alone: the estimate lists the trials at those seeds; a
    follow-up's cap or epochs set its steps, a transfer trial trains two stages."""
    rate = plan.seconds_per_step()[("cpu", "cpu")]
    e = experiments.EXPERIMENTS["reinit-small"]
    trials = len(experiments.seeds_of(e, CTX.scale)) * (CTX.n + 1)
    assert plan.experiment_minutes(e, CTX) == pytest.approx(trials * CTX.scale.expected_steps * rate / 60)
    three = experiments.EXPERIMENTS["heads-top"]      # seeds=3: 3 x (12 heads + the unmodified model)
    assert plan.experiment_minutes(three, CTX, "cuda") == pytest.approx(
        3 * 13 * CTX.scale.expected_steps * plan.seconds_per_step()[("cpu", "cuda")] / 60)
    # the plateau off: every trial trains the cap, 600
    cap = follow_ups.FOLLOW_UPS["cap-small-data"]
    assert plan.experiment_minutes(e, CTX, "cpu", cap, {}) == pytest.approx(trials * 600 * rate / 60)
    more = follow_ups.CONFIRMATORY                            # its own seeds per experiment: 14 here
    assert plan.experiment_minutes(e, CTX, "cpu", more, {}) == pytest.approx(
        len(more.seeds_for(e.name)) * (CTX.n + 1) * 350 * rate / 60) and len(more.seeds_for(e.name)) == 14
    epochs = follow_ups.FOLLOW_UPS["equal-epochs"]            # 3 epochs of SST at 0.03
    assert plan.experiment_minutes(e, CTX, "cpu", epochs, {}) == pytest.approx(
        trials * 3 * plan.STEPS_PER_EPOCH_AT_QUARTER * SMALL / 0.25 * rate / 60)
    transfer = experiments.EXPERIMENTS["transfer"]
    listed = sweeps.listed_trials(transfer.sweeps(CTX)[0], CTX, range(5))
    two = sum(2 if t.params.get("via") or t.params.get("steps") == 2 else 1 for t in listed)
    assert plan.experiment_minutes(transfer,
                                   CTX) == pytest.approx(two * 350 * rate / 60) and two > len(listed)

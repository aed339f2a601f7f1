"""The planner's rates (a step's seconds, a stepless trial's): read from the kept runs' own trial records at
plan and report time."""
import json
from dataclasses import replace

import pytest

import reproduce
from tasks.reproduction import experiments, follow_ups, kept, plan, sweeps
from tests.helpers import run_cli
from tests.helpers.lines import trial_line
from tests.helpers.reproduction import CTX, SMALL, kept_run, reinit, sitting


def _trial(finished: str, wall: float, steps, device: str = "cpu", mode: str = "reinit", params=None,
           precision: str = "bf16", **info):
    return trial_line("from=3", 0, params, mode=mode, fraction=0.25, steps=steps, finished_at=finished,
                      wall_time_s=wall, device=device, precision=precision, info=info)


def test_a_runs_rate_shares_its_busy_time_among_its_trials():
    """Two workers at once, 10:00:00-10:01:40, 100 steps each (the second a transfer trial, both stages:
    200), and a later sitting's trial the next day: 200 s busy over 300 s of wall time, so each trial's share
    is two thirds of its wall time and a step costs 200 s / 400 steps; a probe and a comparison of two seeds'
    models beside them cost their own shares."""
    records = [_trial("2026-11-25T10:01:40Z", 100.0, 100),
               _trial("2026-11-25T10:01:40Z", 100.0, 100, total_steps=200),
               _trial("2026-11-26T09:01:40Z", 100.0, 100)]
    found = plan.run_rate(records)
    assert found.device == "cpu" and found.precision == "bf16"
    assert found.rate == plan.Rate(pytest.approx(200 / 400), {})
    stepless = [_trial("2026-11-25T11:00:10Z", 10.0, None, mode="probe"),
                _trial("2026-11-25T11:00:10Z", 10.0, None, mode="dynamics", params={"kind": "seeds"}),
                _trial("2026-11-25T11:00:40Z", 40.0, 40, mode="dynamics", params={"kind": "finetune"})]
    both = plan.run_rate(records + stepless)    # 240 s busy over 360 s of wall time: a share of two thirds
    assert both.rate.step == pytest.approx(2 / 3 * 340 / 440)
    assert both.rate.trial == {"probe": pytest.approx(20 / 3), "seeds": pytest.approx(20 / 3)}


def test_a_run_gives_no_rate_across_devices_or_precisions_or_without_its_times():
    one = _trial("2026-11-25T10:01:40Z", 100.0, 100)
    assert plan.run_rate([replace(one, device="cuda:0")]).device == "cuda"
    assert plan.run_rate([one, _trial("2026-11-25T10:04:00Z", 5.0, 10, device="cuda:0")]) is None
    assert plan.run_rate([one, _trial("2026-11-25T10:04:00Z", 5.0, 10, precision="fp32")]) is None
    assert plan.run_rate([replace(one, finished_at="")]) is None
    assert plan.run_rate([_trial("2026-11-25T10:01:40Z", 100.0, None, mode="probe")]).rate == plan.Rate(
        None, {"probe": pytest.approx(100.0)})   # a probe trains no steps: a trial's seconds, no step's


def _keep_rate(folder, name: str, seconds: float, precision: str = "bf16"):
    folder = folder / "reinit-small" / name
    folder.mkdir(parents=True)
    run = kept.KeptRun("reinit-small", name, 1, "cpu", "minilm", {}, [0], 6, {"reinit": []}, device="cpu")
    kept.write_run(folder / "run.json", run)
    line = _trial("2026-11-25T10:01:40Z", seconds, 100, precision=precision)
    (folder / "reinit.jsonl").write_text(json.dumps(line.to_json()) + "\n")


def test_the_rate_is_the_median_over_a_folders_kept_runs_by_scale_device_and_precision(tmp_path):
    for name, seconds in (("a", 20.0), ("b", 30.0), ("c", 90.0)):
        _keep_rate(tmp_path, name, seconds)
    _keep_rate(tmp_path, "d", 200.0, "fp32")
    assert plan.measured("cpu", "cpu", "bf16", tmp_path).step == pytest.approx(0.3)
    assert plan.measured("cpu", "cpu", "fp32", tmp_path).step == pytest.approx(2.0)
    assert plan.usual_precision("cpu", "cpu", tmp_path) == "bf16"   # no precision named: the commonest's
    assert plan.measured("cpu", "cpu", "", tmp_path).step == pytest.approx(0.3)
    for name in ("e", "f", "g"):
        _keep_rate(tmp_path, name, 300.0, "fp32")
    plan.run_rates.cache_clear()
    assert plan.usual_precision("cpu", "cpu", tmp_path) == "fp32"
    assert plan.measured("cpu", "cpu", "", tmp_path).step == pytest.approx(3.0)
    assert plan.measured("cpu", "cuda", "", tmp_path) is None
    assert plan.measured("cpu", "cpu", "", tmp_path / "absent") is None


def test_probe_only_runs_do_not_choose_the_precision_an_estimate_reads(tmp_path):
    """Three fp32 runs that trained no step (probes) beside one bf16 run that did: the estimate reads bf16,
    not a precision with no seconds a step."""
    _keep_rate(tmp_path, "a", 20.0)
    for name in ("p", "q", "r"):
        folder = tmp_path / "reinit-small" / name
        folder.mkdir(parents=True)
        run = kept.KeptRun("reinit-small", name, 1, "cpu", "minilm", {}, [0], 6, {"probe": []}, device="cpu")
        kept.write_run(folder / "run.json", run)
        line = _trial("2026-11-25T10:01:40Z", 5.0, None, mode="probe", precision="fp32")
        (folder / "probe.jsonl").write_text(json.dumps(line.to_json()) + "\n")
    plan.run_rates.cache_clear()
    assert plan.usual_precision("cpu", "cpu", tmp_path) == "bf16"
    assert plan.measured("cpu", "cpu", "", tmp_path).step == pytest.approx(0.2)


def test_the_embedded_models_kept_runs_give_the_measured_rates():
    """docs/measurements/2026-11-29-reproduction-planner-stepless-trials.md: medians of 0.205 s a step over
    30 CPU runs in bf16 (a probe 0.80 s, a comparison of two seeds' models 10.8 s, of two tasks' 9.5 s),
    0.014 s a step over 7 runs on an H200."""
    cpu = plan.measured("cpu", "cpu", "bf16")
    assert cpu.step == pytest.approx(0.205, abs=5e-4)
    assert cpu.trial == {"probe": pytest.approx(0.80, abs=5e-3), "seeds": pytest.approx(10.8, abs=0.05),
                         "tasks": pytest.approx(9.46, abs=0.05)}
    assert plan.measured("cpu", "cuda").step == pytest.approx(0.014, abs=5e-4)


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
    monkeypatch.setattr(reproduce, "resolve_precision", lambda precision, device: "fp16")   # none kept in it
    code, out, err = run_cli(reproduce.main, ["--plan", "--results", str(results_dir)])
    assert code == 0 and "Minutes on cpu in bf16 (no run kept in fp16 on cpu: the usual precision's)" in out
    assert "~" in {x.split(":")[0]: x for x in out.splitlines()}["reinit-large"]   # bf16's rate, not none


def test_every_experiment_that_fine_tunes_has_an_estimate_on_each_measured_device():
    for e in experiments.EXPERIMENTS.values():
        for device in ("cpu", "cuda"):
            found = plan.experiment_minutes(e, CTX, device)
            assert found > 0 or (e.name, device) == ("probe", "cuda"), e.name
    probe = experiments.EXPERIMENTS["probe"]     # no steps: each probe costs a probe's measured seconds
    trials = sum(len(sweeps.listed_trials(spec, CTX, range(5))) for spec in probe.sweeps(CTX))
    a_probe = plan.measured("cpu", "cpu").trial["probe"]
    assert plan.experiment_minutes(probe, CTX) == pytest.approx(trials * a_probe / 60)
    assert plan.experiment_minutes(probe, CTX, "cuda") == 0       # no probe timed on a GPU
    paper = experiments.Context(12, experiments.SCALES["paper"], dict(experiments.ROLES))
    # no measured rate
    assert plan.experiment_minutes(experiments.EXPERIMENTS["reinit-small"], paper) is None


def test_a_cost_estimate_is_trials_x_steps_x_the_measured_seconds_a_step():
    """Seeds come from the experiment (or its scale) alone: the estimate lists the trials at those seeds; a
    follow-up's cap or epochs set its steps, a transfer trial trains two stages."""
    rate = plan.measured("cpu", "cpu").step
    e = experiments.EXPERIMENTS["reinit-small"]
    trials = len(experiments.seeds_of(e, CTX.scale)) * (CTX.n + 1)
    assert plan.experiment_minutes(e, CTX) == pytest.approx(trials * CTX.scale.expected_steps * rate / 60)
    three = experiments.EXPERIMENTS["heads-top"]      # seeds=3: 3 x (12 heads + the unmodified model)
    assert plan.experiment_minutes(three, CTX, "cuda") == pytest.approx(
        3 * 13 * CTX.scale.expected_steps * plan.measured("cpu", "cuda").step / 60)
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

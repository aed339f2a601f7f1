"""The planner's seconds a step: read from the kept runs' own trial records at plan and report time."""
import json
from dataclasses import replace

import pytest

from tasks.reproduction import kept, plan
from tests.helpers.lines import trial_line


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

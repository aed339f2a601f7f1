"""ablate.py --workers: trials side by side in worker processes give the serial run's results, survive a dead worker,
stop on a signal, print progress during a trial; plot legends stay outside the data."""
import json
import multiprocessing
import os
import signal
import time
from types import SimpleNamespace

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

import ablate
from minbert import UserError
from tasks.ablation import progress, sweep, workers
from tasks.ablation.studies import permute, probe
from tasks.training import Interrupted
from tests.helpers import run_cli
from tests.helpers.lines import trial_line

BASE = ["--batch-size", "8", "--max-steps", "3", "--precision", "fp32", "--eval-batch-size", "64",
        "--device", "cpu", "--mode", "permute", "--trials", "1", "--task", "all"]


@pytest.fixture
def argv(small_data_dir, tiny_model):
    """A sweep of three trials on the 2-layer model: what holds for workers holds for any model's size."""
    return ["--data-dir", str(small_data_dir), "--model", str(tiny_model), *BASE]


def _records(folder):
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def _scores(folder):
    return {r["config"]: r["dev"] for r in _records(folder) if r["status"] == "ok"}


@pytest.fixture
def one_thread():
    """The serial run at the workers' thread count: a different count rounds some reductions differently."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_two_workers_give_the_serial_runs_scores_bit_for_bit(argv, tmp_path, one_thread):
    code, _, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "serial"), "--workers", "1"])
    assert code == 0, err
    code, stdout, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "parallel"), "--workers", "2"])
    assert code == 0, err
    assert "in 2 worker processes of 1 thread each" in stdout and "[3/3]" in stdout
    serial, parallel = _scores(tmp_path / "serial"), _scores(tmp_path / "parallel")
    assert len(serial) == 3 and parallel == serial  # every trial, every metric, to the last bit
    assert {(r["workers"], r["threads"]) for r in _records(tmp_path / "parallel")} == {(2, 1)}
    assert {(r["workers"], r["threads"]) for r in _records(tmp_path / "serial")} == {(1, 1)}
    assert (tmp_path / "parallel" / "summary.csv").read_text() == (tmp_path / "serial" / "summary.csv").read_text()
    # Workers finish in any order: the summary's rows must not follow the results file's order.
    summary = (tmp_path / "serial" / "summary.csv").read_text()
    results = tmp_path / "serial" / "results.jsonl"
    results.write_text("\n".join(reversed(results.read_text().splitlines())) + "\n")
    code, _, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "serial"), "--summarize"])
    assert code == 0, err
    assert (tmp_path / "serial" / "summary.csv").read_text() == summary


def test_a_dead_worker_loses_only_its_trial_which_the_next_run_retries(argv, tmp_path, monkeypatch):
    argv = [*argv, "--out", str(tmp_path / "sweep"), "--workers", "2"]
    real_fit = sweep.fit

    def dying_fit(config, inputs, outputs, encoder=None, **kwargs):
        if "reinit=all" in str(outputs):  # the trial's TensorBoard folder
            os._exit(9)  # as a worker killed by the OOM killer: no exception, no results line of its own
        return real_fit(config, inputs, outputs, encoder=encoder, **kwargs)

    monkeypatch.setattr(sweep, "fit", dying_fit)
    code, stdout, err = run_cli(ablate.main, argv)
    assert code == 1 and "1 of 3 trials failed" in err
    records = _records(tmp_path / "sweep")
    assert sorted((r["config"], r["status"]) for r in records) == [
        ("order=0-1", "ok"), ("order=1-0", "ok"), ("reinit=all", "failed")]
    assert "died (exit code 9)" in next(r["error"] for r in records if r["status"] == "failed")

    monkeypatch.setattr(sweep, "fit", real_fit)
    code, stdout, err = run_cli(ablate.main, argv)
    assert code == 0 and "3 trials, 2 already finished" in stdout, err
    assert [r["config"] for r in _records(tmp_path / "sweep")][-1] == "reinit=all"


def test_running_trials_print_progress_lines(argv, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.0)  # every step; the default is 30 s
    code, stdout, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "s"), "--workers", "2"])
    assert code == 0, err
    lines = [line for line in stdout.splitlines() if "left in the trial" in line]
    assert any(line.startswith("  permute reinit=all seed=0 fraction=1: step 3/3 loss ") for line in lines), stdout
    assert all(" ex/s, " in line for line in lines) and len(lines) >= 6  # both workers' trials, sent to the parent


def _sleepy(item, say):
    say(f"started {item}")
    time.sleep(0.2 if item < 2 else 60)
    return {"item": item}


def test_a_stop_in_the_parent_ends_every_worker_and_keeps_what_finished(monkeypatch):
    monkeypatch.setattr(workers, "STOP_GRACE_S", 5.0)
    finished, lines = [], []

    def record(item, line):
        finished.append(item)
        if len(finished) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the other units run

    units = [workers.Unit(i, [i]) for i in range(4)]
    with pytest.raises(KeyboardInterrupt):
        workers.run_units(units, 2, _sleepy, record, lines.append, lambda item, reason: None)
    assert sorted(finished) == [0, 1] and "started 0" in lines
    assert not multiprocessing.active_children()  # no worker left running


def _stopped_by_a_signal(item, say):
    if item == 1:
        raise Interrupted(signal.SIGTERM, "stopped by SIGTERM at step 3")  # as the trainer's handler does
    time.sleep(60 if item > 1 else 0)
    return {"item": item}


def test_a_signal_to_one_worker_stops_the_sweep(monkeypatch):
    monkeypatch.setattr(workers, "STOP_GRACE_S", 5.0)
    finished = []
    units = [workers.Unit(i, [i]) for i in range(3)]
    with pytest.raises(Interrupted, match="stopped by SIGTERM") as stop:
        workers.run_units(units, 2, _stopped_by_a_signal, lambda item, line: finished.append(item), print,
                          lambda item, reason: None)
    assert stop.value.exit_code == 128 + signal.SIGTERM and finished == [0]
    assert not multiprocessing.active_children()


def test_units_keep_a_shard_units_trials_together_in_plan_order():
    trials = permute.trials(SimpleNamespace(options=permute.Options(trials=2), seeds=(0, 1), fractions=(1.0,)),
                            sweep.Shape(num_layers=4, num_heads=1))
    trials[1].shard_unit = trials[4].shard_unit = "together"
    units = sweep.units(trials)
    assert [t.name for u in units for t in u.items] == [t.name for t in [trials[0], trials[1], trials[4]]
                                                         + trials[2:4] + trials[5:]]
    assert [u.items for u in units if len(u.items) > 1] == [[trials[1], trials[4]]]
    # probes share the features of one seed and fraction: one unit each, however many layers
    probes = [sweep.Trial("probe", f"layer={k}", {}, seed, 1.0) for seed in (0, 1) for k in range(3)]
    assert [len(u.items) for u in sweep.units(probes, probe.STUDY.worker_unit)] == [3, 3]


def test_worker_count_auto_is_the_cpus_on_a_cpu_and_one_on_a_gpu(monkeypatch):
    monkeypatch.setattr(workers, "cpu_count", lambda: 4)
    trials = [sweep.Trial("permute", f"c{i}", {}, 0, 1.0) for i in range(3)]

    def count(device, wanted=None):
        return sweep.worker_count(SimpleNamespace(config=SimpleNamespace(workers=wanted), study=permute.STUDY,
                                                  inputs=SimpleNamespace(device=torch.device(device))), trials)

    assert count("cpu") == 3  # four CPUs, but three trials
    assert count("cpu", 1) == 1 and count("cpu", 2) == 2
    assert count("cuda") == 1
    with pytest.raises(UserError, match="--workers 2: worker processes run on a CPU only"):
        count("cuda", 2)


def test_bad_workers_value_exits_2(argv, tmp_path):
    code, _, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "s"), "--workers", "0"])
    assert code == 2 and "--workers" in err and len(err.strip().splitlines()) == 1


def test_legends_sit_outside_the_axes():
    records = [trial_line(c, s, p, "permute", dev={"sst": v}) for s in (0, 1) for c, p, v in (
        ("order=0-1", {"order": [0, 1], "original": True, "random": False}, 0.5 + s / 100),
        ("order=1-0", {"order": [1, 0], "original": False, "random": True}, 0.4 + s / 100),
        ("reinit=all", {"order": None, "original": False, "random": False, "reinit": True}, 0.3))]
    rows = [{"config": r.config, "metric": "dev/sst", "data_fraction": 1.0, "n": 2, "mean": r.dev["sst"],
             "ci95_low": r.dev["sst"] - 0.01, "ci95_high": r.dev["sst"] + 0.01, "params": r.params}
            for r in records if r.seed == 0]
    fig = permute.permutation_strip(records, rows, "dev/sst")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        legend, frame = ax.get_legend(), ax.get_window_extent(renderer)
        assert legend is not None and legend.get_window_extent(renderer).x0 >= frame.x1

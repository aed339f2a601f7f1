"""search.py: the recipe search on Optuna, its trials ordinary runs of the trainer; killed and resumed, shared
by workers, pruned, and its space's defaults the trainer's."""
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import search
from tests.helpers import REPO, run_cli

optuna = pytest.importorskip("optuna", reason="search.py's tests need requirements-search.txt")
from optuna.trial import TrialState  # noqa: E402

from tasks.course.provenance import run_problems, run_provenance  # noqa: E402
from tasks.search.space import SPACE, Choice  # noqa: E402
from tasks.training import train_parser  # noqa: E402


@pytest.fixture
def fixed(tiny_model, small_data_dir):
    return ["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--max-steps", "4", "--checkpoint-every",
            "2", "--eval-batch-size", "64", "--precision", "fp32", "--device", "cpu", "--heartbeat", "1"]


def study_of(out: Path):
    return optuna.load_study(study_name="search", storage=f"sqlite:///{out / 'study.db'}")


def test_the_spaces_defaults_are_the_trainers():
    """Each parameter's default is what train_multitask.py's own parser gives when its flag is left out, and
    every value the space can draw is one the trainer's flag takes."""
    parser = train_parser()
    defaults = vars(parser.parse_args([]))
    assert {p.name: p.default for p in SPACE} == {p.name: defaults[p.name] for p in SPACE}
    for parameter in SPACE:
        for value in parameter.choices if isinstance(parameter, Choice) else (parameter.low, parameter.high):
            parsed = vars(parser.parse_args(parameter.argv(value)))[parameter.name]
            assert parsed == value


DRIVER = r'''
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from tasks.training import outputs
import search

real = outputs.save_checkpoint
def save_checkpoint(out_dir, state):  # SIGKILL at trial 1's first checkpoint: mid-trial
    real(out_dir, state)
    if str(out_dir).endswith(os.path.join("trials", "0001")):
        os.kill(os.getpid(), signal.SIGKILL)
outputs.save_checkpoint = save_checkpoint
sys.exit(search.main(sys.argv[2:]))
'''


def assert_the_folders_say_what_the_study_holds(out: Path, finished: list) -> None:
    """Each finished trial's run folder says how it ended and ran the fixed flags; TensorBoard has one run per
    finished trial; search.json records the sampler's seed and the space."""
    for trial in finished:
        folder = out / "trials" / f"{trial.number:04d}"
        assert json.loads((folder / "trial.json").read_text())["state"] == trial.state.name.lower()
        assert json.loads((folder / "config.json").read_text())["arguments"]["max_steps"] == 4
    assert {p.name for p in (out / "tensorboard").iterdir() if p.is_dir()} == \
        {f"trial-{t.number:04d}" for t in finished}
    record = json.loads((out / "search.json").read_text())
    assert record["sampler"]["seed"] == 0 and [p["name"] for p in record["space"]] == [p.name for p in SPACE]


def test_a_search_killed_mid_trial_resumes_to_its_count_retrying_the_killed_trial(tmp_path, fixed):
    out = tmp_path / "S"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    argv = ["--out", str(out), "--trials", "3", *fixed]
    killed = subprocess.run([sys.executable, str(driver), str(REPO), *argv], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = study_of(out).get_trials()
    assert [t.state for t in before] == [TrialState.COMPLETE, TrialState.RUNNING]

    code, stdout, stderr = run_cli(search.main, ["--out", str(out)])  # resumed as it was started
    assert code == 0, stderr
    trials = study_of(out).get_trials()
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == 3 and [t.number for t in trials if t.state == TrialState.FAIL] == [1]
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == 1)
    assert retry in finished and retry.params == trials[1].params
    assert trials[0].params == before[0].params and trials[0].value == before[0].value  # not run again
    assert len({json.dumps(t.params, sort_keys=True) for t in finished}) == 3  # none duplicated
    killed_record = json.loads((out / "trials" / "0001" / "trial.json").read_text())
    assert killed_record["state"] == "failed" and killed_record["retried_as"] == retry.number
    assert "no heartbeat for over 2 s" in killed_record["reason"]  # the resumed search kept its --heartbeat 1
    assert "stopped beating" in stdout
    assert_the_folders_say_what_the_study_holds(out, finished)
    best = max((t for t in finished if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    assert f"best: trial {best.number}" in stdout and (out / "search.png").stat().st_size > 0
    code, stdout, _ = run_cli(search.main, ["--out", str(out), "--best"])
    assert code == 0 and stdout.splitlines()[0] == str((out / "trials" / f"{best.number:04d}").resolve())


@pytest.mark.parametrize("storage", ["{tmp}/missing/study.journal", "{tmp}", "nosuchdriver://x/y"])
def test_a_storage_that_cannot_be_opened_is_one_line_and_exit_2(tmp_path, fixed, storage):
    out = tmp_path / "S"
    code, _, stderr = run_cli(search.main, ["--out", str(out), "--storage", storage.format(tmp=tmp_path), *fixed])
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and stderr.startswith("error: --storage")
    assert not out.exists()  # nothing written


def test_two_workers_on_one_storage_train_distinct_trials(tmp_path, fixed):
    out = tmp_path / "S"
    code, _, stderr = run_cli(search.main, ["--out", str(out), "--trials", "2", "--workers", "2", *fixed])
    assert code == 0, stderr
    trials = study_of(out).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert trials[0].params != trials[1].params
    assert len({t.user_attrs["folder"] for t in trials}) == 2
    logs = [(out / "logs" / f"worker-{k}.log").read_text() for k in (1, 2)]
    assert all("search: trial" in log for log in logs)  # each worker trained one


def test_a_pruned_trial_stops_at_its_evaluation_and_its_folder_says_so(tmp_path, tiny_model, small_data_dir):
    """The search's callback on the trainer's own command: a pruner that prunes at once stops the run after
    its first evaluation; metrics.json says why, and the course's checks call it an interrupted run."""
    from tasks.search.trial import Report
    from tasks.training import train_command
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.ThresholdPruner(lower=2.0))
    trial = study.ask()
    report = Report(trial, "threshold")
    folder = tmp_path / "run"
    code = train_command(["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--max-steps", "4",
                          "--eval-every", "1", "--precision", "fp32", "--device", "cpu", "--out", str(folder),
                          "--predictions-dir", ""], callbacks=[report])
    assert code == 0 and report.pruned.startswith("pruned by the search's threshold pruner at evaluation 1")
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["steps"] == 1 and metrics["stop_reason"] == report.pruned
    assert list(study.trials[0].intermediate_values) == [1]
    assert "interrupted" in [kind for kind, _ in run_problems(run_provenance(folder))]


def test_the_trainers_resume_is_refused_with_one_line(tmp_path, fixed):
    code, _, stderr = run_cli(search.main, ["--out", str(tmp_path / "S"), "--resume", "runs/x", *fixed])
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "--resume: not for a search" in stderr
    assert not (tmp_path / "S").exists()


def test_without_optuna_the_search_says_which_file_installs_it(tmp_path, fixed, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now raises ImportError
    code, _, stderr = run_cli(search.main, ["--out", str(tmp_path / "S"), *fixed])
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "requirements-search.txt" in stderr

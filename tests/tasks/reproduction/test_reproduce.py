"""reproduce.py: a small run end to end (its sweeps kept and resumed, shards gathered), bad arguments in one
line, and no script imported."""
import ast
import inspect
import json
import re
from pathlib import Path

import pytest

import reproduce
from tasks.fileio import read_jsonl
from tasks.reproduction import kept as reproduction_runs
from tasks.reproduction import sweeps
from tests.helpers import run_cli


def test_reproduce_runs_its_sweeps_keeps_their_results_and_resumes(small_data_dir, tiny_model, tmp_path):
    results_dir = tmp_path / "results"
    argv = ["--only", "pairs", "--model", str(tiny_model), "--data-dir", str(small_data_dir),
            "--out", str(tmp_path / "runs"), "--max-steps", "1",
            "--seeds", "2", "--results", str(results_dir), "--report", str(tmp_path / "report.md"),
            "--precision", "fp32", "--device", "cpu"]
    code, stdout, err = run_cli(reproduce.main, argv)
    assert code == 0, err
    run = json.loads((results_dir / "pairs" / "first" / "run.json").read_text())
    assert run["seeds"] == [0, 1] and run["scale"] == "cpu" and run["model"] == tiny_model.name
    assert len(run["sittings"]) == 1 and run["sittings"][0]["trials"] == 8
    assert run["schema"] == reproduction_runs.SCHEMA
    for sweep in ("sts-cross", "sts-siamese", "quora-cross", "quora-siamese"):
        assert len(read_jsonl(results_dir / "pairs" / "first" / f"{sweep}.jsonl")) == 2
    assert "| [freeze-cross-encoding]" in (tmp_path / "report.md").read_text()
    code, stdout, err = run_cli(reproduce.main, argv)   # a second sitting finds every trial finished
    assert code == 0, err
    run = json.loads((results_dir / "pairs" / "first" / "run.json").read_text())
    assert [s["trials"] for s in run["sittings"]] == [8]   # a sitting that added nothing is not kept


def test_shards_of_a_run_each_keep_their_trials_and_the_run_its_device_and_weights(small_data_dir, tiny_model,
                                                                                   tmp_path):
    results_dir = tmp_path / "results"
    argv = ["--only", "pairs", "--model", str(tiny_model), "--data-dir", str(small_data_dir),
            "--out", str(tmp_path / "runs"), "--max-steps", "1",
            "--seeds", "3", "--results", str(results_dir), "--report", str(tmp_path / "report.md"),
            "--precision", "fp32", "--device", "cpu"]
    for shard in ("1/2", "2/2"):
        code, stdout, err = run_cli(reproduce.main, [*argv, "--shard", shard])
        assert code == 0, err
        if shard == "1/2":   # --gather keeps what the folders hold and trains nothing: here, shard 1's trials
            gathered = [*argv[:argv.index("--results")], "--results", str(tmp_path / "gathered"), "--report",
                        str(tmp_path / "gathered.md"), "--precision", "fp32", "--device", "cpu", "--gather"]
            code, stdout, err = run_cli(reproduce.main, gathered)
            assert code == 0, err
            run = reproduction_runs.read_run(tmp_path / "gathered" / "pairs" / "first" / "run.json")
            assert 0 < run.sittings[0].trials < 12 and "nothing trained" in stdout
            assert "**Unfinished**" in (tmp_path / "gathered.md").read_text()
    run = reproduction_runs.read_run(results_dir / "pairs" / "first" / "run.json")
    first, second = run.sittings
    assert 0 < first.trials < 12 and first.trials + second.trials == 12   # 3 seeds x 4
    assert run.device == "cpu" and len(run.weights) == 12
    assert run.weights == sweeps.weights_of(str(tiny_model))
    assert "trained on cpu from weights " + run.weights in (tmp_path / "runs.md").read_text()


def test_a_run_kept_unfinished_resumes_in_an_empty_folder_without_training_its_kept_trials(
        small_data_dir, tiny_model, tmp_path):
    results_dir = tmp_path / "results"
    argv = ["--only", "pairs", "--model", str(tiny_model), "--data-dir", str(small_data_dir),
            "--max-steps", "1", "--seeds", "3", "--results", str(results_dir),
            "--report", str(tmp_path / "report.md"), "--precision", "fp32", "--device", "cpu"]
    code, stdout, err = run_cli(reproduce.main, [*argv, "--out", str(tmp_path / "here"), "--shard", "1/2"])
    assert code == 0, err
    kept_first = reproduction_runs.read_run(results_dir / "pairs" / "first" / "run.json").sittings[0].trials
    assert 0 < kept_first < 12
    # another machine: the kept results came with the checkout, the sweeps' folders did not
    code, stdout, err = run_cli(reproduce.main, [*argv, "--out", str(tmp_path / "there")])
    assert code == 0, err
    finished = [int(n) for n in re.findall(r"reinit: 3 trials, (\d+) already finished", stdout)]
    assert len(finished) == 4 and sum(finished) == kept_first      # the kept trials were not trained again
    run = reproduction_runs.read_run(results_dir / "pairs" / "first" / "run.json")
    assert [s.trials for s in run.sittings] == [kept_first, 12 - kept_first]
    code, stdout, err = run_cli(reproduce.main, [*argv, "--out", str(tmp_path / "there")])
    assert code == 0 and "kept before and missing" not in stdout   # nothing missing the second time


@pytest.mark.parametrize("argv, needle", [(["--only", "tamkin"], "no such experiment"),
                                          (["--seeds", "3"], "follow-up"),
                                          (["--max-steps", "1"], "--results"),
                                          (["--follow-up", "nope"], "not declared"),
                                          (["--tasks", "third=x"], "no role")])
def test_bad_arguments_exit_2_with_one_line(tmp_path, argv, needle):
    code, _, err = run_cli(reproduce.main, [*argv, "--out", str(tmp_path / "r")])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_reproduce_imports_no_script_and_passes_no_command_line_to_the_sweeps():
    tree = ast.parse((Path(__file__).resolve().parents[3] / "reproduce.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    scripts = {p.stem for p in Path(__file__).resolve().parents[3].glob("*.py")}
    assert not imported & scripts, imported & scripts
    assert "parse_args" not in inspect.getsource(sweeps)   # SweepConfigs are built, not parsed

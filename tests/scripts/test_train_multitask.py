"""train_multitask.py end to end on small real-format data, and the trainer's contracts."""
import json

import pytest
import torch

import train_multitask
from tasks.saved.run_record import RunRecord
from tests.helpers import prediction_rows, run_cli

BASE = ["--model", "minilm", "--batch-size", "8", "--eval-batch-size", "64", "--precision", "fp32", "--device", "cpu"]


def test_short_run_writes_everything(small_data_dir, tmp_path):
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(train_multitask.main, BASE + [
        "--data-dir", str(small_data_dir), "--max-steps", "6", "--out", str(out)])
    assert code == 0, stderr
    config = json.loads((out / "config.json").read_text())
    assert RunRecord.from_json(config, out).to_json() == config   # the reader types all the writer wrote
    assert config["model"]["weights_sha256"] and config["model"]["num_layers"] == 6
    assert config["data"]["sst"]["train"]["sha256"] and config["data"]["sst"]["train"]["n_rows"] == 40
    assert config["data"]["quora"]["test"] is None
    assert config["arguments"]["max_steps"] == 6 and "torch" in config["versions"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 6 and set(metrics["best"]) == {"sst", "quora", "sts", "overall", "overall_raw"}
    assert (out / "checkpoint.pt").exists() and (out / "best.pt").exists()
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    preds = out / "predictions"
    expected = {"sst-dev-output.csv", "sst-test-output.csv", "para-dev-output.csv",
                "sts-dev-output.csv", "sts-test-output.csv", "scores"}   # scores/: what an ensemble averages
    assert {p.name for p in preds.iterdir()} == expected
    dev_ids = [line.split("\t")[1] for line in (small_data_dir / "ids-sst-dev.csv").read_text().splitlines()[1:]]
    assert [i for i, _ in prediction_rows(preds / "sst-dev-output.csv")] == dev_ids
    assert not (tmp_path / "course-predictions").exists()  # MINBERT_PREDICTIONS_DIR (conftest): a smoke run
    assert "did not publish" in stdout                         # never replaces a real run's files there


def test_training_moves_the_dev_metric(small_data_dir, tmp_path):
    """Dev = train here: a few dozen steps must fit the data far better than the untrained head (the top layer
    and the head train; the frozen five would triple the time and show nothing more)."""
    data = tmp_path / "data"
    data.mkdir()
    train = (small_data_dir / "ids-sst-train.csv").read_text()
    (data / "ids-sst-train.csv").write_text(train)
    (data / "ids-sst-dev.csv").write_text(train)
    args = BASE + ["--data-dir", str(data), "--tasks", "sst", "--warmup", "0"]
    code, _, err = run_cli(train_multitask.main, args + ["--max-steps", "1", "--lr", "1e-9",
                                                         "--out", str(tmp_path / "a")])
    trained_argv = ["--epochs", "12", "--lr", "2e-4", "--freeze-until", "5", "--out", str(tmp_path / "b")]
    code2, _, err2 = run_cli(train_multitask.main, args + trained_argv)
    assert code == code2 == 0, err + err2
    untrained = json.loads((tmp_path / "a" / "metrics.json").read_text())["best"]["sst"]
    trained = json.loads((tmp_path / "b" / "metrics.json").read_text())["best"]["sst"]
    assert trained >= untrained + 0.3


def test_freezing_keeps_frozen_weights_bit_identical(small_data_dir, tmp_path, pretrained):
    out = tmp_path / "frozen"
    code, _, err = run_cli(train_multitask.main, BASE + ["--data-dir", str(small_data_dir),
                                                         "--freeze-until", "4", "--max-steps", "3",
                                                         "--pooling", "pooler", "--out", str(out),
                                                         "--tasks", "sst"])
    assert code == 0, err
    trained = torch.load(out / "checkpoint.pt", weights_only=True)["model"]
    original = pretrained.state_dict()
    for name, before in original.items():
        after = trained["encoder." + name]
        frozen = name.startswith("embeddings.") or any(name.startswith(f"encoder.layer.{i}.") for i in range(4))
        assert torch.equal(before, after) == frozen, name


@pytest.mark.parametrize("argv,needle", [
    (["--tasks", "sst,nli"], "nli"),
    (["--data-fraction", "0"], "--data-fraction"),
    (["--data-fraction", "1.5"], "--data-fraction"),
    (["--lr", "-1"], "--lr"),
    (["--freeze-until", "-7"], "--freeze-until"),
    (["--data-dir", "/nonexistent/folder"], "not found"),
])
def test_bad_arguments_exit_2_with_one_line(small_data_dir, tmp_path, argv, needle):
    args = BASE + ["--data-dir", str(small_data_dir), "--max-steps", "1", "--out", str(tmp_path / "r")] + argv
    code, _, err = run_cli(train_multitask.main, args)
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning:")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err


def test_wrong_file_exits_2_naming_it(small_data_dir, tmp_path):
    bad = tmp_path / "data"
    bad.mkdir()
    for p in small_data_dir.iterdir():
        (bad / p.name).write_bytes(p.read_bytes())
    (bad / "sts-train.csv").write_bytes((small_data_dir / "ids-sst-train.csv").read_bytes())
    code, _, err = run_cli(train_multitask.main, BASE + ["--data-dir", str(bad), "--max-steps", "1",
                                                         "--out", str(tmp_path / "r")])
    assert code == 2 and "sts-train.csv" in err.strip().splitlines()[-1]


def test_eval_every_evaluates_at_its_steps_and_the_last_and_in_memory_keeps_the_final_weights(small_data_dir,
                                                                                               tiny_model):
    from tasks import training
    from tasks.evaluation import evaluate
    from tasks.inputs import prepare
    # SST alone, 40 rows at batch 8: 5 steps an epoch; 7 steps, evaluated at 3, 6 and 7 (not at the epoch's end)
    config = training.parse_train_command(BASE + ["--model", str(tiny_model), "--data-dir", str(small_data_dir),
                                                  "--tasks", "sst", "--epochs", "2",
                                                  "--max-steps", "7", "--eval-every", "3"]).config
    inputs = prepare(config)
    result = training.fit(config, inputs, training.InMemory(final_weights=True))
    assert [(e["epoch"], e["step"]) for e in result["history"]] == [(1, 3), (2, 6), (2, 7)]
    assert result["final"] == result["history"][-1]["dev"] and result["steps"] == 7
    assert evaluate(result["model"], inputs, 64) == result["final"]  # the final weights, not the best

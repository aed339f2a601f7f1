"""Tasks declared from the user's own GLUE-format files (--task-file): reading, metrics, training, ablation,
mistakes."""
import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import ablate
import predict
import train_multitask
from minbert.errors import UserError
from tasks import registry
from tasks.data import read_split
from tasks.head_kinds import HEAD_KINDS, REGRESS
from tasks.metrics import f1, macro_f1, matthews, spearman, unit_scale
from tasks.task_file import SCHEMA, declare_tasks, load_task_file
from tests.helpers import run_cli
from tests.helpers.glue import task_file

# ---------------------------------------------------------------------------- metrics, by hand


def test_metrics_against_hand_computed_values():
    # Binary: TP 3, FN 2, FP 1, TN 2.
    gold = [1, 1, 1, 1, 1, 0, 0, 0]
    pred = [1, 1, 1, 0, 0, 1, 0, 0]
    assert matthews(pred, gold) == pytest.approx((3 * 2 - 1 * 2) / math.sqrt(4 * 5 * 3 * 4))
    assert f1(pred, gold) == pytest.approx(2 * 3 / (2 * 3 + 1 + 2))
    # Macro F1: class 1 as above (6/9); class 0: TP 2, FP 2, FN 1 -> 4/7.
    assert macro_f1(pred, gold) == pytest.approx((6 / 9 + 4 / 7) / 2)
    # Three classes (Gorodkin): confusion rows gold, columns predicted [[2,1,0],[0,1,1],[1,0,2]].
    gold3 = [0, 0, 0, 1, 1, 2, 2, 2]
    pred3 = [0, 0, 1, 1, 2, 0, 2, 2]
    n, correct, t, p = 8, 5, np.array([3, 2, 3]), np.array([3, 2, 3])
    assert matthews(pred3, gold3) == pytest.approx((correct * n - t @ p) / math.sqrt((n * n - p @ p) * (n * n - t @ t)))
    assert matthews([1, 1, 1], [0, 1, 1]) == 0.0 and f1([0, 0], [0, 0]) == 0.0  # undefined: 0, never NaN
    assert matthews(gold, gold) == 1.0 and matthews([1 - g for g in gold], gold) == pytest.approx(-1.0)
    # Spearman with ties: ranks of pred [1, 2.5, 2.5, 4], of gold [1, 2, 3, 4].
    rp, rg = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4])
    dp, dg = rp - rp.mean(), rg - rg.mean()
    expected = (dp @ dg) / math.sqrt((dp ** 2).sum() * (dg ** 2).sum())
    assert spearman([0.1, 0.5, 0.5, 9.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(expected)
    assert spearman([1, 2, 3, 4], [10, 20, 300, 4000]) == pytest.approx(1.0)  # any increasing map
    assert unit_scale("mcc", -1.0) == 0.0 and unit_scale("f1", 0.25) == 0.25 and unit_scale("spearman", 0.5) == 0.75


# ---------------------------------------------------------------------------- reading the files


def test_declared_files_are_read_as_glue_lays_them_out(glue_dir):
    folder, labels = glue_dir
    assert declare_tasks(task_file(folder)) == ("cola", "mrpc")
    train = read_split(None, "cola", "train")
    assert [e.label for e in train.examples] == labels["train"] and train.examples[0].id == "0"
    assert train.examples[5].id == "5" and train.examples[5].b is None
    test = read_split(None, "cola", "test")
    assert [e.id for e in test.examples] == ["0", "1", "2", "3", "4"] and test.examples[0].label is None
    mrpc = read_split(None, "mrpc", "dev")
    assert len(mrpc) == 12 and mrpc.examples[0].a.startswith('He said " the') and mrpc.examples[1].label == 1
    assert read_split(None, "mrpc", "test") is None  # not declared: nothing to predict
    assert registry.get_task("mrpc").is_pair and not registry.get_task("cola").is_pair


def test_named_labels_comma_separated_files_and_a_regression_range(tmp_path):
    (tmp_path / "rte-train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tA man sleeps .\tA man is awake ."
                                            "\tnot_entailment\n1\tA dog runs .\tAn animal moves .\tentailment\n"
                                            "2\tIt rains .\tIt is wet .\tentailment\n")
    (tmp_path / "scores.csv").write_text('sent,score\n"one, two",4.5\nthree,1\n')
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({
        "rte": {"train": "rte-train.tsv", "dev": "rte-train.tsv", "text": ["sentence1", "sentence2"], "label": "label",
                "id": "index", "labels": ["not_entailment", "entailment"]},
        "likert": {"train": "scores.csv", "dev": "scores.csv", "text": ["sent"], "label": "score",
                   "range": [1, 7], "metric": "spearman"}}))
    try:
        declare_tasks(path)
        assert [e.label for e in read_split(None, "rte", "dev").examples] == [0, 1, 1]
        likert = read_split(None, "likert", "train")
        assert [(e.a, e.label) for e in likert.examples] == [("one, two", 4.5), ("three", 1.0)]
        assert registry.get_task("likert").kind is REGRESS and registry.get_task("likert").label_range == (1.0, 7.0)
        # A label outside the declared classes is an unusable row, counted like the course's.
        (tmp_path / "rte-train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta .\tb .\tneutral\n")
        with pytest.raises(UserError, match="unknown label"):
            read_split(None, "rte", "train", strict=True)
    finally:
        declare_tasks(None)
    assert "rte" not in registry.REGISTRY  # declarations last one command


# ---------------------------------------------------------------------------- through the commands

BASE = ["--device", "cpu", "--model", "minilm", "--batch-size", "8", "--max-steps", "2", "--precision", "fp32",
        "--eval-batch-size", "64", "--predictions-dir", ""]


def test_train_multitask_on_declared_cola_and_mrpc(glue_dir, tmp_path):
    folder, labels = glue_dir
    out = tmp_path / "run"
    code, stdout, err = run_cli(train_multitask.main, ["--task-file", str(task_file(folder)), "--tasks", "cola,mrpc",
                                                       "--out", str(out), *BASE])
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    config = json.loads((out / "config.json").read_text())
    assert config["arguments"]["task_file"] == str(folder / "tasks.json")
    assert config["declared_tasks"]["cola"]["metric"] == "mcc" and config["declared_tasks"]["mrpc"]["metric"] == "f1"
    assert config["data"]["cola"]["dev"]["n_used"] == 12 and config["data"]["mrpc"]["test"] is None
    predictions = out / "predictions"
    assert sorted(p.relative_to(predictions).as_posix() for p in predictions.rglob("*") if p.is_file()) == [
        "cola-dev-output.tsv", "cola-test-output.tsv", "mrpc-dev-output.tsv",
        "scores/cola-dev.json", "scores/cola-test.json", "scores/mrpc-dev.json"]
    lines = (predictions / "cola-dev-output.tsv").read_text().splitlines()
    assert lines[0] == "id\tprediction" and [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(12)]
    values = [int(line.split("\t")[1]) for line in lines[1:]]
    assert_declared_metrics(metrics["best"], predictions, values, labels["dev"])
    test_rows = (predictions / "cola-test-output.tsv").read_text().splitlines()[1:]
    assert [line.split("\t")[0] for line in test_rows] == ["0", "1", "2", "3", "4"]
    assert_predict_rebuilds_the_run(out, folder, tmp_path, values)


def assert_declared_metrics(best, predictions, cola, cola_labels):
    """The reported dev metrics are the declared ones, of exactly these predictions."""
    assert best["cola"] == pytest.approx(matthews(cola, cola_labels))
    mrpc = [int(line.split("\t")[1]) for line in (predictions / "mrpc-dev-output.tsv").read_text().splitlines()[1:]]
    assert best["mrpc"] == pytest.approx(f1(mrpc, [i % 2 for i in range(12)]))
    assert best["overall"] == pytest.approx(((best["cola"] + 1) / 2 + best["mrpc"]) / 2)


def assert_predict_rebuilds_the_run(out, folder, tmp_path, cola):
    """predict.py rebuilds the declared tasks from the run's record and writes the same files again."""
    predictions = out / "predictions"
    again = tmp_path / "again"
    declare_tasks(None)  # as in a new process: nothing declared yet
    code, stdout, err = run_cli(predict.main, [str(out), "--out", str(again), "--device", "cpu"])
    assert code == 0, err
    for name in ("cola-dev-output.tsv", "cola-test-output.tsv", "mrpc-dev-output.tsv"):
        assert (again / name).read_bytes() == (predictions / name).read_bytes()
    # ... and scores the user's own sentences with a declared task's head, as with the course's.
    dev_rows = (folder / "dev.tsv").read_text().splitlines()
    mine = tmp_path / "mine.tsv"
    mine.write_text("text\n" + "".join(row.split("\t")[3] + "\n" for row in dev_rows))
    declare_tasks(None)
    code, stdout, err = run_cli(predict.main, [str(out), "--input", str(mine), "--task", "cola", "--columns", "text",
                                               "--device", "cpu"])
    assert code == 0, err
    scored = stdout.strip().splitlines()
    assert scored[0].split("\t")[:2] == ["id", "prediction"] and len(scored) == 13
    assert [int(line.split("\t")[1]) for line in scored[1:]] == cola  # the same head on the same sentences
    code, _, err = run_cli(predict.main, [str(out), "--input", str(mine), "--task", "sst", "--device", "cpu"])
    assert code == 2 and "has no sst head" in err


def test_an_ablation_sweep_on_a_declared_task(glue_dir, tmp_path):
    folder, _ = glue_dir
    out = tmp_path / "sweep"
    code, stdout, err = run_cli(ablate.main, ["--mode", "reinit", "--task-file", str(task_file(folder)), "--task",
                                              "mrpc", "--from-layer", "5", "--out", str(out), *BASE])
    assert code == 0, err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["config"] for r in records) == ["from=5", "from=6"]
    assert all(r["status"] == "ok" and set(r["dev"]) == {"mrpc", "overall", "overall_raw"} for r in records)
    assert "reinit,from=5,1.0,dev/mrpc," in (out / "summary.csv").read_text()


@pytest.mark.parametrize("change,needle", [
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "text": [3], "label": 1, "classes": 2, "colour": "red"}},
     "unknown key 'colour'"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [3], "classes": 2}},
     "'label' is required"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": ["sentence"], "label": 1,
               "classes": 2}}, "0-based indices"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [3], "label": 1, "classes": 3,
               "metric": "f1"}}, "needs two classes"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [3], "label": 1, "classes": 2,
               "metric": "pearson"}}, "does not fit a classification task"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [3], "label": 1}},
     "exactly one of 'classes'"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [0, 2, 3], "label": 1,
               "classes": 2}}, "one or two sentences"),
    ({"sst": {"train": "train.tsv", "dev": "dev.tsv", "text": ["s"], "label": "l", "classes": 2}},
     "cannot be redeclared"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [3], "label": 1, "range": [5, 0]}},
     "'range' must be [low, high]"),
    ({"cola": {"train": "missing.tsv", "dev": "dev.tsv", "header": False, "text": [3], "label": 1, "classes": 2}},
     "missing.tsv not found"),
    ({"cola": {"train": "train.tsv", "dev": "dev.tsv", "header": False, "text": [3], "label": 1, "classes": 2,
               "test": {"file": "test.tsv", "header": True}}}, "must give its own 'text'"),
    ("not json {", "not valid JSON"),
])
def test_bad_declarations_exit_2_with_one_line(glue_dir, tmp_path, change, needle):
    folder, _ = glue_dir
    path = folder / "tasks.json"
    path.write_text(change if isinstance(change, str) else json.dumps(change))
    out = tmp_path / "bad"
    code, _, err = run_cli(train_multitask.main, ["--task-file", str(path), "--tasks", next(iter(change))
                                                  if isinstance(change, dict) else "cola", "--out", str(out), *BASE])
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning:")]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert str(path) in lines[0] or "not found" in lines[0]
    assert not (out / "checkpoint.pt").exists()


def test_a_file_without_a_schema_reads_as_schema_1(tmp_path):
    # The module docstring's GLUE file, as every task file before "schema" was written.
    saved = tmp_path / "glue-task-file.json"
    shutil.copy(Path(__file__).parents[1] / "data" / saved.name, saved)
    old = load_task_file(saved)
    assert [t.name for t in old] == ["cola", "mrpc", "rte", "stsb"]
    assert old[0].layout("test") == registry.Layout(True, ("sentence",), 1,
                                                    "index") and old[0].metric == "mcc"
    assert old[2].label_names == ("not_entailment", "entailment") and old[3].label_range == (0.0, 5.0)
    said = saved.parent / "said.json"  # beside it: files are relative to a task file's folder
    said.write_text(json.dumps({"schema": SCHEMA, **json.loads(saved.read_text())}))
    assert [dataclasses.replace(t, declared_in=None, description="") for t in load_task_file(said)] == \
        [dataclasses.replace(t, declared_in=None, description="") for t in old]
    # A file of a format this version does not know is one line naming the file, not a misread.
    said.write_text(json.dumps({"schema": SCHEMA + 1, **json.loads(saved.read_text())}))
    with pytest.raises(UserError, match=f"{re.escape(str(said))}: 'schema' must be {SCHEMA}"):
        load_task_file(said)


def test_a_task_file_is_needed_for_a_declared_name(tmp_path):
    code, _, err = run_cli(train_multitask.main, ["--tasks", "cola", "--out", str(tmp_path / "x"), *BASE])
    assert code == 2 and "unknown task 'cola'" in err and "--task-file" in err


def test_every_metric_a_declaration_can_name_is_computed():
    from tasks.metrics import METRICS
    assert set(METRICS) == {m for kind in HEAD_KINDS.values() for m in kind.metrics}

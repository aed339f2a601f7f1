import math
import zipfile

import numpy as np
import pytest
import torch

from minbert.errors import DataError, UserError
from tasks.metrics import TASK_METRIC, accuracy, overall_score, pearson
from tasks.predictions import (
    HEADERS,
    PREDICTION_FILES,
    make_submission,
    read_predictions,
    write_predictions,
)


def test_accuracy():
    assert accuracy([1, 0, 2, 2], [1, 1, 2, 0]) == 0.5
    assert accuracy(torch.tensor([1, 0]), np.array([1, 0])) == 1.0
    with pytest.raises(ValueError):
        accuracy([1], [1, 2])


def test_pearson():
    gold = [0.0, 1.0, 2.0, 3.0, 5.0]
    assert pearson([2 * g + 1 for g in gold], gold) == pytest.approx(1.0)
    assert pearson([-g for g in gold], gold) == pytest.approx(-1.0)
    assert pearson(gold, gold) <= 1.0
    assert pearson([2.5] * 5, gold) == 0.0  # collapsed regression head
    assert pearson([float("nan"), 1, 2, 3, 4], gold) == 0.0
    x = np.random.default_rng(0).normal(size=200)
    y = x + np.random.default_rng(1).normal(size=200)
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])


def test_overall_score():
    assert overall_score(0.5, 0.8, 0.6) == pytest.approx((0.5 + 0.8 + 0.8) / 3)
    assert overall_score(0.5, None, -1.0) == pytest.approx(0.25)
    assert overall_score(None, None, None) is None
    assert TASK_METRIC == {"sst": "accuracy", "quora": "accuracy", "sts": "pearson"}


def test_prediction_files_round_trip_with_exact_format(tmp_path):
    ids = ["c3a1", "0b7f", "9e22"]
    sst = write_predictions(tmp_path, "sst", "dev", ids, np.array([4, 0, 2]))
    quora = write_predictions(tmp_path, "quora", "test", ids, torch.tensor([1.0, 0.0, 1.0]))
    sts = write_predictions(tmp_path, "sts", "dev", ids, [3.25, 0.0, np.float32(4.5)])
    assert sst.name == "sst-dev-output.csv" and quora.name == "para-test-output.csv"
    assert sst.read_text() == "id \t Predicted_Sentiment \nc3a1 , 4 \n0b7f , 0 \n9e22 , 2 \n"
    assert quora.read_text().splitlines()[0] == "id \t Predicted_Is_Paraphrase "
    assert sts.read_text().splitlines()[0] == "id \t Predicted_Similiary "
    assert read_predictions(sst) == [("c3a1", "4"), ("0b7f", "0"), ("9e22", "2")]
    assert read_predictions(quora) == [("c3a1", "1"), ("0b7f", "0"), ("9e22", "1")]
    assert [float(v) for _, v in read_predictions(sts)] == [3.25, 0.0, 4.5]
    assert len(PREDICTION_FILES) == 6 and set(HEADERS) == {"sst", "quora", "sts"}


def test_bad_predictions_are_refused(tmp_path):
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "quora", "dev", ["a"], [0.7])
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "sst", "dev", ["a"], [5])
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "sts", "dev", ["a"], [math.nan])
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "sst", "dev", ["a", "b"], [1])
    with pytest.raises(UserError):
        write_predictions(tmp_path, "sst", "train", ["a"], [1])
    assert list(tmp_path.iterdir()) == []
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,label\n")
    with pytest.raises(DataError):
        read_predictions(bad)


def test_submission_zip_holds_code_and_predictions_only(tmp_path):
    code = tmp_path / "project"
    for name, text in {
        "multitask.py": "print(1)\n",
        "minbert/model.py": "x = 1\n",
        "README.md": "# readme\n",
        "requirements.txt": "torch\n",
        "data/ids-sst-train.csv": "id,sentence\n",
        "data/prepare.py": "pass\n",
        "runs/exp1/notes.py": "pass\n",
        "minbert/__pycache__/model.cpython-312.pyc": "",
        ".venv/lib/site.py": "pass\n",
        "myenv/pyvenv.cfg": "home = /usr\n",
        "myenv/lib/thing.py": "pass\n",
    }.items():
        path = code / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    predictions = code / "predictions"
    write_predictions(predictions, "sst", "dev", ["a"], [1])
    write_predictions(predictions, "sts", "test", ["a"], [2.0])
    zip_path = make_submission(tmp_path / "submission.zip", code, predictions)
    with zipfile.ZipFile(zip_path) as archive:
        names = sorted(archive.namelist())
        assert archive.read("predictions/sst-dev-output.csv").startswith(b"id \t Predicted_Sentiment")
    assert names == [
        "README.md",
        "data/prepare.py",
        "minbert/model.py",
        "multitask.py",
        "predictions/sst-dev-output.csv",
        "predictions/sts-test-output.csv",
        "requirements.txt",
    ]


def test_submission_without_predictions_is_refused(tmp_path):
    (tmp_path / "a.py").write_text("")
    with pytest.raises(UserError):
        make_submission(tmp_path / "s.zip", tmp_path, tmp_path / "predictions")

import math

import numpy as np
import pytest
import torch

from minbert.errors import UserError
from tasks.course.formats import write_predictions
from tasks.metrics import accuracy, overall_score, pearson
from tasks.registry import REGISTRY
from tests.helpers import prediction_rows


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
    assert overall_score({"sst": 0.5, "quora": 0.8, "sts": 0.6}) == pytest.approx((0.5 + 0.8 + 0.8) / 3)
    assert overall_score({"sst": 0.5, "quora": None, "sts": -1.0}) == pytest.approx(0.25)
    assert overall_score({"sst": None}) is None
    assert overall_score({"sst": 0.4, "cfimdb": 0.9}) == pytest.approx(0.65)
    assert {t: REGISTRY[t].metric for t in ("sst", "quora", "sts", "cfimdb")} == \
        {"sst": "accuracy", "quora": "accuracy", "sts": "pearson", "cfimdb": "accuracy"}


def test_prediction_files_round_trip_with_exact_format(tmp_path):
    ids = ["c3a1", "0b7f", "9e22"]
    sst = write_predictions(tmp_path, "sst", "dev", ids, np.array([4, 0, 2]))
    quora = write_predictions(tmp_path, "quora", "test", ids, torch.tensor([1.0, 0.0, 1.0]))
    sts = write_predictions(tmp_path, "sts", "dev", ids, [3.25, 0.0, np.float32(4.5)])
    assert sst.name == "sst-dev-output.csv" and quora.name == "para-test-output.csv"
    assert sst.read_text() == "id \t Predicted_Sentiment \nc3a1 , 4 \n0b7f , 0 \n9e22 , 2 \n"
    assert quora.read_text() == "id \t Predicted_Is_Paraphrase \nc3a1 , 1.0 \n0b7f , 0.0 \n9e22 , 1.0 \n"
    assert sts.read_text().splitlines()[0] == "id \t Predicted_Similiary "
    assert prediction_rows(sst) == [("c3a1", "4"), ("0b7f", "0"), ("9e22", "2")]
    assert prediction_rows(quora) == [("c3a1", "1.0"), ("0b7f", "0.0"), ("9e22", "1.0")]
    assert [float(v) for _, v in prediction_rows(sts)] == [3.25, 0.0, 4.5]
    part1 = write_predictions(tmp_path, "cfimdb", "test", ids, [1, 0, 1], mode="finetune")
    assert part1.name == "finetune-cfimdb-test-out.csv"
    assert part1.read_text() == "id \t Predicted_Sentiment \nc3a1 , 1 \n0b7f , 0 \n9e22 , 1 \n"


def test_bad_predictions_are_refused(tmp_path):
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "quora", "dev", ["a"], [0.7])
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "sst", "dev", ["a"], [5])
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "cfimdb", "dev", ["a"], [2], mode="pretrain")
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "sts", "dev", ["a"], [math.nan])
    with pytest.raises(ValueError):
        write_predictions(tmp_path, "sst", "dev", ["a", "b"], [1])
    with pytest.raises(UserError):
        write_predictions(tmp_path, "sst", "train", ["a"], [1])
    assert list(tmp_path.iterdir()) == []

"""The learning-rate schedules are one table (tasks/schedules.py) that the options, validation and the run read:
a new schedule is one entry, as the cosine one registered here shows."""
import argparse
import dataclasses
import math

import pytest

from minbert import UserError
from tasks import schedules
from tasks.config import TrainConfig, validate
from tasks.schedules import SCHEDULES, Schedule, lr_lambda
from tasks.training.options import add_training_args


def _cosine(total_steps, warmup):
    warm = max(1, int(total_steps * warmup))
    return lambda step: (step + 1) / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) /
                                                                                  max(1, total_steps - warm)))


def test_the_course_schedules():
    assert [lr_lambda(100, 0.06, "constant")(s) for s in (0, 50, 99)] == [1.0, 1.0, 1.0]
    linear = lr_lambda(100, 0.06, "linear")
    assert [linear(s) for s in (0, 5, 6, 53, 100)] == [1 / 6, 1.0, 1.0, 0.5, 0.0]


def test_a_new_schedule_is_one_entry_in_the_table(monkeypatch):
    monkeypatch.setitem(SCHEDULES, "cosine", Schedule("cosine", "warm-up then half a cosine to 0", _cosine))
    parser = add_training_args(argparse.ArgumentParser())
    args = parser.parse_args(["--lr-schedule", "cosine"])
    config = TrainConfig.from_args(args)
    validate(config)
    assert "cosine: warm-up then half a cosine to 0" in parser.format_help().replace("\n", " ").replace("  ", " ")
    factor = lr_lambda(100, 0.1, config.lr_schedule)
    assert factor(9) == 1.0 and factor(55) == pytest.approx(0.5) and factor(100) == pytest.approx(0.0)


def test_an_unknown_schedule_is_refused_by_the_options_and_by_validation():
    with pytest.raises(SystemExit):
        add_training_args(argparse.ArgumentParser()).parse_args(["--lr-schedule", "cosine"])
    with pytest.raises(UserError, match="--lr-schedule must be one of linear, constant, got 'cosine'"):
        validate(dataclasses.replace(TrainConfig(), lr_schedule="cosine"))
    assert schedules.schedules_help().startswith("linear: ")

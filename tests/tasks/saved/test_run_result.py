"""metrics.json as a RunResult: a file written before the record (no schema) reads with its defaults, the
record round-trips, the run's dev score is the figure each kind of run hands in, a bad file is one line."""
import json

import pytest

from minbert import UserError
from tasks.saved.run_result import SCHEMA, RunResult

# The shape the training loop wrote before the record: no schema, no averages, no per-task choice.
OLD = {"final": {"sst": 0.48, "quora": 0.84, "sts": 0.86, "overall": 0.75},
       "best": {"sst": 0.50, "quora": 0.85, "sts": 0.86, "overall": 0.76}, "best_epoch": 1, "best_step": 1924,
       "history": [{"step": 962, "epoch": 0}, {"step": 1924, "epoch": 1}], "steps": 1924}


def test_a_metrics_file_without_schema_reads_with_the_defaults(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(OLD))
    result = RunResult.read(path)
    assert result.schema == SCHEMA and result.nonfinite_skipped == 0 and result.stop_reason is None
    assert (result.score("sst"), result.score("cfimdb")) == (0.50, None)
    assert result.score("overall", "final") == 0.75
    assert result.dev == 0.76 and result.scores("final") == OLD["final"]
    assert RunResult.from_json(result.to_json()) == result
    assert result.to_json() == {**OLD, "nonfinite_skipped": 0, "schema": SCHEMA}   # no None-valued keys


def test_the_dev_score_is_the_one_a_run_hands_in():
    one_task = RunResult.from_json({**OLD, "best": {"sst": 0.52, "overall": None}})   # classifier.py, Part 1
    assert one_task.dev == 0.52
    chosen = RunResult.from_json({**OLD, "per_task_best": {"overall": 0.77, "tasks": {}}})
    assert chosen.dev == 0.77 and chosen.to_json()["per_task_best"] == {"overall": 0.77, "tasks": {}}


@pytest.mark.parametrize("text", ["{", "[]", json.dumps({k: v for k, v in OLD.items() if k != "best"})])
def test_a_bad_metrics_file_is_one_line_naming_it(tmp_path, text):
    path = tmp_path / "metrics.json"
    path.write_text(text)
    with pytest.raises(UserError, match=rf"^{path}: not a run's metrics.json"):
        RunResult.read(path)

"""A trial's results line: old lines read as the current schema, and a line this code cannot read is one clear
error naming its file and line."""
import json
from pathlib import Path

import pytest

from minbert import UserError
from tasks.ablation.line import SCHEMA, TrialLine, read_lines
from tasks.ablation.results import load_results

ROOT = Path(__file__).resolve().parents[3]
OLD = ROOT / "tests" / "data" / "trial-lines-schema-1.jsonl"   # copied from docs/reproduction/results/*/first/
KEPT = [ROOT / "docs" / "reproduction" / "results", ROOT / "docs" / "reproduction" / "mini-20M" / "results"]


def test_schema_1_lines_read_as_the_current_schema_with_every_value_they_had():
    transfer, probe, comparison, reinit = read_lines(OLD)
    assert transfer.schema == SCHEMA and transfer.mode == "transfer" and transfer.ok
    assert (transfer.steps, transfer.total_steps, transfer.budget.trained_steps) == (400, 560, 400)   # two stages
    assert transfer.plateau.stopped and transfer.plateau.holdout_rows == {"sts": 18}
    assert transfer.info["intermediate_budget"]["trained_steps"] == 160
    assert (probe.steps, probe.budget, probe.plateau, probe.heldout_curve, probe.curves) == (0, None, None, [], {})
    assert probe.info["holdout_score"]["sst"] > 0 and probe.metrics["dev/sst"] == probe.dev["sst"]
    assert comparison.pairs and comparison.dev == {} and comparison.steps is None and comparison.total_steps is None
    assert comparison.metrics["svcca/0"] == comparison.curves["svcca"][0]
    assert reinit.group == "from=6" and reinit.heldout_curve[0]["step"] == reinit.budget.dev_curve[0]["step"]
    assert reinit.metrics["dev_best/sst"] == reinit.dev_best["sst"]


def test_every_kept_line_keeps_its_values_in_the_current_schema_and_reads_back_the_same():
    count = 0
    for path in (p for root in KEPT for p in sorted(root.glob("*/*/*.jsonl"))):
        raw = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
        lines = read_lines(path)
        assert len(lines) == len(raw), path
        for data, line in zip(raw, lines):
            written = line.to_json()
            if data.get("budget") is not None:   # a budget without the plateau rule: empty held-out curve
                data["budget"] = {"heldout_curve": [], **data["budget"]}
            assert {k: written[k] for k in data} == data and written["schema"] == SCHEMA, path
            assert TrialLine.from_json(json.loads(json.dumps(written))) == line
            count += 1
    assert count > 1000


def test_a_line_of_another_schema_or_malformed_is_one_line_naming_the_file_and_line(tmp_path):
    good = OLD.read_text(encoding="utf-8").splitlines()[1]
    path = tmp_path / "results.jsonl"
    path.write_text(good + "\n" + json.dumps({**json.loads(good), "schema": SCHEMA + 1}) + "\n" + good + "\n")
    with pytest.raises(UserError, match=rf"results.jsonl: line 2: a trial line of schema {SCHEMA + 1}"):
        read_lines(path)
    data = json.loads(good)
    del data["seed"]
    path.write_text(good + "\n\n" + json.dumps(data) + "\n")
    with pytest.raises(UserError, match=r"results.jsonl: line 3: not a trial line of schema \d+ \(.*seed"):
        read_lines(path)
    path.write_text(good + "\n" + json.dumps({**json.loads(good), "surprise": 1}) + "\n")
    with pytest.raises(UserError, match=r"results.jsonl: line 2: not a trial line .*surprise"):
        read_lines(path)


def test_a_torn_last_line_is_dropped_and_the_own_file_repaired_in_the_current_schema(tmp_path):
    old = OLD.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "results.jsonl"
    path.write_text(old[0] + "\n" + old[1][:200])   # a killed write
    [line] = load_results(path)
    assert line == read_lines(OLD)[0]
    assert [json.loads(text)["schema"] for text in path.read_text().splitlines()] == [SCHEMA]

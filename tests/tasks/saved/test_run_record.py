"""config.json as a RunRecord: a saved schema-1 record (no "schema" key) reads through upgrade_1, the writer's
schema round-trips, and a record of another schema or a malformed one is one line naming the file."""
import json

import pytest

from minbert import CheckpointError, UserError
from tasks.saved.model_card import model_card
from tasks.saved.run_record import SCHEMA, DataFile, RunRecord, read_run_record, upgrade_1
from tasks.saved.run_result import RunResult
from tests.helpers.records import SAVED_RECORD, saved_record

SST_DEV = "a186ce94577635fbe10beaaddd50f16cccf6c30973221cefdf90deed2a584bfe"   # its sst dev file's sha256


def test_a_saved_schema_1_record_reads_through_the_upgrade():
    assert "schema" not in saved_record()
    record = read_run_record(SAVED_RECORD)
    assert record.schema == SCHEMA == 2
    assert record.model.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert record.model.resolved_from == "embedded"
    assert record.model.lineage is None and record.model.architecture["num_hidden_layers"] == 6
    sst_dev = DataFile("/work/shared/data/cs224n/ids-sst-dev.csv", SST_DEV, 1101, 1101, skipped={})
    assert record.data_file("sst", "dev") == sst_dev
    assert record.data_file("quora", "test") is None and record.data_file("cfimdb", "dev") is None
    assert record.task_list == ("sst", "quora", "sts") and record.task_file is None
    assert (record.steps_per_epoch, record.total_steps, record.seed) == (962, 1924, 0)
    assert record.precision.used == "fp32" and record.max_length == {"sst": 128, "quora": 128, "sts": 128}
    assert record.arguments["epochs"] == 2 and record.arguments["pooling"] == "mean"
    assert record.commit == "624dd4f35a2204d9496c75c716db9cf7fe22c532"


def test_the_oldest_schema_1_records_lack_what_upgrade_1_makes_explicit(tmp_path):
    old = {k: v for k, v in saved_record().items() if k not in ("declared_tasks", "max_length", "precision")}
    record = RunRecord.from_json(old, tmp_path / "config.json")
    assert (record.declared_tasks, record.max_length, record.precision) == ({}, None, None)
    assert upgrade_1(saved_record())["declared_tasks"] == {} and upgrade_1(saved_record())["schema"] == SCHEMA


def test_a_record_writes_back_what_it_read():
    assert RunRecord.from_json(saved_record(), SAVED_RECORD).to_json() == {**saved_record(), "schema": SCHEMA}
    oldest = {k: v for k, v in saved_record().items() if k not in ("lr", "cuda_graphs", "sampler")}
    assert RunRecord.from_json(oldest, SAVED_RECORD).to_json() == {**oldest, "schema": SCHEMA, "lr": None,
                                                                   "cuda_graphs": None, "sampler": None}


def test_a_schema_2_record_round_trips_to_what_its_schema_1_twin_reads(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**saved_record(), "schema": SCHEMA}))
    assert read_run_record(path) == read_run_record(SAVED_RECORD)


def test_the_model_card_of_a_saved_record_says_what_it_recorded():
    result = RunResult(final={"sst": 0.4, "overall": 0.5}, best={"sst": 0.5, "overall": 0.6}, best_epoch=1,
                       best_step=962, history=[], steps=1924)
    card = model_card(read_run_record(SAVED_RECORD), result, {"sst": {"head": "classify"}}, False)
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card
    assert "- weights sha256: `53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db`" in card
    assert f"| sst | dev | `ids-sst-dev.csv` | `{SST_DEV}` | 1101 of 1101 |" in card
    assert "- precision: fp32 (asked for: auto; native bf16: False)" in card
    assert "- minbert commit: 624dd4f35a2204d9496c75c716db9cf7fe22c532\n" in card
    assert "| sst | classify | accuracy | 0.5000 |" in card
    assert "| overall | | mean on [0, 1] | 0.6000 |" in card
    assert "Best evaluation: epoch 1, step 962 of 1924." in card


@pytest.mark.parametrize("change, says", [
    (lambda r: {**r, "schema": 3}, "a run record of schema 3, this code reads schemas 1 to 2"),
    (lambda r: {k: v for k, v in r.items() if k != "arguments"}, "not a run's record (no 'arguments')"),
    (lambda r: {**r, "data": {"sst": {"dev": {"path": "x"}}}}, "not a run's record (no 'sha256')"),
    (lambda r: [r], "not a run's record (not a JSON object)"),
])
def test_a_bad_record_is_one_line_naming_the_file(tmp_path, change, says):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(change(saved_record())))
    for error in (UserError, CheckpointError):
        with pytest.raises(error) as raised:
            read_run_record(path, error)
        assert str(raised.value) == f"{path}: {says}"

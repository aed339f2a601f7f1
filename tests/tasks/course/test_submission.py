"""The course-level folder's sources.json, read as typed records: older files, a later publication, a bad
entry."""
import json
import shutil
from pathlib import Path

import pytest

from minbert.errors import UserError
from tasks.course.submission import SOURCES, SOURCES_SCHEMA, check_predictions, publish_predictions

# The files the saved sources.json (written by the code of b768362, the oldest entry by hand as 2026-11-24's
# code
# wrote them) records, with the bytes its sha256s are of.
FILES = {"sts-dev-output.csv": "id,Predicted_Similiary\na1,3.25\n",
         "para-dev-output.csv": "id,Predicted_Is_Paraphrase\nb1,1.0\n",
         "sst-dev-output.csv": "id,Predicted_Sentiment\nc1,4\n"}


def saved_folder(tmp_path) -> Path:
    folder = tmp_path / "predictions"
    folder.mkdir()
    shutil.copy(Path(__file__).parents[2] / "data" / "sources-schema-0.json", folder / SOURCES)
    for name, text in FILES.items():
        (folder / name).write_text(text)
    return folder


def test_a_sources_json_without_a_schema_is_judged_as_before(tmp_path):
    manifest, table, _, refusals = check_predictions(saved_folder(tmp_path))
    sts = manifest["files"]["sts-dev-output.csv"]
    assert sts == {"run": "/tmp/oldpub/runs/sts-run", "model": "bert-base-uncased", "model_lineage": None,
                   "model_sha256": "ab" * 32, "steps": 20, "max_steps": None, "data_fraction": 1.0,
                   "dev": 0.905,
                   "date": "2026-11-28T22:12:19+00:00", "allowed": []}
    # The oldest entry (no provenance, its run gone) and one of a run without config.json: unknown origin.
    assert [line.split(":")[0] for line in refusals] == ["predictions/para-dev-output.csv",
                                                         "predictions/sst-dev-output.csv"]
    assert all("unknown-origin" in line for line in refusals)
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["sts-dev-output.csv"][1:] == ["sts-run", "bert-base-uncased", "20", "0.9050",
                                              "2026-11-28T22:12",
                                              "ok"]
    assert rows["sst-dev-output.csv"][1:4] == ["2026-11-24-sst", "?", "?"] and "2026-11-24T10:00" in rows[
        "sst-dev-output.csv"]


def test_a_publication_rewrites_older_entries_as_schema_1_keeping_every_key(tmp_path):
    folder = saved_folder(tmp_path)
    old = json.loads((folder / SOURCES).read_text())
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "predictions" / "sts-test-output.csv").write_text("id,Predicted_Similiary\nd1,1.5\n")
    publish_predictions({str(run): [str(run / "predictions" / "sts-test-output.csv")]}, folder, ["x.py"],
                        always=True)
    new = json.loads((folder / SOURCES).read_text())
    assert {entry["schema"] for entry in new.values()} == {SOURCES_SCHEMA}
    for name, entry in old.items():  # the oldest said when it was published as "date"
        assert new[name] == {"published": entry["date"], **entry, "schema": SOURCES_SCHEMA}
    assert new["sts-test-output.csv"]["command"] == ["x.py"] and new["sts-test-output.csv"]["run"] == str(run)
    assert check_predictions(folder)[0]["files"]["sts-dev-output.csv"]["model"] == "bert-base-uncased"


@pytest.mark.parametrize("entry", [{"run": "r"}, {"schema": SOURCES_SCHEMA + 1}, ["not", "a", "record"]])
def test_an_entry_that_is_not_a_record_is_one_line_naming_the_file(tmp_path, entry):
    folder = saved_folder(tmp_path)
    sources = json.loads((folder / SOURCES).read_text())
    (folder / SOURCES).write_text(json.dumps({**sources, "sst-dev-output.csv": entry}))
    with pytest.raises(UserError, match=f"{folder / SOURCES}: the entry of 'sst-dev-output.csv'") as raised:
        check_predictions(folder)
    assert "\n" not in str(raised.value)

"""The hand-in: provenance of the prediction files, a zip that refuses what the course would not accept,
no silent replacement in predictions/, and the course's own checks and command lines against this project."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import multitask_classifier
import predict
import prepare_submit
import train_multitask
from tasks.course.formats import write_predictions
from tasks.course.provenance import lineage_text, run_problems
from tasks.course.submission import MANIFEST, SOURCES, publish_predictions
from tests.helpers import run_cli

REPO = Path(__file__).resolve().parents[3]
CHECKS = Path(os.environ.get("MINBERT_CHECKS_DIR", REPO.parent / "shared" / "data" / "cs224n-checks"))
PART2 = {"sst-dev-output.csv", "sst-test-output.csv", "para-dev-output.csv", "sts-dev-output.csv",
         "sts-test-output.csv"}  # the small data's quora has no test file


@pytest.fixture
def tiny_run(tiny_model, small_data_dir, tmp_path):
    """Run train_multitask.py on the tiny model and the small data; returns (exit status, stdout, stderr)."""
    def run(name, *extra, main=train_multitask.main):
        return run_cli(main, ["--device", "cpu", "--model", str(tiny_model), "--data-dir", str(small_data_dir),
                              "--batch-size", "16", "--eval-batch-size", "64", "--precision", "fp32", "--epochs", "1",
                              "--out", str(tmp_path / name), *extra])
    return run


def course_folder(tmp_path) -> Path:
    return tmp_path / "course-predictions"  # MINBERT_PREDICTIONS_DIR (conftest)


def test_a_smoke_run_does_not_publish_and_the_zip_refuses_it_unless_allowed(tiny_run, tmp_path):
    code, out, err = tiny_run("smoke", "--max-steps", "1")
    assert code == 0, err
    assert not course_folder(tmp_path).exists()
    assert "did not publish" in out and "--max-steps 1" in out and "--predictions-dir" in out
    # named on the command line, the folder takes even a smoke run; its provenance says so
    folder = tmp_path / "named"
    code, out, err = tiny_run("smoke2", "--max-steps", "1", "--predictions-dir", str(folder))
    assert code == 0, err
    assert {p.name for p in folder.glob("*.csv")} == PART2
    zip_path = tmp_path / "s.zip"
    code, out, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--out", str(zip_path)])
    assert code == 2 and not zip_path.exists()
    lines = err.strip().splitlines()
    assert any(line.startswith("error: predictions/sst-dev-output.csv: a smoke run: --max-steps 1")
               for line in lines)
    assert sum("other-model" in line for line in lines) == len(PART2)  # the tiny model is not bert-base
    assert "sts-test-output.csv" in out and "refused: smoke,other-model" in out  # the table
    code, out, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--out", str(zip_path),
                                                   "--allow", "smoke,other-model"])
    assert code == 0, err
    with zipfile.ZipFile(zip_path) as archive:
        manifest = json.loads(archive.read(MANIFEST))
        assert {f"predictions/{name}" for name in PART2} <= set(archive.namelist())
    record = manifest["files"]["sst-dev-output.csv"]
    assert record["run"] == str((tmp_path / "smoke2").resolve()) and record["steps"] == 1
    assert record["allowed"] == ["smoke", "other-model"] and record["dev"] is not None
    assert manifest["allowed"] == ["other-model", "smoke"]


def test_a_complete_run_survives_a_smoke_run_and_a_second_one_keeps_the_first(tiny_run, tmp_path):
    code, out, err = tiny_run("first")
    assert code == 0, err
    folder = course_folder(tmp_path)
    first = {p.name: p.read_bytes() for p in folder.glob("*.csv")}
    assert set(first) == PART2 and "copied 5 prediction files" in out
    code, out, err = tiny_run("smoke", "--max-steps", "1", "--seed", "3")
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in folder.glob("*.csv")} == first
    code, out, err = tiny_run("second", "--seed", "1")
    assert code == 0, err
    sources = json.loads((folder / SOURCES).read_text())
    assert sources["sts-dev-output.csv"]["run"] == str((tmp_path / "second").resolve())
    kept = [line for line in out.splitlines() if line.startswith("replaced ")]
    assert kept and str((tmp_path / "first").resolve()) in kept[0]
    archive = next((folder / "replaced").iterdir())
    assert (archive / "sts-dev-output.csv").read_bytes() == first["sts-dev-output.csv"]  # STS floats differ
    assert json.loads((archive / SOURCES).read_text())["sts-dev-output.csv"]["run"] == \
        str((tmp_path / "first").resolve())


def test_submission_on_the_training_command_refuses_as_prepare_submit_does(tiny_run, tmp_path):
    code, out, err = tiny_run("run", "--submission")
    assert code == 2 and "the run is complete in" in err and "no submission zip was written" in err
    assert "other-model" in err and (tmp_path / "run" / "metrics.json").exists()
    assert {p.name for p in course_folder(tmp_path).glob("*.csv")} == PART2  # published before the zip


def test_a_run_recorded_before_the_schema_number_still_predicts_and_hands_in(tiny_run, tmp_path):
    """A run folder as main wrote it before config.json carried "schema" (schema 1, read through
    run_record.upgrade_1): predict.py rebuilds the run and writes the same files, and the hand-in zips
    them."""
    folder = tmp_path / "named"
    code, out, err = tiny_run("old", "--predictions-dir", str(folder))
    assert code == 0, err
    config = tmp_path / "old" / "config.json"
    record = json.loads(config.read_text())
    assert record.pop("schema") == 2
    config.write_text(json.dumps(record, indent=2))
    again = tmp_path / "again"
    code, out, err = run_cli(predict.main, [str(tmp_path / "old"), "--split", "all", "--out", str(again)])
    assert code == 0, err
    for name in PART2:
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name
    zip_path = tmp_path / "s.zip"
    code, out, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--out", str(zip_path),
                                                   "--allow", "other-model"])
    assert code == 0, err
    with zipfile.ZipFile(zip_path) as archive:
        manifest = json.loads(archive.read(MANIFEST))
    assert manifest["files"]["sst-dev-output.csv"]["run"] == str((tmp_path / "old").resolve())


def test_mixed_part1_spellings_and_unknown_files_are_refused(tmp_path):
    folder = tmp_path / "preds"
    for mode in ("pretrain", "full-model"):
        write_predictions(folder, "sst", "dev", ["a"], [1], mode=mode)
    code, _, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--out", str(tmp_path / "s.zip")])
    assert code == 2 and not (tmp_path / "s.zip").exists()
    assert "Part 1 files of both spellings: full-model-sst-dev-out.csv, pretrain-sst-dev-out.csv" in err
    assert err.count("not written by a run of this project") == 2
    code, _, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--out", str(tmp_path / "s.zip"),
                                                 "--allow", "mixed-spellings,unknown-origin"])
    assert code == 0, err
    code, _, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--allow", "nope"])
    assert code == 2 and "--allow: unknown kind 'nope'" in err


def test_the_course_model_rule(tmp_path):
    complete = {"run": "r", "model": "bert-base-uncased", "model_resolved_from": "hf-cache", "steps": 10,
                "total_steps": 10, "planned_steps": 10, "max_steps": None, "data_fraction": 1.0, "finished": True}
    assert run_problems(complete) == []
    kinds = [k for k, _ in run_problems({**complete, "model": "sentence-transformers/all-MiniLM-L6-v2",
                                         "model_resolved_from": "embedded"})]
    assert kinds == ["fallback-model"]
    kinds = [k for k, _ in run_problems({**complete, "data_fraction": 0.5, "steps": 4, "max_steps": 20})]
    assert kinds == ["partial-data", "interrupted"]  # --max-steps beyond the planned steps is no smoke run
    assert [k for k, _ in run_problems(None)] == ["unknown-origin"]


def test_bert_base_continued_on_the_course_training_sets_is_the_course_model():
    """Task-adaptive pretraining (pretrain.py --from bert-base-uncased --tasks ...) then fine-tuning hands in as the
    course's model; pretraining on other text, from scratch, or from another model is refused as other-model."""
    tasks = [{"kind": "task", "name": t, "path": f"/d/{t}-train.csv", "sha256": "0"} for t in ("sst", "quora", "sts")]
    base = {"name": "bert-base-uncased", "resolved_from": "hf-cache", "weights_sha256": "1"}
    run = {"run": "r", "model": "runs/tapt/model", "model_resolved_from": "local", "steps": 10, "total_steps": 10,
           "planned_steps": 10, "max_steps": None, "data_fraction": 1.0, "finished": True,
           "model_lineage": {"from": base, "corpus": tasks}}
    assert run_problems(run) == []
    assert lineage_text(run["model_lineage"]) == "bert-base-uncased+MLM(sst,quora,sts)"
    twice = {"from": {"name": "runs/tapt/model", "resolved_from": "local"}, "from_pretraining": run["model_lineage"],
             "corpus": tasks[:1]}
    assert run_problems({**run, "model_lineage": twice}) == []
    wiki = {"kind": "file", "name": "wiki.txt", "path": "wiki.txt"}
    refused = {"text other than": {"from": base, "corpus": tasks + [wiki]},
               "from scratch": {"init_config": "mini", "corpus": tasks},
               "all-MiniLM": {"from": {"name": "sentence-transformers/all-MiniLM-L6-v2", "resolved_from": "embedded"},
                              "corpus": tasks},
               "": None}
    for why, lineage in refused.items():
        problems = run_problems({**run, "model_lineage": lineage})
        assert [k for k, _ in problems] == ["other-model"] and why in problems[0][1], (why, problems)
        assert lineage_text(lineage) is None


def test_a_publication_keeps_every_replaced_file(tmp_path):
    folder = tmp_path / "preds"
    for run, value in (("a", 1), ("b", 2), ("c", 3)):
        path = write_predictions(tmp_path / run, "sst", "dev", ["x"], [value])
        publish_predictions({str(tmp_path / run): [path]}, folder, ["t"], always=True)
    kept = sorted((folder / "replaced").rglob("sst-dev-output.csv"))
    assert [p.read_text().splitlines()[1] for p in kept] == ["x , 1 ", "x , 2 "]  # none lost, even within a second


# ------------------------------------------------------------------------- the course's command lines


def test_multitask_classifier_takes_the_course_flags_and_writes_where_out_says(tiny_model, tmp_path, small_data_dir):
    outs = tmp_path / "course-outs"
    common = ["--device", "cpu", "--model", str(tiny_model), "--precision", "fp32", "--epochs", "1", "--max-steps", "2",
              "--lr", "1e-3", "--seed", "5", "--eval-batch-size", "64"]
    code, out, err = run_cli(multitask_classifier.main, common + [
        "--fine-tune-mode", "full-model", "--batch_size", "16", "--hidden_dropout_prob", "0.2",
        "--out", str(tmp_path / "course"), *[a for t, f in (("sst", "ids-sst"), ("para", "quora"), ("sts", "sts"))
                                             for a in (f"--{t}_train", str(small_data_dir / f"{f}-train.csv"))],
        "--sst_dev_out", str(outs / "sst-dev-output.csv"), "--sts_test_out", str(outs / "my-sts.csv"),
        "--para_test_out", str(outs / "para-test-output.csv")])  # the small data has no Quora test file
    assert code == 0, err
    assert "wrote 2 prediction files where --*_out said" in out
    assert f"not written: {outs / 'para-test-output.csv'} (this run wrote no para-test-output.csv" in out
    code, _, err = run_cli(train_multitask.main, common + [
        "--batch-size", "16", "--head-dropout", "0.2", "--data-dir", str(small_data_dir),
        "--out", str(tmp_path / "ours")])
    assert code == 0, err
    ours = tmp_path / "ours" / "predictions"
    assert (outs / "sst-dev-output.csv").read_bytes() == (ours / "sst-dev-output.csv").read_bytes()
    assert (outs / "my-sts.csv").read_bytes() == (ours / "sts-test-output.csv").read_bytes()
    config = json.loads((tmp_path / "course" / "config.json").read_text())["arguments"]
    assert (config["batch_size"], config["head_dropout"], config["freeze_until"]) == (16, 0.2, 0)
    assert config["data_dir"] == str(small_data_dir)
    sources = json.loads((outs / SOURCES).read_text())
    assert [k for k, _ in run_problems(sources["my-sts.csv"])] == ["smoke", "other-model"]


def test_multitask_classifier_default_mode_and_bad_flags(tmp_path, small_data_dir):
    argv, outputs = multitask_classifier.translate(["--option", "pretrain", "--use_gpu"])
    assert argv == ["--freeze-until", "all", "--device", "cuda"] and outputs == ()
    assert multitask_classifier.translate([])[0] == ["--freeze-until", "all"]  # the 2024 starter's default
    code, _, err = run_cli(multitask_classifier.main, ["--sst_train", str(tmp_path / "mine.csv")])
    assert code == 2 and "--sst_train" in err and "ids-sst-train.csv" in err
    code, _, err = run_cli(multitask_classifier.main, ["--batch_size", "8", "--batch-size", "8"])
    assert code == 2 and "the same option" in err


def test_a_complete_part1_run_publishes_each_file_with_its_tasks_run(part1_data, tiny_model, tmp_path):
    import classifier
    out = tmp_path / "part1"
    code, stdout, err = run_cli(classifier.main, ["--option", "finetune", "--device", "cpu", "--model",
                                                  str(tiny_model), "--data-dir", str(part1_data), "--epochs", "1",
                                                  "--batch_size", "8",
                                                  "--precision", "fp32", "--out", str(out)])
    assert code == 0, err
    assert "copied 4 prediction files" in stdout
    sources = json.loads((course_folder(tmp_path) / SOURCES).read_text())
    for task in ("sst", "cfimdb"):
        record = sources[f"finetune-{task}-dev-out.csv"]
        assert record["run"] == str((out / task).resolve()) and record["steps"] == record["total_steps"] > 0
        assert [k for k, _ in run_problems(record)] == ["other-model"]


def test_classifier_takes_2023s_out_flags_and_the_optimizer(tmp_path):
    import classifier
    args = classifier.parse_args(["--dev_out", "x.txt", "--test_out", "y.txt", "--optimizer", "minbert",
                                  "--out", str(tmp_path / "p1")])
    assert args.prefix == "last-linear-layer" and args.mode == "pretrain"  # neither flag: the 2024 default
    assert classifier.task_config(args, "sst").optimizer == "minbert"
    assert classifier.parse_args(["--option", "finetune", "--out", str(tmp_path / "p2")]).prefix == "finetune"


# ---------------------------------------------------------------------------------- the course's checks


def test_the_course_optimizer_test_passes_through_optimizer_py(tmp_path):
    if not (CHECKS / "optimizer_test.py").exists():
        pytest.skip(f"the course's checks not found in {CHECKS} (set MINBERT_CHECKS_DIR)")
    for name in ("optimizer_test.py", "optimizer_test.npy"):
        shutil.copy(CHECKS / name, tmp_path / name)  # unchanged, as a student drops them into the project
    proc = subprocess.run([sys.executable, "optimizer_test.py"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Optimizer test passed!" in proc.stdout


def test_bert_py_reads_as_the_course_sanity_check_and_matches_transformers(pretrained):
    """sanity_check.py's own steps, on the embedded checkpoint (bert-base cannot be had here), held to
    transformers instead of the course's saved bert-base outputs."""
    transformers = pytest.importorskip("transformers")
    from bert import BertModel
    sent_ids = torch.tensor([[101, 7592, 2088, 102, 0, 0, 0, 0],
                             [101, 7592, 15756, 2897, 2005, 17953, 2361, 102]])
    att_mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    bert = BertModel.from_pretrained("minilm")
    assert not bert.training
    outputs = bert(sent_ids, att_mask)
    reference = transformers.BertModel.from_pretrained(pretrained.source.folder, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = reference(input_ids=sent_ids, attention_mask=att_mask)
    expected = {"last_hidden_state": expected.last_hidden_state, "pooler_output": expected.pooler_output}
    mask = att_mask.unsqueeze(-1)
    outputs["last_hidden_state"] = outputs["last_hidden_state"] * mask
    expected["last_hidden_state"] = expected["last_hidden_state"] * mask
    for k in ["last_hidden_state", "pooler_output"]:
        assert outputs[k].dtype == torch.float32
        assert torch.allclose(outputs[k], expected[k], atol=1e-5, rtol=0), (outputs[k] - expected[k]).abs().max()

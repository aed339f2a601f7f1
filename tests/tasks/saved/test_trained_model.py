"""A finished run is something people can use: predict.py on it, its model/ folder in transformers and
sentence-transformers, a new run started from it, and bad run folders refused in one line (tiny model, seconds)."""
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

import classifier
import minbert
import predict
import train_multitask
from minbert.loading import sha256_of
from tasks.config import TrainConfig
from tasks.heads import mean_pool
from tasks.inputs import prepare
from tasks.saved.checkpoint_files import BEST, load_checkpoint
from tasks.saved.run_record import SCHEMA, read_run_record
from tasks.saved.saved_run import load_trained
from tests.helpers import run_cli
from tests.helpers.runs import TINY

SENTENCES = ["A man is playing a guitar.", "The cat sat on the mat, slowly!", "Short.",
             "Is this the same question as that one?"]


def _train(tiny_model, data, out, *extra):
    argv = ["--model", str(tiny_model), "--data-dir", str(data), "--out", str(out), "--precision", "fp32",
            "--batch-size", "8", "--eval-batch-size", "16", "--max-steps", "3", *extra]
    code, _, err = run_cli(train_multitask.main, argv)
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def run_dir(tiny_model, small_data_dir, tmp_path_factory):
    """A finished cross-encoder run of the three tasks."""
    return _train(tiny_model, small_data_dir, tmp_path_factory.mktemp("cross") / "run")


@pytest.fixture(scope="module")
def siamese_dir(tiny_model, small_data_dir, tmp_path_factory):
    return _train(tiny_model, small_data_dir, tmp_path_factory.mktemp("siamese") / "run", "--pair-mode", "siamese",
                  "--tasks", "quora,sts")


def _same_files(expected: Path, actual: Path) -> list:
    names = sorted(p.name for p in expected.glob("*.csv"))
    assert names, f"no prediction files in {expected}"
    for name in names:
        assert (actual / name).read_bytes() == (expected / name).read_bytes(), name
    return names


def test_a_run_writes_the_record_its_readers_read(run_dir):
    """config.json says its schema, and reads back as the run it was
    (tests/tasks/saved/test_run_record.py)."""
    assert json.loads((run_dir / "config.json").read_text())["schema"] == SCHEMA
    record = read_run_record(run_dir / "config.json")
    assert record.task_list == ("sst", "quora",
                                "sts") and record.model.weights_sha256 and record.precision.used
    assert record.arguments["max_steps"] == 3 and record.data_file("sst", "dev").n_used > 0


# -------------------------------------------------------------------------------------------- predict.py


def test_predict_reproduces_the_runs_prediction_files_byte_for_byte(run_dir, tmp_path):
    code, out, err = run_cli(predict.main, ["--device", "cpu", str(run_dir), "--out", str(tmp_path)])
    assert code == 0, err
    names = _same_files(run_dir / "predictions", tmp_path)
    assert {"sst-dev-output.csv", "sst-test-output.csv", "sts-dev-output.csv", "para-dev-output.csv"} <= set(names)
    best = json.loads((run_dir / "metrics.json").read_text())["best"]
    assert f"sst={best['sst']:.4f}" in out and f"sts={best['sts']:.4f}" in out  # the run's own dev metrics


def test_a_run_predicts_each_dev_file_once(tiny_model, small_data_dir, tmp_path, monkeypatch):
    """The finished run's dev files are its best evaluation's predictions, not made a second time
    (test_predict_reproduces_the_runs_prediction_files_byte_for_byte holds them to predicting again)."""
    import tasks.evaluation
    calls = []
    real = tasks.evaluation.predict

    def counting(model, split, *args, **kwargs):
        calls.append((split.task, tuple(split.ids)))
        return real(model, split, *args, **kwargs)

    monkeypatch.setattr(tasks.evaluation, "predict", counting)
    out = _train(tiny_model, small_data_dir, tmp_path / "run")
    config = TrainConfig(model=str(tiny_model), data_dir=str(small_data_dir), device="cpu")
    data = prepare(config).data
    for task in ("sst", "quora", "sts"):
        assert calls.count((task, tuple(data[task]["dev"].ids))) == 1, task
    assert (out / "predictions" / "sst-dev-output.csv").exists()


def test_predict_reproduces_a_part1_runs_files(tiny_model, part1_data, tmp_path):
    out = tmp_path / "part1"
    code, _, err = run_cli(classifier.main, ["--device", "cpu", "--option", "finetune", "--model", str(tiny_model),
                                             "--data-dir",
                                             str(part1_data), "--out", str(out), "--precision", "fp32",
                                             "--max-steps", "2", "--epochs", "1"])
    assert code == 0, err
    for task in ("sst", "cfimdb"):
        assert json.loads((out / task / "model" / "tasks.json").read_text())["options"]["prediction_mode"] == \
            "finetune"
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(out), "--out", str(tmp_path / "again")])
    assert code == 0, err
    assert _same_files(out / "predictions", tmp_path / "again") == \
        ["finetune-cfimdb-dev-out.csv", "finetune-cfimdb-test-out.csv", "finetune-sst-dev-out.csv",
         "finetune-sst-test-out.csv"]


def test_input_file_gives_one_line_per_row_agreeing_with_the_dev_predictions(run_dir, small_data_dir, tmp_path):
    rows = (small_data_dir / "ids-sst-dev.csv").read_text(encoding="utf-8").splitlines()[:6]
    mine = tmp_path / "mine.tsv"
    mine.write_text("\n".join(rows) + "\n", encoding="utf-8")  # the course's own columns: id, sentence
    code, out, err = run_cli(predict.main, ["--device", "cpu", str(run_dir), "--input", str(mine), "--task", "sst"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "id\tprediction\tp_0\tp_1\tp_2\tp_3\tp_4" and len(lines) == len(rows)  # header + 5 rows
    course = dict(line.split(" , ") for line in (run_dir / "predictions" / "sst-dev-output.csv").read_text()
                  .splitlines()[1:])
    for line in lines[1:]:
        example_id, label, *probabilities = line.split("\t")
        assert course[example_id.lower()].strip() == label
        p = [float(x) for x in probabilities]
        assert abs(sum(p) - 1) < 1e-3 and max(range(5), key=p.__getitem__) == int(label)


def test_stdin_and_named_columns(run_dir, monkeypatch):
    text = "first,second\n" + "".join(f"{a},{b}\n" for a, b in zip(SENTENCES, reversed(SENTENCES)))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, err = run_cli(predict.main, ["--device", "cpu", str(run_dir), "--input", "-", "--task", "sts",
                                            "--columns", "first,second"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "id\tscore" and [line.split("\t")[0] for line in lines[1:]] == ["2", "3", "4", "5"]
    assert all(0 <= float(line.split("\t")[1]) <= 5 for line in lines[1:])


@pytest.mark.parametrize("argv, needle", [
    (["--input", "{missing}", "--task", "sst"], "no-such.csv: cannot read it"),
    (["--input", "{bad}", "--task", "quora"], "bad.csv: line 1: no column 'sentence1'"),
    (["--input", "{bad}", "--task", "cfimdb"], "has no cfimdb head"),
    (["--input", "{bad}"], "--input and --task go together"),
])
def test_bad_input_is_one_line_exit_2(run_dir, tmp_path, argv, needle):
    (tmp_path / "bad.csv").write_text("id,sentence\n1,fine\n")
    argv = [a.format(missing=tmp_path / "no-such.csv", bad=tmp_path / "bad.csv") for a in argv]
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(run_dir), *argv])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


# ------------------------------------------------------------------------------------- the model folder


def test_transformers_reads_the_model_folder_with_equal_hidden_states(run_dir):
    from transformers import AutoTokenizer, BertModel
    folder = run_dir / "model"
    theirs, info = BertModel.from_pretrained(folder, output_loading_info=True, attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    ours = load_trained(run_dir, torch.device("cpu"))  # best.pt's weights, in minBERT
    batch = ours.tokenizer(SENTENCES)
    hf_batch = AutoTokenizer.from_pretrained(folder)(SENTENCES, padding=True, return_tensors="pt")
    assert torch.equal(hf_batch["input_ids"], batch["input_ids"])
    with torch.no_grad():
        expected = theirs.eval()(**hf_batch)
        got = ours.model.encoder(**batch)
    real = batch["attention_mask"].bool()
    assert (got.last_hidden_state[real] - expected.last_hidden_state[real]).abs().max() < 1e-5
    assert (got.pooler_output - expected.pooler_output).abs().max() < 1e-5


def test_a_new_run_starts_from_exactly_the_exported_weights(run_dir, small_data_dir, tmp_path):
    folder = run_dir / "model"
    best = load_checkpoint(run_dir / BEST)["model"]
    inputs = prepare(TrainConfig(model=str(folder), data_dir=str(small_data_dir), tasks="sst", device="cpu"))
    loaded = inputs.encoder.state_dict()
    assert loaded.keys() == {k[len("encoder."):] for k in best if k.startswith("encoder.")}
    assert all(torch.equal(loaded[k], best[f"encoder.{k}"]) for k in loaded)

    second = tmp_path / "second"
    code, _, err = run_cli(train_multitask.main, ["--device", "cpu", "--model", str(folder), "--data-dir",
                                                  str(small_data_dir), "--out",
                                                  str(second), "--precision", "fp32", "--tasks", "sst",
                                                  "--batch-size", "8", "--max-steps", "1"])
    assert code == 0, err
    source = json.loads((second / "config.json").read_text())["model"]
    assert source["weights_sha256"] == sha256_of(folder / "model.safetensors")
    card = (second / "model" / "README.md").read_text()
    assert f"base_model: {folder}" in card and source["weights_sha256"] in card


def test_sentence_transformers_loads_a_siamese_run_with_equal_embeddings(siamese_dir):
    from sentence_transformers import SentenceTransformer
    folder = siamese_dir / "model"
    assert json.loads((folder / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"]
    theirs = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    ours = load_trained(siamese_dir, torch.device("cpu"))
    batch = ours.tokenizer(SENTENCES)
    with torch.no_grad():
        expected = mean_pool(ours.model.encoder(**batch).last_hidden_state, batch["attention_mask"])
    assert (theirs - expected).abs().max() < 1e-5


def test_the_model_folder_alone_predicts_as_the_run(run_dir, tmp_path):
    folder = tmp_path / "shared-model"
    shutil.copytree(run_dir / "model", folder)  # handed on without the run folder
    data_dir = json.loads((run_dir / "config.json").read_text())["arguments"]["data_dir"]
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(folder), "--out", str(tmp_path / "out"),
                                          "--data-dir", str(data_dir)])
    assert code == 0, err
    _same_files(run_dir / "predictions", tmp_path / "out")


# ------------------------------------------------------------------------------------ bad run folders


def _copy(run_dir, tmp_path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(run_dir, target)
    return target


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_missing_or_truncated_weights_exit_2_naming_the_file(run_dir, small_data_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    _truncate(copy / BEST)
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(copy), "--out", str(tmp_path / "p")])
    assert code == 2 and f"{copy / BEST}: truncated or corrupted" in err, err

    (copy / BEST).unlink()
    shutil.rmtree(copy / "model")
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(copy), "--out", str(tmp_path / "p")])
    assert code == 2 and f"{copy / BEST}: no weights" in err, err

    copy = _copy(run_dir, tmp_path / "again")
    weights = copy / "model" / "model.safetensors"
    _truncate(weights)
    code, _, err = run_cli(train_multitask.main, ["--device", "cpu", "--model", str(copy / "model"), "--data-dir",
                                                  str(small_data_dir),
                                                  "--out", str(tmp_path / "new")])
    assert code == 2 and f"{weights}: cannot read weights" in err, err
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(copy / "model"), "--out", str(tmp_path / "p")])
    assert code == 2 and f"{weights}: cannot read weights" in err, err
    weights.unlink()
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(copy / "model"), "--out", str(tmp_path / "p")])
    assert code == 2 and "no weights file (model.safetensors" in err, err


def test_a_checkpoint_that_does_not_match_its_config_is_exit_2(run_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    record = json.loads((copy / "config.json").read_text())
    record["model"]["config"]["hidden_size"] = 64  # another architecture than best.pt's
    (copy / "config.json").write_text(json.dumps(record))
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(copy), "--out", str(tmp_path / "p")])
    assert code == 2 and f"{copy / BEST}: does not match the run's config.json" in err, err
    assert len(err.strip().splitlines()) == 1


def test_export_names_are_transformers_bertmodel_keys(run_dir):
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel
    config = BertConfig.from_pretrained(run_dir / "model")
    expected = set(BertModel(config).state_dict()) - {"embeddings.position_ids"}
    assert set(load_file(str(run_dir / "model" / "model.safetensors"))) == expected
    assert minbert.from_pretrained(str(run_dir / "model")).config.num_hidden_layers == TINY["num_hidden_layers"]

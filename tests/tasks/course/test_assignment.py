"""The course assignment end to end: the task registry, Part 1 (classifier.py), the exact prediction
files of both parts, dev/test rows never lost, and the submission zip as the course's script makes it."""
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import classifier
import prepare_submit
import train_multitask
from tasks import data
from tasks.course.formats import write_predictions
from tasks.course.submission import MANIFEST, SubmissionRefused, expected_files, make_submission, publish_predictions
from tasks.encoded import encode_split
from tasks.heads import MultitaskModel, task_spec
from tasks.registry import CLASSIFIER_TASKS, MULTITASK_TASKS, REGISTRY
from tests.helpers import prediction_rows, run_cli
from tests.helpers.runs import TINY

ALL_TASKS = tuple(REGISTRY)


def course_ids(path: Path) -> list:
    """Ids as the course's reader gets them: csv.DictReader, `record['id'].lower().strip()`."""
    import csv
    with open(path, encoding="utf-8") as f:
        return [r["id"].lower().strip() for r in csv.DictReader(f, delimiter="\t")]


# ------------------------------------------------------------------------------------------ the registry


@pytest.mark.parametrize("task", ALL_TASKS)
def test_every_task_is_read_encoded_and_headed_from_its_record(task, data_dir, tokenizer, pretrained):
    cfg = REGISTRY[task]
    splits = data.read_task(data_dir, task, warn=lambda m: None)
    dev = splits["dev"]
    assert dev.path.name == cfg.files["dev"] and len(dev) > 100
    assert all((e.b is not None) == cfg.is_pair for e in dev.examples[:20])
    low, high = cfg.label_range
    assert all(low <= e.label <= high for e in dev.examples)
    part = encode_split(data.Dataset(task, "dev", dev.path, dev.examples[:6], 6), tokenizer, "cross",
                        cfg.max_length)
    assert part.labels.dtype == cfg.kind.label_dtype
    model = MultitaskModel(pretrained, (task,)).eval()
    batch = tokenizer.collate([e[0] for e in part.encodings])
    with torch.no_grad():
        out = model(task, batch)
    assert out.shape == ((6, cfg.num_classes) if cfg.kind.has_classes else (6,))
    loss = task_spec(task).loss(out, part.labels)
    assert torch.isfinite(loss)
    values = task_spec(task).predict(out).float().tolist()
    path = write_predictions(Path(os.environ["MINBERT_PREDICTIONS_DIR"]), task, "dev", part.ids, values,
                             mode="finetune" if "multitask" not in cfg.outputs else None)
    assert path.read_text().startswith(f"id \t {cfg.prediction_header} \n")
    assert [i for i, _ in prediction_rows(path)] == part.ids


def test_cfimdb_keeps_long_reviews(data_dir, tokenizer):
    dev = data.read_split(data_dir, "cfimdb", "dev")
    lengths = encode_split(dev, tokenizer, "cross", REGISTRY["cfimdb"].max_length).lengths
    assert max(lengths) > 400 and sum(n > 128 for n in lengths) > len(lengths) / 2  # nothing cut at 128


# ------------------------------------------------------------------------ byte-identical prediction files


def course_writer(path: Path, header: str, ids, y_pred) -> None:
    """The course's writer (multitask_classifier.py / classifier.py): header, then f"{p} , {s} \\n"."""
    with open(path, "w+") as f:
        f.write(f"id \t {header} \n")
        for p, s in zip(ids, y_pred):
            f.write(f"{p} , {s} \n")


def course_values(task: str, logits: torch.Tensor) -> np.ndarray:
    """What the course's evaluation.py turns model outputs into, as numpy arrays."""
    if task == "sst":
        return logits.argmax(dim=-1).flatten().cpu().numpy()
    if task == "quora":
        return logits.sigmoid().round().flatten().cpu().numpy()
    return logits.flatten().cpu().numpy()  # sts: the model's similarity output itself


@pytest.mark.parametrize("task", MULTITASK_TASKS)
def test_part2_rows_are_byte_identical_to_the_course_writer(task, tmp_path):
    g = torch.Generator().manual_seed(3)
    n = 400
    ids = [f"{i:025x}" for i in range(n)]
    raw = torch.randn((n, 5) if task == "sst" else (n,), generator=g) * 4
    raw[:3] = 0.0  # ties and the sigmoid's 0.5: the rounding rules must agree too
    ours = task_spec(task).predict(raw)
    model_output = raw if task != "sts" else ours  # the course prints its STS head's output as it is
    course_writer(tmp_path / "course.csv", REGISTRY[task].prediction_header, ids, course_values(task, model_output))
    mine = write_predictions(tmp_path, task, "test", ids, ours.float().tolist())
    assert mine.read_bytes() == (tmp_path / "course.csv").read_bytes()


# --------------------------------------------------------------------- every dev/test id gets a prediction


def _write(folder: Path, name: str, rows: list) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture()
def quirky_data(small_data_dir, tmp_path):
    """SST files whose test split has an empty sentence and a repeated id."""
    folder = tmp_path / "quirky"
    for name in ("ids-sst-train.csv", "ids-sst-dev.csv"):
        folder.mkdir(exist_ok=True)
        (folder / name).write_text((small_data_dir / name).read_text())
    rows = [["", "id", "sentence"]] + [[str(i), f"T{i:03d}", f"sentence number {i} ."] for i in range(12)]
    rows[4][2] = "  "            # empty sentence: still an id to predict
    rows.append(["12", "t002", "the same id again"])  # lower-cased, it repeats T002
    _write(folder, "ids-sst-test-student.csv", rows)
    return folder


def test_a_test_row_with_an_empty_sentence_or_a_repeated_id_still_gets_one_prediction(quirky_data, tmp_path,
                                                                                      tiny_model):
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, ["--device", "cpu",
        "--model", str(tiny_model), "--data-dir", str(quirky_data), "--tasks", "sst", "--max-steps", "2",
        "--batch-size", "8", "--precision", "fp32", "--out", str(out)])
    assert code == 0, err
    ids = [i for i, _ in prediction_rows(out / "predictions" / "sst-test-output.csv")]
    assert ids == [f"t{i:03d}" for i in range(12)]  # each id exactly once, in file order
    assert "(duplicate id: 1) at lines 14" in err


def test_an_unparseable_test_row_stops_the_run_naming_its_line(quirky_data, tmp_path, tiny_model):
    path = quirky_data / "ids-sst-test-student.csv"
    path.write_text(path.read_text() + "13\n")  # a row with no id and no sentence
    code, out, err = run_cli(train_multitask.main, ["--device", "cpu",
        "--model", str(tiny_model), "--data-dir", str(quirky_data), "--tasks", "sst", "--max-steps", "2",
        "--precision", "fp32", "--out", str(tmp_path / "run")])
    assert code == 2
    assert err.strip().splitlines() == [err.strip().splitlines()[-1]]
    assert "ids-sst-test-student.csv: line 15: too few fields" in err


# ------------------------------------------------------------------------------------------------ Part 1


@pytest.mark.parametrize("spelling,prefix", [(["--option", "pretrain"], "pretrain"),
                                             (["--option", "finetune"], "finetune"),
                                             (["--fine-tune-mode", "full-model"], "full-model"),
                                             ([], "last-linear-layer")])  # neither: the 2024 starter's default
def test_part1_run_writes_the_course_files(spelling, prefix, part1_data, tmp_path, tiny_model):
    out = tmp_path / "part1"
    course = tmp_path / "named"  # a smoke run publishes only where the command line says
    code, stdout, err = run_cli(classifier.main, spelling + ["--device", "cpu",
        "--model", str(tiny_model), "--data-dir", str(part1_data), "--epochs", "1", "--max-steps", "3",
        "--batch_size", "4", "--precision", "fp32", "--out", str(out), "--predictions-dir", str(course)])
    assert code == 0, err
    names = {f"{prefix}-{t}-{s}-out.csv" for t in CLASSIFIER_TASKS for s in ("dev", "test")}
    assert {p.name for p in (out / "predictions").iterdir() if p.is_file()} == names
    assert names <= {p.name for p in course.iterdir()}
    assert not Path(os.environ["MINBERT_PREDICTIONS_DIR"]).exists()
    for task in CLASSIFIER_TASKS:
        for split, suffix in (("dev", "dev"), ("test", "test-student")):
            path = out / "predictions" / f"{prefix}-{task}-{split}-out.csv"
            assert path.read_text().splitlines()[0] == "id \t Predicted_Sentiment "
            assert [i for i, _ in prediction_rows(path)] == \
                course_ids(part1_data / REGISTRY[task].files[split])
            assert (course / path.name).read_bytes() == path.read_bytes()
        assert f"dev acc {task} ({prefix}) :: " in stdout
    results = json.loads((out / "classifier.json").read_text())
    assert set(results["tasks"]) == set(CLASSIFIER_TASKS)
    config = json.loads((out / "cfimdb" / "config.json").read_text())
    assert config["max_length"] == {"cfimdb": TINY["max_position_embeddings"]}  # 512, capped by the model
    assert config["arguments"]["freeze_until"] == ("all" if prefix in ("pretrain", "last-linear-layer") else 0)


def test_pretrain_leaves_every_encoder_tensor_bit_identical(part1_data, tmp_path, tiny_model):
    out = tmp_path / "part1"
    code, _, err = run_cli(classifier.main, ["--device", "cpu",
        "--option", "pretrain", "--model", str(tiny_model), "--data-dir", str(part1_data), "--tasks", "sst",
        "--epochs", "1", "--max-steps", "4", "--batch_size", "4", "--lr", "1e-2", "--precision", "fp32",
        "--out", str(out)])
    assert code == 0, err
    before = load_file(str(tiny_model / "model.safetensors"))
    after = torch.load(out / "sst" / "best.pt", weights_only=True)["model"]
    encoder = {k[len("encoder."):]: v for k, v in after.items() if k.startswith("encoder.")}
    assert set(encoder) == set(before)
    changed = [k for k in before if not torch.equal(before[k], encoder[k])]
    assert changed == []
    assert not torch.equal(after["heads.sst.weight"], torch.zeros_like(after["heads.sst.weight"]))
    config = json.loads((out / "sst" / "config.json").read_text())
    assert config["trainable_parameters"] == 5 * TINY["hidden_size"] + 5


def test_part1_bad_arguments_are_one_line_exit_2(tmp_path):
    code, _, err = run_cli(classifier.main, ["--device", "cpu", "--tasks", "sst,nope", "--out", str(tmp_path / "x")])
    assert code == 2 and "unknown task 'nope'" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------ the zip


def course_prepare_submit(root: Path) -> list:
    """The course's prepare_submit.py, run in `root`: entry names and bytes of the zip it makes."""
    cwd = os.getcwd()
    os.chdir(root)
    try:
        required = [p for p in os.listdir(".") if p.endswith(".py")] + \
                   [f"predictions/{p}" for p in os.listdir("predictions")]
        with zipfile.ZipFile("course.zip", "w") as zz:
            for file in required:
                zz.write(file, os.path.join(".", file))
        with zipfile.ZipFile("course.zip") as zz:
            return {info.filename: (zz.read(info), info.compress_type) for info in zz.infolist()}
    finally:
        os.chdir(cwd)


def test_submission_zip_is_the_course_zip_plus_packages_and_manifest(tmp_path):
    root = tmp_path / "project"
    for name in ("classifier.py", "multitask_classifier.py", "minbert/model.py", "minbert/__init__.py",
                 "tasks/ablation/sweep.py", "bench/x.py", "minbert/__pycache__/m.cpython-311.pyc", "notes.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n")
    runs = root / "runs"
    for run, (task, mode) in {"a": ("sst", "pretrain"), "b": ("cfimdb", "pretrain")}.items():
        path = write_predictions(runs / run, task, "dev", ["x1", "x2"], [1, 0], mode=mode)
        publish_predictions({runs / run: [path]}, root / "predictions", ["classifier.py"], always=True)
    path = write_predictions(runs / "c", "sts", "dev", ["y"], [2.5])
    publish_predictions({runs / "c": [path]}, root / "predictions", ["train_multitask.py"], always=True)
    (root / "predictions" / "sst-test-output.csv").write_text("id \t Predicted_Sentiment \nz , 1 \n")  # by hand

    course = course_prepare_submit(root)
    with pytest.raises(SubmissionRefused):  # runs without a config.json, a file by hand: all of unknown origin
        make_submission(tmp_path / "ours.zip", root, root / "predictions")
    zip_path, names, _, lines = make_submission(tmp_path / "ours.zip", root, root / "predictions",
                                                allow=["unknown-origin"])
    with zipfile.ZipFile(zip_path) as archive:
        ours = {info.filename: (archive.read(info), info.compress_type) for info in archive.infolist()}
    course_entries = {k: v for k, v in course.items() if k != "predictions/sources.json"}
    assert {k: ours[k] for k in course_entries} == course_entries  # same names, bytes and storage
    extra = set(ours) - set(course)
    assert extra == {"minbert/model.py", "minbert/__init__.py", "tasks/ablation/sweep.py", MANIFEST}
    manifest = json.loads(ours[MANIFEST][0])
    assert manifest["files"]["pretrain-sst-dev-out.csv"]["run"] == str((runs / "a").resolve())
    assert manifest["files"]["sst-test-output.csv"]["run"] is None
    assert manifest["files"]["sst-test-output.csv"]["allowed"] == ["unknown-origin"]
    assert len(manifest["missing"]) == 14 - 4
    text = "\n".join(lines)
    assert "Part 1 pretrain predictions come from 2 different runs" in text
    assert f"missing 10 of {sum(len(v) for v in expected_files().values())} expected" in text


def test_prepare_submit_command(tmp_path, monkeypatch):
    folder = tmp_path / "preds"
    for mode in ("full-model", "last-linear-layer"):
        for task in CLASSIFIER_TASKS:
            for split in ("dev", "test"):
                write_predictions(folder, task, split, ["a"], [1], mode=mode)
    for task in MULTITASK_TASKS:
        for split in ("dev", "test"):
            write_predictions(folder, task, split, ["a"], [1])
    code, out, err = run_cli(prepare_submit.main, ["--predictions-dir", str(folder), "--out", str(tmp_path / "s.zip"),
                                                   "--allow", "unknown-origin"])
    assert code == 0 and "missing" not in err  # the newer Part-1 spelling counts for both modes
    assert "  predictions/full-model-cfimdb-test-out.csv" in out and "  classifier.py" in out
    code, _, err = run_cli(prepare_submit.main, ["--predictions-dir", str(tmp_path / "none")])
    assert code == 2 and "no prediction files" in err


def test_part1_resume_keeps_finished_tasks(part1_data, tmp_path, tiny_model):
    out = tmp_path / "part1"
    argv = ["--option", "finetune", "--model", str(tiny_model), "--data-dir", str(part1_data), "--epochs", "1",
            "--max-steps", "2", "--batch_size", "4", "--precision", "fp32", "--out", str(out)]
    code, _, err = run_cli(classifier.main, argv)
    assert code == 0, err
    first = {p: p.read_bytes() for p in (out / "predictions").rglob("*") if p.is_file()}  # with the score files
    (out / "cfimdb" / "metrics.json").unlink()  # as if stopped after cfimdb's final checkpoint
    code, stdout, err = run_cli(classifier.main, ["--device", "cpu", "--resume", str(out)])
    assert code == 0, err
    assert "sst: already finished" in stdout
    assert {p: p.read_bytes() for p in (out / "predictions").rglob("*") if p.is_file()} == first
    code, _, err = run_cli(classifier.main, argv)
    assert code == 2 and "--resume" in err


def test_older_pooling_names_in_a_record_mean_what_they_meant(tmp_path):
    """--pooling takes today's names only; a run that recorded `cls` or `first` predicts (from_record) and
    resumes (its config.json's arguments) with the pooling it trained with."""
    from tasks.config import TrainConfig
    from tasks.training import recorded_arguments, train_parser
    assert TrainConfig.from_record({"pooling": "cls"}).pooling == "pooler"
    assert TrainConfig.from_record({"pooling": "mean"}).pooling == "mean"
    (tmp_path / "config.json").write_text(json.dumps({"arguments": {"pooling": "first", "lr": 1e-3}}))
    resumed, _ = recorded_arguments(train_parser(), tmp_path / "config.json")
    assert (resumed.pooling, resumed.lr) == ("cls-token", 1e-3)
    with pytest.raises(SystemExit):
        train_parser().parse_args(["--pooling", "cls"])
    with pytest.raises(ValueError, match="unknown pooling 'max'"):
        MultitaskModel(None, ("sst",), pooling="max")  # refused before the encoder is read


def test_a_wholly_frozen_encoder_trains_its_heads_without_dropout_inside(part1_data, tiny_model):
    """`--freeze-until all` (Part 1's pretrain): the encoder is a fixed feature extractor in eval mode,
    the head's dropout still trains; `--freeze-until K` leaves the frozen layers' dropout on."""
    import dataclasses

    from tasks import training
    from tasks.config import TrainConfig
    from tasks.inputs import prepare

    seen = []

    class Watch(training.Callback):
        def on_step(self, run, info):
            seen.append((run.model.encoder.training, run.model.dropout.training))

    for freeze in ("all", 1):
        config = dataclasses.replace(TrainConfig(), model=str(tiny_model), data_dir=str(part1_data), tasks="sst",
                                     max_steps=2, precision="fp32", freeze_until=freeze, batch_size=4, device="cpu")
        training.fit(config, prepare(config), training.InMemory(), callbacks=[Watch()])
    assert seen == [(False, True)] * 2 + [(True, True)] * 2


def test_part1_learning_rate_schedules():
    import classifier
    from tasks.training import lr_lambda
    args = classifier.parse_args(["--option", "pretrain", "--out", "unused"])
    config = classifier.task_config(args, "sst")
    assert config.lr_schedule == "constant" and config.weight_decay == 0.0 and config.pooling == "pooler"
    args = classifier.parse_args(["--option", "finetune", "--out", "unused"])
    assert classifier.task_config(args, "sst").lr_schedule == "linear"
    assert [lr_lambda(100, 0.06, "constant")(s) for s in (0, 50, 99)] == [1.0, 1.0, 1.0]
    linear = lr_lambda(100, 0.06, "linear")
    assert linear(0) < linear(5) == 1.0 > linear(50) > linear(99) > 0

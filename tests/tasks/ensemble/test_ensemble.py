"""Score files and ensembles on tiny runs: the files hold the model's probabilities and scores, the ensemble's
averages and predictions checked by hand, each refusal, and prepare_submit.py on an ensemble's folder."""
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import ensemble
import prepare_submit
import train_multitask
from tasks.course.submission import MANIFEST
from tasks.data import read_split
from tasks.ensemble import gain
from tasks.evaluation import predict
from tasks.metrics import overall_score
from tasks.saved.saved_run import course_inputs, load_trained
from tasks.saved.score_file import ScoreFile, read_scores, score_path
from tests.helpers import prediction_rows, run_cli

FILES = {"sst": "sst-{}-output.csv", "quora": "para-{}-output.csv", "sts": "sts-{}-output.csv"}


def train(tiny_model, data, out, *extra):
    code, _, err = run_cli(train_multitask.main, [
        "--device", "cpu", "--model", str(tiny_model), "--data-dir", str(data), "--batch-size", "16",
        "--eval-batch-size", "64", "--precision", "fp32", "--epochs", "1", "--predictions-dir", "",
        "--out", str(out), *extra])
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def runs(tiny_model, small_data_dir, tmp_path_factory):
    """Two finished tiny runs, seeds 0 and 1."""
    folder = tmp_path_factory.mktemp("runs")
    return [train(tiny_model, small_data_dir, folder / f"seed-{s}", "--seed", str(s)) for s in (0, 1)]


def copy_run(run: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


def edit_record(run: Path, change) -> None:
    record = json.loads((run / "config.json").read_text())
    change(record)
    (run / "config.json").write_text(json.dumps(record))


def build(*argv):
    return run_cli(ensemble.main, [str(a) for a in argv] + ["--predictions-dir", ""])


def scores(folder: Path, task: str, split: str = "dev") -> ScoreFile:
    return read_scores(score_path(folder / "predictions", task, split))


def test_score_files_hold_the_models_probabilities_and_scores_beside_its_predictions(runs, small_data_dir):
    run = runs[0]
    trained = load_trained(run, torch.device("cpu"))
    inputs = course_inputs(trained, small_data_dir, ("dev",), torch.device("cpu"), "fp32")
    for task in ("sst", "quora", "sts"):
        part, found = inputs.data[task]["dev"], scores(run, task)
        logits = predict(trained.model, part, trained.tokenizer, torch.device("cpu"), 64, "fp32", values=lambda o: o)
        assert found.ids == tuple(part.ids) and found.head_kind == {"sst": "classify", "quora": "binary",
                                                                    "sts": "regress"}[task]
        written = [v for _, v in prediction_rows(run / "predictions" / FILES[task].format("dev"))]
        if task == "sst":
            expected = torch.tensor(logits).softmax(-1)
            assert torch.allclose(torch.tensor(found.values), expected, atol=1e-6)
            assert written == [str(int(np.argmax(p))) for p in found.values]
        elif task == "quora":
            assert torch.allclose(torch.tensor(found.values), torch.sigmoid(torch.tensor(logits)), atol=1e-6)
            assert written == [str(np.float32(p > 0.5)) for p in found.values]
        else:
            assert written == [repr(float(np.float32(v))) for v in found.values]
    assert {p.name for p in (run / "predictions" / "scores").iterdir()} == {
        "sst-dev.json", "sst-test.json", "quora-dev.json", "sts-dev.json", "sts-test.json"}  # no quora test file
    assert ScoreFile.from_json(scores(run, "sst").to_json()) == scores(run, "sst")


def assert_ensemble_records(ens: Path, members: list, runs: list, small_data_dir) -> None:
    """metrics.json's ensemble figures from the averaged scores by hand; the manifest names the members."""
    metrics = json.loads((ens / "metrics.json").read_text())
    labels = {e.id: e.label for e in read_split(small_data_dir, "sts", "dev").examples}
    gold = [labels[i] for i in members[0]["sts", "dev"].ids]
    sts = [np.mean([a, b]) for a, b in zip(members[0]["sts", "dev"].values, members[1]["sts", "dev"].values)]
    assert metrics["ensemble"]["sts"] == pytest.approx(np.corrcoef(sts, gold)[0, 1], abs=1e-9)
    assert metrics["ensemble"]["overall"] == pytest.approx(overall_score(
        {k: v for k, v in metrics["ensemble"].items() if k != "overall"}))
    assert set(metrics["members"]) == {str(r.resolve()) for r in runs}
    manifest = json.loads((ens / "ensemble.json").read_text())
    assert [m["seed"] for m in manifest["members"]] == [0, 1]
    assert all(len(m["config_sha256"]) == 64 and m["problems"] == ["other-model"] for m in manifest["members"])


def test_the_ensemble_averages_probabilities_and_scores_as_by_hand(runs, tmp_path, small_data_dir):
    code, out, err = build(*runs, "--out", tmp_path / "ens")
    assert code == 0, err
    ens = tmp_path / "ens"
    members = [{(t, s): scores(r, t, s) for t in FILES for s in ("dev", "test") if (t, s) != ("quora", "test")}
               for r in runs]
    for (task, split), first in members[0].items():
        second = members[1][task, split]
        mean = [np.mean([a, b], axis=0) for a, b in zip(first.values, second.values)]
        assert np.allclose(scores(ens, task, split).values, mean, atol=1e-12)
        written = [v for _, v in prediction_rows(ens / "predictions" / FILES[task].format(split))]
        if task == "sst":
            assert written == [str(int(np.argmax(m))) for m in mean]
        elif task == "quora":
            assert written == [str(np.float32(m > 0.5)) for m in mean]
        else:
            assert written == [repr(float(np.float32(m))) for m in mean]
    assert_ensemble_records(ens, members, runs, small_data_dir)
    assert "dev sst=" in out and "ensemble of 2 runs" in out


def test_a_one_run_ensemble_writes_the_runs_own_files_and_figures(runs, tmp_path):
    code, _, err = build(runs[0], "--out", tmp_path / "one")
    assert code == 0, err
    for name in (p.name for p in (runs[0] / "predictions").glob("*.csv")):
        assert (tmp_path / "one" / "predictions" / name).read_bytes() == (runs[0] / "predictions" / name).read_bytes()
    best = json.loads((runs[0] / "metrics.json").read_text())["best"]
    figures = json.loads((tmp_path / "one" / "metrics.json").read_text())["ensemble"]
    assert figures["sst"] == best["sst"] and figures["quora"] == best["quora"]
    assert figures["sts"] == pytest.approx(best["sts"], abs=1e-6)  # from the stored float32 scores


def test_a_run_without_score_files_has_them_computed_from_its_weights(runs, tmp_path):
    old = copy_run(runs[1], tmp_path, "old")
    shutil.rmtree(old / "predictions" / "scores")
    code, out, err = build(runs[0], old, "--out", tmp_path / "computed")
    assert code == 0, err
    assert "old: no score files" in out and not (old / "predictions" / "scores").exists()  # nothing written there
    code, _, err = build(*runs, "--out", tmp_path / "read")
    assert code == 0, err
    for path in (tmp_path / "read" / "predictions").rglob("*"):
        if path.is_file() and path.name != "sources.json":
            assert (tmp_path / "computed" / path.relative_to(tmp_path / "read")).read_bytes() == path.read_bytes()


def test_runs_that_cannot_be_averaged_are_refused_in_one_line_with_nothing_written(
        runs, tmp_path, tiny_model, small_data_dir):
    unfinished = copy_run(runs[1], tmp_path, "unfinished")
    (unfinished / "metrics.json").unlink()
    labels = copy_run(runs[1], tmp_path, "labels")
    edit_record(labels, lambda r: r["declared_tasks"].update(
        sst={"head": "classify", "num_classes": 3, "label_range": [0, 2], "label_names": None}))
    data = copy_run(runs[1], tmp_path, "data")
    edit_record(data, lambda r: r["data"]["sts"]["dev"].update(sha256="0" * 64))
    vocab = copy_run(runs[1], tmp_path, "vocab")
    with open(vocab / "model" / "vocab.txt", "a") as f:
        f.write("[NEW]\n")
    two = train(tiny_model, small_data_dir, tmp_path / "two", "--tasks", "sst,sts")
    cases = [((), "no runs to ensemble"), ((tmp_path / "missing",), "missing: no such run folder"),
             ((runs[0], unfinished), "unfinished: an unfinished run"),
             ((runs[0], two), "two: trained tasks sst,sts, but"),
             ((runs[0], labels), "labels: task sst's label set"),
             ((runs[0], data), "data: read a different sts dev file"),
             ((runs[0], vocab), "vocab: its tokenizer"), ((runs[0], runs[0]), "named twice")]
    for members, expected in cases:
        code, out, err = build(*members, "--out", tmp_path / "refused")
        assert code == 2, (expected, err)
        assert len(err.strip().splitlines()) == 1 and expected in err, err
        assert not (tmp_path / "refused").exists()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("kept")
    code, _, err = build(*runs, "--out", tmp_path / "taken")
    assert code == 2 and "already holds files" in err and sorted(p.name for p in (tmp_path / "taken").iterdir()) == [
        "mine.txt"]
    code, _, err = build(*runs, "--out", tmp_path / "again")
    assert code == 0, err
    code, _, err = build(*runs, "--out", tmp_path / "again")  # the same ensemble: written again, the same
    assert code == 0, err


def test_prepare_submit_zips_an_ensemble_and_refuses_one_with_a_fallback_model_member(runs, tmp_path):
    code, _, err = build(*runs, "--out", tmp_path / "clean")
    assert code == 0, err
    zip_path = tmp_path / "clean.zip"
    code, out, err = run_cli(prepare_submit.main, ["--predictions-dir", str(tmp_path / "clean"), "--out",
                                                   str(zip_path), "--allow", "other-model"])  # the tiny model
    assert code == 0, err
    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read(MANIFEST))
    assert {"predictions/sst-dev-output.csv", "predictions/sts-test-output.csv", "ensemble.py"} <= names
    assert not any(n.startswith("predictions/scores") for n in names)
    assert manifest["files"]["sst-dev-output.csv"]["run"] == str((tmp_path / "clean").resolve())
    fallback = copy_run(runs[1], tmp_path, "fallback")
    edit_record(fallback, lambda r: r["model"].update(resolved_from="embedded"))
    code, out, err = build(runs[0], fallback, "--out", tmp_path / "mixed")
    assert code == 0, err
    assert "warning: member" in err and "fallback" in err and "prepare_submit.py refuses this ensemble" in err
    code, out, err = run_cli(prepare_submit.main, ["--predictions-dir", str(tmp_path / "mixed"), "--out",
                                                   str(tmp_path / "mixed.zip"), "--allow", "other-model"])
    assert code == 2 and not (tmp_path / "mixed.zip").exists()
    assert "ensemble member fallback: model" in err and "--allow fallback-model" in err


def test_a_clean_ensemble_publishes_to_the_course_folder_as_a_run_does(runs, tmp_path):
    course = tmp_path / "course"
    code, out, err = run_cli(ensemble.main, [*map(str, runs), "--out", str(tmp_path / "ens"),
                                             "--predictions-dir", str(course)])
    assert code == 0, err
    assert "copied 5 prediction files" in out
    sources = json.loads((course / "sources.json").read_text())
    assert sources["sst-dev-output.csv"]["run"] == str((tmp_path / "ens").resolve())
    assert len(sources["sst-dev-output.csv"]["members"]) == 2


def test_help_documents_every_option():
    parser = ensemble.build_parser()
    text = parser.format_help()
    for action in parser._actions:
        assert action.help, action.dest
        for flag in action.option_strings:
            assert flag in text


def test_seeds_trains_each_seed_once_keeps_a_finished_one_and_ensembles_them(runs, tmp_path, tiny_model,
                                                                             small_data_dir):
    out = tmp_path / "three"
    kept = Path(shutil.copytree(runs[0], out / "seed-0"))
    before = {p: p.read_bytes() for p in kept.rglob("*") if p.is_file()}
    code, stdout, err = run_cli(train_multitask.main, [
        "--device", "cpu", "--model", str(tiny_model), "--data-dir", str(small_data_dir), "--batch-size", "16",
        "--eval-batch-size", "64", "--precision", "fp32", "--epochs", "1", "--seeds", "0,1", "--out", str(out)])
    assert code == 0, err
    assert f"seed 0: finished in {kept}; kept, not trained again" in stdout and "seed 1: training in" in stdout
    assert {p: p.read_bytes() for p in kept.rglob("*") if p.is_file()} == before  # not touched
    assert json.loads((out / "seed-1" / "config.json").read_text())["seed"] == 1
    manifest = json.loads((out / "ensemble" / "ensemble.json").read_text())
    assert [m["seed"] for m in manifest["members"]] == [0, 1]
    # seed 1 of --seeds trained as seed-1 of the fixture did: the ensemble is ensemble.py's of the fixture's runs
    assert build(*runs, "--out", tmp_path / "by-hand")[0] == 0
    for name in ("sst-dev-output.csv", "para-dev-output.csv", "sts-test-output.csv"):
        assert (out / "ensemble" / "predictions" / name).read_bytes() == (
            tmp_path / "by-hand" / "predictions" / name).read_bytes()
    code, _, err = run_cli(train_multitask.main, ["--seeds", "0,1", "--resume", str(out / "seed-1")])
    assert code == 2 and "--seeds trains its runs itself" in err
    with pytest.raises(SystemExit) as exit_:  # argparse's own usage error
        run_cli(train_multitask.main, ["--seeds", "0,0", "--out", str(out)])
    assert exit_.value.code == 2


def test_the_gain_is_the_ensembles_figures_less_its_members_with_a_paired_interval(runs, tmp_path, small_data_dir):
    code, _, err = build(*runs, "--out", tmp_path / "ens")
    assert code == 0, err
    figures = json.loads((tmp_path / "ens" / "metrics.json").read_text())
    code, out, err = run_cli(gain.main, [str(tmp_path / "ens"), "--resamples", "200", "--data-dir",
                                         str(small_data_dir), "--json", str(tmp_path / "gain.json")])
    assert code == 0, err
    report = json.loads((tmp_path / "gain.json").read_text())
    members = list(figures["members"].values())
    best = max(members, key=lambda m: m["overall"])
    for k in ("sst", "quora", "sts", "overall"):
        over_mean, over_best = report["over_mean"][k], report["over_best"][k]
        assert over_mean["gain"] == pytest.approx(figures["ensemble"][k] - figures["members_mean"][k], abs=1e-6)
        assert over_best["gain"] == pytest.approx(figures["ensemble"][k] - best[k], abs=1e-6)
        assert over_mean["low"] <= over_mean["high"] and over_best["low"] <= over_best["high"]
    assert "overall: ensemble" in out
    # a one-run ensemble gains nothing over its one member, on every resample
    code, _, err = build(runs[0], "--out", tmp_path / "one")
    assert code == 0, err
    one = gain.gain_report(gain.dev_columns(tmp_path / "one", small_data_dir), resamples=100)
    assert all(v == {"gain": 0.0, "low": 0.0, "high": 0.0} for v in one["over_mean"].values())
    code, _, err = run_cli(gain.main, [str(runs[0])])
    assert code == 2 and "no ensemble.json" in err and len(err.strip().splitlines()) == 1

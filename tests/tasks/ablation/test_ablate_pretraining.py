"""ablate.py --mode pretraining: a tiny ladder pretrained here (rungs at 0 tokens, one budget and the end), each rung
fine-tuned at two seeds and two data fractions, its change from the untrained rung paired by seed; a bad ladder or
rungs of two architectures are one line, exit 2, before any trial.

The ladder is a 2-layer x 32 model on a corpus written here (test_pretrain's), 4 steps of 8 x 32-token sequences;
each trial fine-tunes it for 2 steps on the course's first rows: seconds in all.
"""
import csv
import hashlib
import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

import ablate
import minbert
import pretrain
from tasks.ablation.study import Shape
from tasks.pretraining import INFO_FILE, MODEL_DIR, ladder_folder
from tests.helpers import run_cli
from tests.helpers.corpus import TINY, corpus_text

SMALL = ["--batch-size", "8", "--precision", "fp32", "--eval-batch-size", "64", "--device", "cpu", "--workers", "1",
         "--trial-steps", "2", "--plateau-patience", "0"]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    root = tmp_path_factory.mktemp("ladder")
    (root / "tiny.json").write_text(json.dumps(TINY))
    (root / "corpus.txt").write_text(corpus_text(), encoding="utf-8")
    out = root / "run"
    code, _, err = run_cli(pretrain.main, [
        "--init-config", str(root / "tiny.json"), "--corpus", str(root / "corpus.txt"), "--max-length", "32",
        "--batch-size", "8", "--device", "cpu", "--precision", "fp32", "--cache-dir", str(root / "cache"),
        "--held-out", "0.1", "--max-steps", "4", "--save-at", "0", "200", "--out", str(out)])
    assert code == 0, err
    return out


def rung_tokens(ladder) -> list:
    return [json.loads((ladder / name / INFO_FILE).read_text())["tokens"]
            for name in (ladder_folder(0), ladder_folder(200), MODEL_DIR)]


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def sweep_out(ladder, small_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "pretraining"
    code, stdout, err = run_cli(ablate.main, ["--mode", "pretraining", "--ladder", str(ladder),
                                              *sweep_flags(ladder, out, small_data_dir)])
    assert code == 0, err
    return out, stdout


def sweep_flags(ladder, out, data_dir) -> list:
    """The sweep's flags; the predictions' folder named (a training option, in the fingerprint), where each test's
    environment would name another one."""
    return ["--task", "sst", "--seeds", "0,1", "--data-fractions", "0.5,1", "--data-dir", str(data_dir), "--out",
            str(out), "--predictions-dir", str(ladder.parent / "predictions"), *SMALL]


def test_every_rung_is_fine_tuned_at_every_seed_and_fraction_from_its_own_weights(ladder, sweep_out):
    out, stdout = sweep_out
    tokens = rung_tokens(ladder)
    assert tokens[0] == 0 < tokens[1] < tokens[2]
    assert f"model: {ladder / ladder_folder(0)}" in stdout  # --model: the least-pretrained rung
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in lines)
    assert sorted((r["params"]["tokens"], r["seed"], r["data_fraction"]) for r in lines) == \
        sorted((t, s, f) for t in tokens for s in (0, 1) for f in (0.5, 1.0))
    files = {t: ladder / name / "model.safetensors"
             for t, name in zip(tokens, (ladder_folder(0), ladder_folder(200), MODEL_DIR))}
    weights = {t: sha256(path) for t, path in files.items()}
    sums = {t: float(load_file(str(path))["bert.embeddings.word_embeddings.weight"].double().sum())
            for t, path in files.items()}
    assert len(set(weights.values())) == 3 == len(set(sums.values()))
    for r in lines:  # the encoder each trial fine-tuned is its rung's
        tokens = r["params"]["tokens"]
        assert r["params"]["weights"] == weights[tokens]
        assert r["config"] == f"tokens={tokens},weights={weights[tokens][:12]}"
        assert r["info"]["rung"]["word_embeddings_sum"] == pytest.approx(sums[tokens], abs=1e-9)
        assert r["info"]["rung"]["tokens"] == tokens and r["steps"] == 2


def test_the_summary_pairs_each_rung_with_the_untrained_one_by_seed_and_plots_both(ladder, sweep_out):
    out, _ = sweep_out
    tokens = rung_tokens(ladder)
    rows = [r for r in csv.DictReader((out / "summary.csv").open()) if r["metric"] == "dev/sst"]
    assert len(rows) == 6
    untrained = f"tokens=0,weights={sha256(ladder / ladder_folder(0) / 'model.safetensors')[:12]}"
    for row in rows:
        if row["config"] == untrained:
            assert row["reference"] == "" and row["n"] == "2"
        else:
            assert row["reference"] == untrained and row["change_n"] == "2" and row["change_mean"] != ""
    assert {r["config"].split(",")[0] for r in rows} == {f"tokens={t}" for t in tokens}
    for name in ("pretraining", "pretraining_change"):
        assert (out / "plots" / f"{name}.png").stat().st_size > 1000


def test_a_rung_pretrained_again_is_another_configuration(ladder, tmp_path):
    copy = tmp_path / "run"
    for name in (ladder_folder(0), ladder_folder(200), MODEL_DIR):
        shutil.copytree(ladder / name, copy / name)
    config = ablate.parse_args(["--mode", "pretraining", "--ladder", str(copy), "--task", "sst", *SMALL])
    assert config.training.model == str((copy / ladder_folder(0)).resolve())

    def labels():
        return [t.label for t in config.study.trials(config, Shape(2, 2))]

    before = labels()
    assert [label.split(",")[0] for label in before] == [f"tokens={t}" for t in rung_tokens(ladder)]
    weights = copy / ladder_folder(200) / "model.safetensors"
    weights.write_bytes((copy / MODEL_DIR / "model.safetensors").read_bytes())  # as if pretrained again
    after = labels()
    assert after[0] == before[0] and after[2] == before[2] and after[1] != before[1]


def test_a_rung_added_to_the_ladder_leaves_the_others_results_standing(ladder, sweep_out, small_data_dir, tmp_path):
    out, _ = sweep_out
    again = tmp_path / "again"
    again.mkdir()
    shutil.copy(out / "results.jsonl", again / "results.jsonl")
    rungs = f"{ladder / ladder_folder(0)},{ladder / ladder_folder(200)}"  # two rungs of the three: all finished
    code, stdout, err = run_cli(ablate.main, ["--mode", "pretraining", "--rungs", rungs,
                                              *sweep_flags(ladder, again, small_data_dir)])
    assert code == 0 and "8 trials, 8 already finished" in stdout, err


def one_line_exit_2(argv, needle):
    code, _, err = run_cli(ablate.main, [*argv, "--task", "sst", *SMALL])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_ladder_or_an_incomplete_rung_is_one_line_exit_2(ladder, tmp_path):
    one_line_exit_2(["--mode", "pretraining", "--ladder", str(tmp_path / "nowhere")], "nowhere: no such folder")
    one_line_exit_2(["--mode", "pretraining"], "needs --ladder")
    half = tmp_path / "half"
    shutil.copytree(ladder / ladder_folder(0), half)
    (half / INFO_FILE).unlink()
    one_line_exit_2(["--mode", "pretraining", "--rungs", f"{ladder / MODEL_DIR},{half}"], f"{half} has no {INFO_FILE}")
    (half / INFO_FILE).write_text('{"step": 3')  # cut short
    one_line_exit_2(["--mode", "pretraining", "--rungs", f"{ladder / MODEL_DIR},{half}"], "unreadable")
    one_line_exit_2(["--mode", "reinit", "--ladder", str(ladder)], "--ladder applies to --mode pretraining only")


def test_rungs_of_two_architectures_are_one_line_exit_2(ladder, tmp_path):
    other = tmp_path / "wider"
    shutil.copytree(ladder / ladder_folder(0), other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    (other / INFO_FILE).write_text(json.dumps({"step": 9, "tokens": 99}))
    one_line_exit_2(["--mode", "pretraining", "--rungs", f"{ladder / MODEL_DIR},{other}"], "hidden_size")


def test_a_model_of_another_width_than_the_rungs_is_one_line_exit_2(ladder, small_data_dir, tmp_path):
    # refused when the study lists its trials, after the data loads: without data, that error would come first
    wider = tmp_path / "wider-model"  # a model that loads, with the ladder's vocabulary and another width
    wider.mkdir()
    shutil.copy(ladder / MODEL_DIR / "vocab.txt", wider / "vocab.txt")
    (wider / "config.json").write_text(json.dumps({**TINY, "hidden_size": 48}))
    model = minbert.BertModel(minbert.BertConfig(**{**TINY, "hidden_size": 48}))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(wider / "model.safetensors"))
    one_line_exit_2(["--mode", "pretraining", "--ladder", str(ladder), "--model", str(wider), "--data-dir",
                     str(small_data_dir)], "hidden_size 48")

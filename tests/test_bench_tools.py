"""bench/profile.py and bench/e2e.py on a tiny model and small course files (seconds)."""
import json
import sys
from pathlib import Path

import pytest
from test_reliability import tiny_model  # noqa: F401 (fixture)

from bench import e2e, profile
from bench.common import run_worker
from conftest import run_cli


def test_e2e_reads_readme_command_1_as_set_up_then_the_training_command():
    setup, options = e2e.readme_command()
    assert setup.startswith("python3 -m venv .venv") and "pip install" in setup and not setup.endswith("&&")
    assert options == []  # command 1 trains on the defaults


def test_e2e_times_the_parts_of_a_run(tiny_model, small_data_dir, tmp_path):  # noqa: F811
    out = tmp_path / "e2e.json"
    code, printed, err = run_cli(e2e.main, ["--no-setup", "--data-dir", str(small_data_dir), "--keep", str(tmp_path),
                                            "--json", str(out), "--", "--model", str(tiny_model),
                                            "--precision", "fp32", "--batch-size", "8", "--max-steps", "3",
                                            "--device", "cpu"])
    assert code == 0, err
    r = json.loads(out.read_text())
    assert r["steps"] == 3 and r["train_s"] > 0 and r["eval_s"] > 0 and r["finish_s"] > 0
    assert r["total_s"] >= r["start_s"] + r["train_s"] + r["eval_s"] + r["finish_s"]
    assert "training" in printed and "best dev" in printed
    assert (tmp_path / "run" / "predictions" / "sst-dev-output.csv").exists()


def test_profile_lists_the_steps_operators_by_kind(tiny_model, small_data_dir, tmp_path):  # noqa: F811
    out = tmp_path / "profile.json"
    code, printed, err = run_cli(profile.main, ["--model", str(tiny_model), "--data-dir", str(small_data_dir),
                                                "--steps", "2", "--warmup", "1", "--top", "5", "--json", str(out),
                                                "--", "--batch-size", "4", "--device", "cpu"])
    assert code == 0, err
    figures = json.loads(out.read_text())
    assert figures["kinds"]["matmul"] > 0 and abs(sum(figures["kinds"].values()) - 1) < 1e-6
    assert len(figures["top"]) == 5 and "self CPU time by kind" in printed


def test_worker_report_reaches_the_parent_and_a_failed_worker_is_one_line():
    said = "from bench.common import report_result; print('noise'); report_result({'a': [1, 2]})"
    repo = Path(__file__).resolve().parents[1]
    assert run_worker([sys.executable, "-c", said], "the worker", cwd=repo) == {"a": [1, 2]}
    with pytest.raises(SystemExit, match=r"bench: the worker failed \(exit 3\): boom"):
        run_worker([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], "the worker")
    with pytest.raises(SystemExit, match=r"bench: the worker failed \(exit 0\)"):  # exited without reporting
        run_worker([sys.executable, "-c", "print('nothing')"], "the worker")


def test_gpu_bench_times_both_models_and_the_trainer(small_data_dir, tmp_path):
    """bench.gpu's logic, run on the CPU (its synchronisation and memory figures are CUDA's alone)."""
    from bench import gpu, sizes
    model = sizes.bert_base_shaped(tmp_path, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                   intermediate_size=128)
    out = tmp_path / "gpu.json"
    code, stdout, err = run_cli(gpu.main, ["--model", str(model), "--device", "cpu", "--precisions", "fp32",
                                           "--tasks", "sst", "--batch-size", "4", "--steps", "4", "--warmup", "1",
                                           "--rounds", "2", "--data-dir", str(small_data_dir),
                                           "--trainer-steps", "1,3", "--trainer-settings", "default (auto precision)",
                                           "--json", str(out)])
    assert code == 0, err
    result = json.loads(out.read_text())
    (row,) = result["models"]
    assert row["train_ratio"] > 0 and row["eval_ratio"] > 0 and row["minbert_train_examples_per_s"] > 0
    (trainer,) = result["trainer"]
    assert "error" not in trainer and trainer["implementation"] == "fast" and set(trainer["wall_s"]) == {"1", "3"}


def test_pretrain_bench_masks_as_pretraining_and_times_both_models(tmp_path):
    """bench.pretrain's batches (full sequences, pretraining's masking: 15% of the words, 80% [MASK], never
    [CLS] or [SEP]), the same in every process, and a tiny run of both workers."""
    import torch

    from bench import pretrain
    args = pretrain.parse_args(["--batch-size", "32", "--length", "128", "--steps", "2", "--warmup", "0"])
    batches = pretrain.build_batches(args)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(batches, pretrain.build_batches(args)))
    inputs = torch.stack([b["input_ids"] for b in batches])
    labels = torch.stack([b["labels"] for b in batches])
    assert inputs.shape == (2, 32, 128) and all(bool(b["attention_mask"].all()) for b in batches)
    chosen = labels != -100
    assert not chosen[..., 0].any() and not chosen[..., -1].any()
    n = int(chosen.sum())                                                 # about 1,200 of 8,064 words
    assert abs(n / (64 * 126) - 0.15) < 0.02
    assert abs(float((inputs[chosen] == 103).sum()) / n - 0.8) < 0.05     # 103: [MASK] in bert-base-uncased
    out = tmp_path / "pretrain.json"
    code, printed, err = run_cli(pretrain.main, ["--size", "tiny", "--batch-size", "4", "--length", "16", "--steps",
                                                 "2", "--warmup", "1", "--precision", "fp32", "--json", str(out)])
    assert code == 0, err
    figures = json.loads(out.read_text())
    assert figures["tokens"] == 2 * 4 * 16 and set(figures["tokens_per_s"]) == {"minbert", "transformers"}
    assert abs(figures["first_loss"]["minbert"] - figures["first_loss"]["transformers"]) < 1e-4
    assert figures["info"]["minbert"]["class"] == "FastBertForMaskedLM" and "target: minBERT" in printed

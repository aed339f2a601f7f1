"""Data-parallel training under torchrun (2 CPU processes, gloo): the same result as one process.

Runs use the tiny 2-layer BERT of tests/tasks/training/test_reliability.py. With dropout off, a run split over
two processes must end with the weights of a single-process run on the same global batches,
up to float rounding (the two sum the batch's gradients in a different order).
"""
import json

import pytest
import torch

import train_multitask
from tasks.distributed import World, local_batch_indices
from tests.helpers import run_cli
from tests.helpers.runs import WEIGHT_TOLERANCE, assert_same_run, step_in, torchrun, weights


@pytest.mark.parametrize("extra", [
    ["--sampler", "round-robin"],                    # 3 tasks a step: 2 backwards under no_sync, 1 synced
    ["--surgery", "pcgrad", "--smart"],              # per-task gradients all-reduced before the projection
    ["--tasks", "sst", "--batch-size", "1"],         # a rank without examples joins with weight 0
], ids=["round-robin", "pcgrad-smart", "empty-shard"])
def test_two_processes_end_with_the_weights_of_one(base, tmp_path, extra):
    argv = base + ["--batch-size", "7", "--max-steps", "6", "--dropout", "0"] + extra
    code, _, err = run_cli(train_multitask.main, argv + ["--out", str(tmp_path / "one")])
    assert code == 0, err
    code, out, err = torchrun(tmp_path, argv + ["--out", str(tmp_path / "two")])
    assert code == 0, err
    one, two = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert one.keys() == two.keys()
    diff = max((one[k] - two[k]).abs().max().item() for k in one)
    assert diff < WEIGHT_TOLERANCE, diff
    assert max((one[k]).abs().max().item() for k in one) > 0.1  # weights, not an empty dict
    m1, m2 = (json.loads((tmp_path / r / "metrics.json").read_text())["final"] for r in ("one", "two"))
    assert m1.keys() == m2.keys() and all(abs(m1[k] - m2[k]) < 1e-3 for k in m1 if m1[k] is not None)
    config = json.loads((tmp_path / "two" / "config.json").read_text())
    assert config["world_size"] == 2 and config["backend"] == "gloo"
    assert out.count("best dev") == 1  # rank 0 alone reports


def test_sigterm_to_one_rank_stops_both_at_the_same_step_and_resumes_bitwise(base, tmp_path):
    argv = base + ["--batch-size", "16", "--max-steps", "12"]  # dropout on: per-rank RNG streams are resumed
    code, _, err = torchrun(tmp_path, argv + ["--out", str(tmp_path / "reference")])
    assert code == 0, err
    out = tmp_path / "run"
    code, _, err = torchrun(tmp_path, argv + ["--out", str(out)], mode="sigterm-rank-1", at=3)
    assert code != 0 and "stopped by SIGTERM at step 3" in err, err
    assert step_in(out / "checkpoint.pt") == 3
    assert len(torch.load(out / "checkpoint.pt", weights_only=True)["rng_ranks"]) == 2
    code, _, err = torchrun(tmp_path, ["--resume", str(out)])
    assert code == 0, err
    assert_same_run(tmp_path / "reference", out)


def test_shards_of_a_batch_partition_it_with_weights_summing_to_the_world():
    for n in (1, 2, 5, 7, 32):
        batch = list(range(100, 100 + n))
        for size in (1, 2, 3, 4):
            parts = [local_batch_indices(batch, World(rank, size)) for rank in range(size)]
            real = [idx for idx, w in parts if w > 0]
            assert sorted(i for idx in real for i in idx) == batch
            assert sum(w for _, w in parts) == pytest.approx(size)


def test_ablate_under_torchrun_points_to_shards(monkeypatch, tmp_path):
    import ablate
    monkeypatch.setenv("WORLD_SIZE", "2")
    code, _, err = run_cli(ablate.main, ["--device", "cpu", "--mode", "permute", "--out", str(tmp_path / "sweep")])
    assert code == 2 and err.count("\n") == 1 and "--shard" in err, err
    assert not (tmp_path / "sweep").exists()


def test_an_empty_tensor_is_not_all_reduced(monkeypatch):
    """--surgery with --freeze-until all: no encoder gradient, an empty CPU tensor NCCL would refuse."""
    import torch.distributed as dist

    from tasks.distributed import all_reduce_mean_
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: pytest.fail("an empty tensor was all-reduced"))
    empty = torch.zeros(0)
    assert all_reduce_mean_(empty, World(0, 2, 0, "nccl")) is empty

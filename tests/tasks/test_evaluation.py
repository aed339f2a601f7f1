"""Evaluation reads the device once per task and casts the weights once: the same predictions, bit for bit, as the
per-batch algorithm it replaced (kept here as `per_batch_predict`), and the training weights untouched."""
import copy

import pytest
import torch

import minbert
from tasks.data import read_split
from tasks.encoded import encode_split, make_batch
from tasks.evaluation import linear_weights_cast, predict
from tasks.heads import task_spec
from tasks.machine import autocast
from tests.helpers.evaluation import TASKS, assert_untouched, multitask, per_batch_predict, snapshot


@pytest.fixture(scope="module")
def dev_splits(small_data_dir, tokenizer):
    return {t: encode_split(read_split(small_data_dir, t, "dev"), tokenizer, "cross") for t in TASKS}


@pytest.mark.parametrize("implementation,precision,pooling", [
    ("fast", "bf16", "mean"), ("fast", "fp32", "mean"), ("reference", "bf16", "mean"),
    ("reference", "bf16", "pooler"), ("reference", "fp32", "mean")])
def test_predictions_equal_the_per_batch_algorithm_bit_for_bit(dev_splits, tokenizer, implementation, precision,
                                                                pooling):
    model = multitask(implementation, pooling=pooling)
    before = snapshot(model)
    cpu = torch.device("cpu")
    for task, split in dev_splits.items():
        expected = per_batch_predict(model, split, tokenizer, cpu, 7, precision)  # 7: a short last batch
        assert predict(model, split, tokenizer, cpu, 7, precision) == expected, task
    assert_untouched(model, before)
    assert all(v is not None for v in expected)


def test_the_host_reads_once_per_task(dev_splits, tokenizer, monkeypatch):
    model = multitask("reference")
    reads = []
    for method in ("cpu", "tolist", "item"):
        original = getattr(torch.Tensor, method)

        def counted(self, *args, _original=original, _name=method, **kwargs):
            reads.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, method, counted)
    predict(model, dev_splits["sst"], tokenizer, torch.device("cpu"), 7, "bf16")
    assert reads == ["cpu", "tolist"]  # 40 rows in 6 batches, one read


def test_cast_weights_are_put_back_even_after_an_error():
    model = multitask("reference")
    before = snapshot(model)
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    with pytest.raises(RuntimeError, match="inside"):
        with torch.inference_mode(), linear_weights_cast(model, "bf16"):
            assert all(m.weight.dtype == torch.bfloat16 and not isinstance(m.weight, torch.nn.Parameter)
                       for m in linears)
            raise RuntimeError("inside")
    assert_untouched(model, before)
    with linear_weights_cast(model, "fp32"):  # nothing to cast: autocast is off
        assert all(m.weight.dtype == torch.float32 for m in linears)


def test_training_after_an_evaluation_is_unchanged(dev_splits, tokenizer):
    """A step after predict() gives the weights a step gives without it: the evaluation left nothing behind."""
    results = []
    for evaluate_first in (False, True):
        model = multitask("reference")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        if evaluate_first:
            predict(model, dev_splits["sst"], tokenizer, torch.device("cpu"), 16, "bf16")
        model.train()
        minbert.set_dropout(model, 0.0)
        batch = make_batch(dev_splits["sst"], list(range(8)), tokenizer, "cpu")
        labels = batch.pop("labels")
        with autocast(torch.device("cpu"), "bf16"):
            task_spec("sst").loss(model("sst", batch), labels).backward()
        optimizer.step()
        results.append(copy.deepcopy(model.state_dict()))
    assert all(torch.equal(results[0][k], results[1][k]) for k in results[0])


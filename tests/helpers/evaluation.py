"""Multitask models, per-batch prediction and weight snapshots for evaluation tests."""
import torch

import minbert
from tasks.encoded import make_batch
from tasks.heads import MultitaskModel, task_spec
from tasks.machine import autocast

TASKS = ("sst", "quora", "sts")


@torch.no_grad()
def per_batch_predict(model, split, tokenizer, device, batch_size, precision):
    """The algorithm before: each batch under autocast, its predictions read to the host at once."""
    model.eval()
    values = task_spec(split.task, model.pair_mode, model.task_heads).predict
    order = sorted(range(len(split)), key=split.lengths.__getitem__)
    out = [None] * len(split)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = make_batch(split, idx, tokenizer, device)
        batch.pop("labels", None)
        with autocast(device, precision):
            found = values(model(split.task, batch)).float().cpu().tolist()
        for i, v in zip(idx, found):
            out[i] = v
    return out


def multitask(implementation: str, pair_mode: str = "cross", pooling: str = "mean") -> MultitaskModel:
    torch.manual_seed(3)
    # Two of the embedded model's six layers: what holds bit for bit holds layer by layer, at a third of the
    # cost.
    encoder = minbert.truncate_layers(minbert.from_pretrained("minilm", implementation=implementation), 2)
    return MultitaskModel(encoder, TASKS, pair_mode=pair_mode, pooling=pooling)


def snapshot(model):
    return [(name, p, p.detach().clone()) for name, p in model.named_parameters()]


def assert_untouched(model, before):
    after = list(model.named_parameters())
    assert [n for n, _ in after] == [n for n, _, _ in before]  # same order, same names
    for (name, p), (_, kept, values) in zip(after, before):
        assert p is kept and isinstance(p, torch.nn.Parameter) and p.dtype == torch.float32, name
        assert torch.equal(p, values), name

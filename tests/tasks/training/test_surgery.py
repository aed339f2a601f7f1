import math

import numpy as np
import pytest
import torch

from tasks.training.surgery import TaskGradients, assign_flat_grad, combine, flatten_grads


def t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def rng():
    return np.random.default_rng(0)


def pcgrad(grads: dict, rng: np.random.Generator):
    """PCGrad of named 1-D task gradients, through the trainer's `combine` (rows in float32, as
    TaskGradients keeps them)."""
    return combine(torch.stack([g.float() for g in grads.values()]), list(grads), "pcgrad", rng)


def dominant(grads: dict):
    return combine(torch.stack([g.float() for g in grads.values()]), list(grads), "dominant", rng())


def test_pcgrad_removes_the_conflicting_component():
    g1, g2 = t(1.0, 0.0), t(-1.0, 1.0)
    combined, stats = pcgrad({"a": g1, "b": g2}, rng())
    projected_a = g1 - (g1 @ g2) / (g2 @ g2) * g2  # [0.5, 0.5]
    projected_b = g2 - (g2 @ g1) / (g1 @ g1) * g1  # [0, 1]
    assert float(projected_a @ g2) == 0.0 and float(projected_b @ g1) == 0.0
    assert torch.allclose(combined, projected_a + projected_b)
    assert torch.allclose(combined, t(0.5, 1.5))
    assert (stats.conflicts, stats.pairs) == (1, 1)
    assert stats.cosines[("a", "b")] == pytest.approx(-1 / math.sqrt(2))


def test_pcgrad_leaves_agreeing_gradients_alone():
    combined, stats = pcgrad({"a": t(1.0, 0.0, 2.0), "b": t(1.0, 1.0, 0.0)}, rng())
    assert torch.equal(combined, t(2.0, 1.0, 2.0))
    assert (stats.conflicts, stats.pairs) == (0, 1)


def test_pcgrad_three_tasks_stats_and_determinism():
    grads = {"sst": t(1.0, 0.0, 0.0), "quora": t(-1.0, 1.0, 0.0), "sts": t(0.0, -1.0, 1.0)}
    first, stats = pcgrad(grads, np.random.default_rng(5))
    second, _ = pcgrad(grads, np.random.default_rng(5))
    assert torch.equal(first, second)
    assert (stats.conflicts, stats.pairs) == (2, 3)  # sst/quora and quora/sts conflict, sst/sts orthogonal
    assert set(stats.cosines) == {("sst", "quora"), ("sst", "sts"), ("quora", "sts")}
    assert stats.cosines[("sst", "sts")] == 0.0


def test_pcgrad_three_tasks_only_touches_the_conflicting_pair():
    grads = {"a": t(1.0, 0.0, 0.0), "b": t(-1.0, 1.0, 0.0), "c": t(0.0, 0.0, 1.0)}
    for seed in range(4):  # the projection order cannot matter here
        combined, stats = pcgrad(grads, np.random.default_rng(seed))
        assert torch.allclose(combined, t(0.5, 0.5, 0.0) + t(0.0, 1.0, 0.0) + t(0.0, 0.0, 1.0))
        assert (stats.conflicts, stats.pairs) == (1, 3)


def test_pcgrad_guards_zero_gradients_and_accepts_bf16():
    grads = {"a": t(0.0, 0.0, dtype=torch.bfloat16), "b": t(1.0, -2.0, dtype=torch.bfloat16)}
    combined, stats = pcgrad(grads, rng())
    assert combined.dtype == torch.float32
    assert torch.equal(combined, t(1.0, -2.0))
    assert stats.cosines[("a", "b")] == 0.0 and stats.conflicts == 0


def test_single_task_passes_through():
    combined, stats = pcgrad({"sst": t(1.0, -1.0)}, rng())
    assert torch.equal(combined, t(1.0, -1.0)) and stats.pairs == 0
    combined, stats = dominant({"sst": t(1.0, -1.0)})
    assert torch.equal(combined, t(1.0, -1.0)) and stats.pairs == 0


def test_dominant_keeps_the_largest_gradient_whole():
    big, small, other = t(3.0, 0.0, 0.0), t(-1.0, 1.0, 0.0), t(0.5, 0.0, 1.0)
    combined, stats = dominant({"small": small, "big": big, "other": other})
    # small loses its part against big ([-1, 0, 0]); other agrees with big and is kept
    assert torch.allclose(combined, big + t(0.0, 1.0, 0.0) + other)
    assert float((combined - big - other) @ big) == 0.0
    assert (stats.conflicts, stats.pairs) == (2, 3)  # small/big and small/other


def test_a_matrix_that_is_not_one_row_per_task_is_rejected():
    with pytest.raises(ValueError, match="one row per task"):
        combine(torch.zeros(2, 3), ["a"], "pcgrad", rng())
    with pytest.raises(ValueError, match="one row per task"):
        combine(torch.zeros(0, 3), [], "dominant", rng())
    with pytest.raises(ValueError, match="one row per task"):
        combine(torch.zeros(3), ["a", "b", "c"], "pcgrad", rng())
    with pytest.raises(ValueError, match="unknown gradient surgery"):
        combine(torch.zeros(2, 3), ["a", "b"], "mean", rng())


def test_flatten_and_assign_round_trip():
    w = torch.nn.Parameter(torch.zeros(2, 3))
    b = torch.nn.Parameter(torch.zeros(3))
    h = torch.nn.Parameter(torch.zeros(2, dtype=torch.bfloat16))
    w.grad = torch.arange(6.0).reshape(2, 3)
    h.grad = t(1.0, 2.0, dtype=torch.bfloat16)
    flat = flatten_grads([w, b, h])
    assert flat.dtype == torch.float32
    assert torch.equal(flat, t(0, 1, 2, 3, 4, 5, 0, 0, 0, 1, 2))  # b has no grad -> zeros
    assign_flat_grad([w, b, h], flat * 2)
    assert torch.equal(w.grad, 2 * torch.arange(6.0).reshape(2, 3))
    assert torch.equal(b.grad, torch.zeros(3))
    assert h.grad.dtype == torch.bfloat16 and torch.equal(h.grad.float(), t(2.0, 4.0))
    with pytest.raises(ValueError):
        assign_flat_grad([w, b], flat)


# The implementation before the Gram-matrix one (flat vectors, a host read per 1M-element chunk of every dot
# product), kept as the reference the matrix version is held to.
def _old_dot(a, b, chunk=1 << 20):
    return sum(torch.dot(a[s:s + chunk].double(), b[s:s + chunk].double()).item() for s in range(0, a.numel(), chunk))


def _old_pcgrad(grads, rng):
    grads = {k: g.float() for k, g in grads.items()}
    squares = {k: _old_dot(g, g) for k, g in grads.items()}
    tasks, total = list(grads), torch.zeros_like(next(iter(grads.values())))
    for task in tasks:
        g = grads[task].clone()
        others = [o for o in tasks if o != task]
        for k in rng.permutation(len(others)).tolist():
            d = _old_dot(g, grads[others[k]])
            if d < 0 and squares[others[k]] > 0:
                g.add_(grads[others[k]], alpha=-d / squares[others[k]])
        total += g
    return total


def _old_dominant(grads):
    grads = {k: g.float() for k, g in grads.items()}
    squares = {k: _old_dot(g, g) for k, g in grads.items()}
    lead = max(grads, key=lambda k: squares[k])
    total = grads[lead].clone()
    for task, g in grads.items():
        if task != lead:
            d = _old_dot(g, grads[lead])
            total += g - (d / squares[lead]) * grads[lead] if d < 0 and squares[lead] > 0 else g
    return total


@pytest.mark.parametrize("seed", range(4))
def test_matrix_surgery_equals_the_flat_vector_implementation(seed):
    """Random conflicting gradients of four tasks (one over two 1M-element chunks, in bf16 and float32): the
    Gram-matrix PCGrad and dominant equal the old per-vector ones, the same random order included."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(3_000_000, generator=gen)
    grads = {name: (torch.randn(3_000_000, generator=gen) - sign * base).to(dtype)
             for name, sign, dtype in (("a", 0.0, torch.float32), ("b", 1.5, torch.float32),
                                       ("c", -1.0, torch.bfloat16), ("d", 0.5, torch.float32))}
    new, stats = pcgrad(grads, np.random.default_rng(seed))
    old = _old_pcgrad(grads, np.random.default_rng(seed))
    assert stats.conflicts > 0
    assert (new - old).abs().max() <= 1e-6 * old.abs().max()
    new, _ = dominant(grads)
    old = _old_dominant(grads)
    assert (new - old).abs().max() <= 1e-6 * old.abs().max()


def test_task_gradients_are_rows_read_once(monkeypatch):
    """The rows are the parameters' gradients in place; the surgery reads the host once (the Gram matrix)."""
    w, b = torch.nn.Parameter(torch.zeros(2, 3)), torch.nn.Parameter(torch.zeros(3))
    grads = TaskGradients([w, b], ["x", "y"], torch.device("cpu"))
    w.grad = torch.arange(6.0).reshape(2, 3)
    grads.store("x")
    w.grad, b.grad = -torch.ones(2, 3), torch.ones(3)
    grads.store("y")
    assert torch.equal(grads.matrix, torch.stack([t(0, 1, 2, 3, 4, 5, 0, 0, 0), t(-1, -1, -1, -1, -1, -1, 1, 1, 1)]))
    reads = []
    real = torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self, *a, **k: reads.append(1) or real(self, *a, **k))
    monkeypatch.setattr(torch.Tensor, "item", lambda self: reads.append("item"))
    merged, stats = combine(grads.matrix, grads.tasks, "pcgrad", rng())
    assert reads == [1] and stats.conflicts == 1

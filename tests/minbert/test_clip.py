"""minbert.clip_grad_norm_ (BLAS dot products, scaling only when needed) held to torch's clip_grad_norm_."""
import pytest
import torch

import minbert


def parameters_with_grads(scale: float, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(300, 32), (32, 32), (64,), (1,), (7, 5, 3)]
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    for p in params:
        p.grad = scale * torch.randn(p.shape, generator=g)
    params.append(torch.nn.Parameter(torch.zeros(3)))  # no gradient: skipped by both
    return params


def clipped_both_ways(scale: float, max_norm: float = 1.0):
    ours, theirs = parameters_with_grads(scale), parameters_with_grads(scale)
    got = minbert.clip_grad_norm_(ours, max_norm)
    want = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    return got, want, ours, theirs


@pytest.mark.parametrize("scale", [1e-3, 0.0095, 0.0105, 30.0],
                         ids=["within", "just-within", "just-above", "far-above"])
def test_norm_and_clipped_gradients_match_torch(scale):
    got, want, ours, theirs = clipped_both_ways(scale)
    assert got.dtype == want.dtype == torch.float32
    assert torch.allclose(got, want, rtol=1e-5, atol=0)
    for a, b in zip(ours, theirs):
        if b.grad is None:
            assert a.grad is None
        else:
            assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-12)
    total = torch.cat([p.grad.reshape(-1) for p in ours if p.grad is not None]).norm()
    assert total <= 1.0 + 1e-5


def test_gradients_within_bounds_are_not_written():
    params = [p for p in parameters_with_grads(1e-3) if p.grad is not None]
    versions = [p.grad._version for p in params]
    minbert.clip_grad_norm_(params, 1.0)
    assert [p.grad._version for p in params] == versions


def test_a_single_tensor_is_clipped_like_a_list_of_one():
    p = torch.nn.Parameter(torch.zeros(3, 4))
    p.grad = torch.full((3, 4), 10.0)
    assert torch.allclose(minbert.clip_grad_norm_(p, 1.0), torch.tensor(20 * 3 ** 0.5))
    assert torch.allclose(p.grad.norm(), torch.tensor(1.0), rtol=1e-5)


def test_overflowing_gradients_are_treated_as_torch_treats_them():
    got, want, ours, theirs = clipped_both_ways(1e22)  # squares beyond float32's range
    assert not torch.isfinite(got) and not torch.isfinite(want)
    for a, b in zip(ours, theirs):
        if b.grad is not None:
            assert torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_gradient_gives_a_non_finite_norm(bad):
    params = parameters_with_grads(1.0)
    params[1].grad[3, 4] = bad
    assert not torch.isfinite(minbert.clip_grad_norm_(params, 1.0))


def test_other_dtypes_take_torchs_path(monkeypatch):
    params = parameters_with_grads(5.0)
    for p in params:
        p.data, p.grad = p.data.double(), (p.grad.double() if p.grad is not None else None)
    want = torch.nn.utils.clip_grad_norm_(parameters_with_grads(5.0), 1.0)
    calls = []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_",
                        lambda *a, real=torch.nn.utils.clip_grad_norm_, **k: calls.append(1) or real(*a, **k))
    got = minbert.clip_grad_norm_(params, 1.0)
    assert calls and got.dtype == torch.float64 and torch.allclose(got.float(), want, rtol=1e-6)

import inspect
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from minbert import AdamW
from tests.helpers import REPO

# Beside the course's data folder (its checks folder is a sibling of cs224n/), else beside the checkout.
_DATA_PARENTS = ([Path(os.environ["MINBERT_DATA_DIR"]).parent] if os.environ.get("MINBERT_DATA_DIR") else []) + \
    [REPO.parent / "shared" / "data"]
_CANDIDATES = [d / "cs224n-checks" / "optimizer_test.npy" for d in _DATA_PARENTS]
COURSE_REFERENCE = next((c for c in _CANDIDATES if c.exists()), _CANDIDATES[-1])


def _course_check_weights(optimizer_cls):
    """The course's optimizer check: fit a 3 -> 2 linear map for 1000 steps on its seeded inputs."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    model = nn.Linear(3, 2, bias=False)
    opt = optimizer_cls(model.parameters(), lr=1e-3, weight_decay=1e-4, correct_bias=True)
    for _ in range(1000):
        x = torch.tensor(rng.uniform(size=model.in_features), dtype=torch.float32)
        y = torch.stack([x[0] + x[1], -x[2]])
        loss = ((y - model(x)) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.weight.detach()


def test_passes_the_course_optimizer_check():
    if not COURSE_REFERENCE.exists():
        pytest.skip(f"course reference {COURSE_REFERENCE} not found")
    ref = torch.from_numpy(np.load(COURSE_REFERENCE))
    actual = _course_check_weights(AdamW)
    assert ref.dtype == actual.dtype and ref.shape == actual.shape
    assert torch.allclose(ref, actual, atol=1e-6, rtol=1e-4)  # the course's acceptance
    # The course's rtol admits any AdamW within ~5e-5; torch's form (eps outside the bias correction,
    # decay as p * (1 - lr * wd) in float32) lands 1.8e-5 off. The course's formula lands within 1e-7.
    assert (actual - ref).abs().max().item() <= 1e-6


def test_has_the_course_signature_and_defaults():
    params = inspect.signature(AdamW).parameters
    assert list(params) == ["params", "lr", "betas", "eps", "weight_decay", "correct_bias"]
    assert {k: p.default for k, p in params.items() if k != "params"} == dict(
        lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True)


@pytest.mark.parametrize("correct_bias", [False, True])
def test_two_steps_on_a_scalar_by_hand(correct_bias):
    """eps is comparable to sqrt(v) and lr * wd to the step, so their placement and order show."""
    lr, eps, wd = 0.1, 1e-2, 0.1
    p = nn.Parameter(torch.tensor(1.0, dtype=torch.float64))
    opt = AdamW([p], lr=lr, betas=(0.9, 0.999), eps=eps, weight_decay=wd, correct_bias=correct_bias)
    # Step sizes: lr, or lr * sqrt(1 - beta2^t) / (1 - beta1^t) with the bias correction.
    step1 = lr * (math.sqrt(1 - 0.999) / (1 - 0.9) if correct_bias else 1)
    step2 = lr * (math.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2) if correct_bias else 1)
    # g = 0.5: m = 0.1 * 0.5, v = 0.001 * 0.5^2; the Adam step, then decay of the updated weight.
    expected1 = 1.0 - step1 * 0.05 / (math.sqrt(0.00025) + eps)
    expected1 -= lr * wd * expected1
    # g = -0.25: m = 0.9 * 0.05 + 0.1 * -0.25, v = 0.999 * 0.00025 + 0.001 * 0.25^2.
    expected2 = expected1 - step2 * 0.02 / (math.sqrt(0.00031225) + eps)
    expected2 -= lr * wd * expected2
    for g, expected in ((0.5, expected1), (-0.25, expected2)):
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        assert p.item() == pytest.approx(expected, rel=0, abs=1e-12)


def _train(optimizer_cls, steps=100):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = optimizer_cls(model.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=0.0, weight_decay=0.0)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=gen)
        y = torch.randint(0, 3, (32,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_adam_core_matches_torch_adamw_after_100_steps():
    """Without eps and weight decay both are plain Adam. With them they differ by design: torch adds eps
    after the bias correction and decays the weights before the update (the two-step test pins ours)."""
    ours = _train(AdamW)
    ref = _train(lambda params, **kw: torch.optim.AdamW(params, foreach=False, **kw))
    for a, b in zip(ours, ref, strict=True):
        assert (a - b).abs().max().item() <= 1e-6
    moved = _train(AdamW, steps=1)
    assert any((a - b).abs().max() > 0 for a, b in zip(ours, moved))


def test_weight_decay_is_decoupled():
    """With zero gradient, AdamW only shrinks the weights by lr * wd (Adam+L2 would take a full step)."""
    p = nn.Parameter(torch.ones(4))
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(4)
    opt.step()
    assert torch.allclose(p.detach(), torch.full((4,), 1 - 0.1 * 0.5))


def test_loads_a_state_saved_without_correct_bias():
    """Checkpoints from before the option existed resume with the bias correction on."""
    p = nn.Parameter(torch.ones(2))
    saved = AdamW([p]).state_dict()
    del saved["param_groups"][0]["correct_bias"]
    opt = AdamW([p], correct_bias=False)
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["correct_bias"] is True
    p.grad = torch.ones(2)
    opt.step()


@pytest.mark.parametrize("kwargs, match", [
    (dict(lr=-1.0), "learning rate"),
    (dict(betas=(1.0, 0.999)), "betas"),
    (dict(eps=-1e-8), "eps"),
    (dict(weight_decay=-0.1), "weight_decay"),
])
def test_rejects_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdamW([nn.Parameter(torch.ones(1))], **kwargs)

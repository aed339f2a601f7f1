import pytest
import torch
from torch import nn

from minbert import AdamW


def _train(optimizer_cls, weight_decay, steps=100):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = optimizer_cls(model.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8,
                        weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=gen)
        y = torch.randint(0, 3, (32,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("weight_decay", [0.0, 0.01, 0.1])
def test_matches_torch_adamw_after_100_steps(weight_decay):
    ours = _train(AdamW, weight_decay)
    ref = _train(lambda params, **kw: torch.optim.AdamW(params, foreach=False, **kw), weight_decay)
    for a, b in zip(ours, ref, strict=True):
        assert (a - b).abs().max().item() <= 1e-6
    moved = _train(AdamW, weight_decay, steps=1)
    assert any((a - b).abs().max() > 0 for a, b in zip(ours, moved))


def test_weight_decay_is_decoupled():
    """With zero gradient, AdamW only shrinks the weights by lr * wd (Adam+L2 would take a full step)."""
    p = nn.Parameter(torch.ones(4))
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(4)
    opt.step()
    assert torch.allclose(p.detach(), torch.full((4,), 1 - 0.1 * 0.5))


def test_rejects_negative_learning_rate():
    with pytest.raises(ValueError):
        AdamW([nn.Parameter(torch.ones(1))], lr=-1.0)

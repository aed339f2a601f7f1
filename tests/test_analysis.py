import math

import numpy as np
import pytest
import torch

from minbert.analysis import (
    attention_js_divergence,
    layer_weight_distances,
    layerwise_attention_js,
    layerwise_svcca,
    svcca_distance,
    weight_distances,
)

LN2 = math.log(2.0)


def _rand_attn(gen, b=2, h=3, s=6):
    return torch.softmax(torch.randn(b, h, s, s, generator=gen), dim=-1)


# ---------------------------------------------------------------- attention JS

def test_js_identical_is_zero():
    gen = torch.Generator().manual_seed(0)
    a = _rand_attn(gen)
    mask = torch.ones(2, 6, dtype=torch.long)
    assert attention_js_divergence(a, a.clone(), mask) == pytest.approx(0.0, abs=1e-7)


def test_js_disjoint_is_ln2():
    b, h, s = 2, 2, 4
    a = torch.zeros(b, h, s, s)
    c = torch.zeros(b, h, s, s)
    a[..., 0] = 1.0
    c[..., 1] = 1.0
    mask = torch.ones(b, s)
    assert attention_js_divergence(a, c, mask) == pytest.approx(LN2, abs=1e-7)


def test_js_symmetric_and_bounded():
    gen = torch.Generator().manual_seed(1)
    a, c = _rand_attn(gen), _rand_attn(gen)
    mask = torch.ones(2, 6)
    v1 = attention_js_divergence(a, c, mask)
    v2 = attention_js_divergence(c, a, mask)
    assert v1 == pytest.approx(v2, abs=1e-12)
    assert 0.0 < v1 < LN2


def test_js_padding_does_not_change_result():
    gen = torch.Generator().manual_seed(2)
    b, h, s, pad = 2, 3, 5, 3
    a, c = _rand_attn(gen, b, h, s), _rand_attn(gen, b, h, s)
    base = attention_js_divergence(a, c, torch.ones(b, s))

    def padded(x):
        # Real keys keep their relative weights; padding keys and queries get
        # arbitrary (non-zero) mass that must be ignored.
        big = torch.softmax(torch.randn(b, h, s + pad, s + pad, generator=gen), dim=-1)
        big[:, :, :s, :s] = 0.9 * x
        big[:, :, :s, s:] = 0.1 / pad
        return big

    mask = torch.cat([torch.ones(b, s), torch.zeros(b, pad)], dim=1)
    assert attention_js_divergence(padded(a), padded(c), mask) == pytest.approx(base, abs=1e-10)


def test_js_per_example_padding_weights_queries_equally():
    gen = torch.Generator().manual_seed(3)
    a, c = _rand_attn(gen, 2, 1, 4), _rand_attn(gen, 2, 1, 4)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    # Expected: per-row JS of renormalised real keys, averaged over the 6 real queries.
    vals = []
    for bi, n in ((0, 4), (1, 2)):
        for qi in range(n):
            p = a[bi, 0, qi, :n].double(); p = p / p.sum()
            q = c[bi, 0, qi, :n].double(); q = q / q.sum()
            m = (p + q) / 2
            vals.append(0.5 * float((p * (p / m).log()).sum() + (q * (q / m).log()).sum()))
    got = attention_js_divergence(a, c, mask)
    assert got == pytest.approx(sum(vals) / len(vals), abs=1e-10)


def test_layerwise_attention_js():
    gen = torch.Generator().manual_seed(4)
    a = [_rand_attn(gen) for _ in range(3)]
    c = [a[0], _rand_attn(gen), a[2]]
    out = layerwise_attention_js(a, c, torch.ones(2, 6))
    assert len(out) == 3
    assert out[0] == pytest.approx(0.0, abs=1e-7) and out[2] == pytest.approx(0.0, abs=1e-7)
    assert out[1] > 0.0


# ---------------------------------------------------------------- SVCCA

def test_svcca_self_is_zero():
    x = np.random.default_rng(0).standard_normal((300, 32))
    assert svcca_distance(x, x) < 1e-6
    assert svcca_distance(torch.from_numpy(x).float(), torch.from_numpy(x).float()) < 1e-6


def test_svcca_invertible_linear_transform_is_zero():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((400, 24))
    a = rng.standard_normal((24, 24)) + 5 * np.eye(24)  # well-conditioned, invertible
    # Keeping all variance makes both reduced subspaces the full column space.
    assert svcca_distance(x, x @ a + 3.0, keep_variance=1.0) < 1e-6
    # Exactly low-rank data: the default threshold keeps the whole signal subspace.
    z = rng.standard_normal((400, 4)) @ rng.standard_normal((4, 48))
    q, _ = np.linalg.qr(rng.standard_normal((48, 48)))
    b = q @ np.diag(np.linspace(1.0, 2.0, 48))
    assert svcca_distance(z, z @ b) < 1e-6


def test_svcca_independent_noise_is_large():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1000, 32))
    y = rng.standard_normal((1000, 32))
    d = svcca_distance(x, y)
    assert 0.5 < d <= 1.0


def test_svcca_fewer_points_than_dims_is_stable():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 256))
    d_self = svcca_distance(x, x)
    d_other = svcca_distance(x, rng.standard_normal((40, 128)))
    assert d_self < 1e-6
    assert np.isfinite(d_other) and 0.0 <= d_other <= 1.0


def test_layerwise_svcca_ignores_padding_and_subsamples():
    gen = torch.Generator().manual_seed(5)
    b, s, h = 4, 20, 16
    base = torch.randn(b, s, h, generator=gen, dtype=torch.float64)
    mask = torch.ones(b, s)
    mask[:, 15:] = 0
    # Layer 0 identical on real tokens but garbage on padding; layer 1 independent.
    other0 = base.clone()
    other0[:, 15:] = torch.randn(b, 5, h, generator=gen, dtype=torch.float64)
    other1 = torch.randn(b, s, h, generator=gen, dtype=torch.float64)
    out = layerwise_svcca([base, base], [other0, other1], mask, max_points=50, seed=0)
    assert len(out) == 2
    assert out[0] < 1e-6
    assert out[1] > 0.2
    # Seeded subsampling is deterministic.
    again = layerwise_svcca([base, base], [other0, other1], mask, max_points=50, seed=0)
    assert again == out


# ---------------------------------------------------------------- weights

def _state(gen, num_layers=3):
    sd = {
        "embeddings.word_embeddings.weight": torch.randn(10, 8, generator=gen),
        "embeddings.position_ids": torch.arange(8).unsqueeze(0),
        "pooler.dense.weight": torch.randn(8, 8, generator=gen),
    }
    for i in range(num_layers):
        sd[f"encoder.layer.{i}.attention.self.query.weight"] = torch.randn(8, 8, generator=gen)
        sd[f"encoder.layer.{i}.attention.self.query.bias"] = torch.randn(8, generator=gen)
        sd[f"encoder.layer.{i}.output.dense.weight"] = torch.randn(8, 16, generator=gen)
    return sd


def test_weight_distances_self_is_zero_and_skips_non_float():
    sd = _state(torch.Generator().manual_seed(6))
    d = weight_distances(sd, {k: v.clone() for k, v in sd.items()})
    assert "embeddings.position_ids" not in d
    assert len(d) == len(sd) - 1
    assert all(v == 0.0 for v in d.values())


def test_weight_distances_known_perturbation_and_mismatch():
    sd = _state(torch.Generator().manual_seed(7))
    other = {k: v.clone() for k, v in sd.items()}
    other["pooler.dense.weight"] = other["pooler.dense.weight"] + 0.5  # 64 entries
    other["encoder.layer.1.output.dense.weight"][0, 0] += 3.0
    other["encoder.layer.1.output.dense.weight"][2, 5] -= 4.0
    other["classifier.weight"] = torch.randn(2, 8)  # only in one dict
    other["embeddings.word_embeddings.weight"] = torch.randn(12, 8)  # resized
    d = weight_distances(sd, other)
    assert d["pooler.dense.weight"] == pytest.approx(0.5 * 8, rel=1e-6)
    assert d["encoder.layer.1.output.dense.weight"] == pytest.approx(5.0, rel=1e-6)
    assert "classifier.weight" not in d
    assert "embeddings.word_embeddings.weight" not in d


def test_layer_weight_distances_only_perturbed_layer():
    sd = _state(torch.Generator().manual_seed(8), num_layers=4)
    other = {k: v.clone() for k, v in sd.items()}
    other["encoder.layer.2.attention.self.query.weight"][1, 1] += 3.0
    other["encoder.layer.2.output.dense.weight"][0, 3] += 4.0
    other["pooler.dense.weight"] += 1.0  # outside the encoder: must not count
    out = layer_weight_distances(sd, other, num_layers=4)
    assert len(out) == 4
    assert out[2] == pytest.approx(5.0, rel=1e-6)
    assert out[0] == out[1] == out[3] == 0.0


def test_layer_weight_distances_handles_prefixed_keys_and_multidigit_layers():
    gen = torch.Generator().manual_seed(9)
    sd = {f"bert.encoder.layer.{i}.output.dense.weight": torch.randn(4, 4, generator=gen)
          for i in range(12)}
    other = {k: v.clone() for k, v in sd.items()}
    other["bert.encoder.layer.11.output.dense.weight"][0, 0] += 2.0
    out = layer_weight_distances(sd, other, num_layers=12)
    assert out[11] == pytest.approx(2.0, rel=1e-6)
    assert out[1] == 0.0 and sum(out[:11]) == 0.0

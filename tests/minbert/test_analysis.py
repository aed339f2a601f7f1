import math

import numpy as np
import pytest
import torch

from minbert.analysis import (
    OUTPUT_SUBLAYER_WEIGHT,
    SVCCA_POINTS_PER_DIM,
    attention_js_divergence,
    attention_js_per_sentence,
    layer_tensor_distances,
    layer_weight_distances,
    layerwise_attention_js,
    layerwise_svcca,
    svcca_distance,
    svcca_sample,
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


def test_js_is_averaged_per_sentence_not_per_token():
    """Hao et al.: tokens, then heads, then sentences. A 2-token sentence whose attention moved
    completely (JS = ln 2 for both queries) and a 4-token one whose attention did not move:
    per sentence (ln 2 + 0) / 2 = 0.347; token-weighted it would be 2 ln 2 / 6 = 0.231."""
    s = 4
    a = torch.full((2, 1, s, s), 0.25)
    b = a.clone()
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    a[0, 0, :, :] = torch.tensor([0.7, 0.0, 0.2, 0.1])  # key 0 only, once padding keys are dropped
    b[0, 0, :, :] = torch.tensor([0.0, 0.6, 0.3, 0.1])  # key 1 only
    per_sentence = attention_js_per_sentence(a, b, mask)
    assert per_sentence == pytest.approx([LN2, 0.0], abs=1e-12)
    assert attention_js_divergence(a, b, mask) == pytest.approx(LN2 / 2, abs=1e-12)
    assert attention_js_divergence(a, b, mask) != pytest.approx(2 * LN2 / 6, abs=1e-3)


def test_js_heads_count_equally_within_a_sentence():
    gen = torch.Generator().manual_seed(3)
    a, c = _rand_attn(gen, 2, 3, 4), _rand_attn(gen, 2, 3, 4)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])

    def js(p, q):
        p, q = p.double() / p.sum(), q.double() / q.sum()
        m = (p + q) / 2
        return 0.5 * float((p * (p / m).log()).sum() + (q * (q / m).log()).sum())

    expected = []
    for bi, n in ((0, 4), (1, 2)):
        heads = [sum(js(a[bi, h, qi, :n], c[bi, h, qi, :n]) for qi in range(n)) / n for h in range(3)]
        expected.append(sum(heads) / 3)
    assert attention_js_per_sentence(a, c, mask) == pytest.approx(expected, abs=1e-8)


def test_js_rejects_a_sentence_without_tokens():
    a = _rand_attn(torch.Generator().manual_seed(0), 2, 1, 3)
    with pytest.raises(ValueError, match="sentence 1"):
        attention_js_per_sentence(a, a, torch.tensor([[1, 1, 0], [0, 0, 0]]))


def test_layerwise_attention_js():
    gen = torch.Generator().manual_seed(4)
    a = [_rand_attn(gen) for _ in range(3)]
    c = [a[0], _rand_attn(gen), a[2]]
    out = layerwise_attention_js(a, c, torch.ones(2, 6))
    assert out.shape == (3, 2)  # layers x sentences
    assert out[0] == pytest.approx([0.0, 0.0], abs=1e-7) and out[2] == pytest.approx([0.0, 0.0], abs=1e-7)
    assert (out[1] > 0.0).all()


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


def test_svcca_independent_noise_on_too_few_points_is_warned_about(capsys):
    """100 points in 64 dimensions: CCA finds spurious correlation (similarity ~0.7)."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((100, 64)), rng.standard_normal((100, 64))
    assert 1 - svcca_distance(x, y) > 0.5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: SVCCA compared 100 points for ")
    assert f"fewer than {SVCCA_POINTS_PER_DIM} per dimension" in err


def test_svcca_independent_noise_on_enough_points_is_dissimilar(capsys):
    rng = np.random.default_rng(2)
    n = SVCCA_POINTS_PER_DIM * 64
    x, y = rng.standard_normal((n, 64)), rng.standard_normal((n, 64))
    assert 1 - svcca_distance(x, y) < 0.2
    assert capsys.readouterr().err == ""


def test_svcca_sample_is_enough_for_the_width():
    assert svcca_sample(100, 16).tolist() == list(range(100))  # fewer than needed: every token
    chosen = svcca_sample(10_000, 16, seed=3)
    assert len(chosen) == SVCCA_POINTS_PER_DIM * 16 and len(set(chosen.tolist())) == len(chosen)
    assert (np.diff(chosen) > 0).all() and chosen.tolist() == svcca_sample(10_000, 16, seed=3).tolist()


def test_svcca_fewer_points_than_dims_is_stable():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 256))
    d_self = svcca_distance(x, x)
    d_other = svcca_distance(x, rng.standard_normal((40, 128)))
    assert d_self < 1e-6
    assert np.isfinite(d_other) and 0.0 <= d_other <= 1.0


def test_layerwise_svcca_ignores_padding_and_subsamples(capsys):
    gen = torch.Generator().manual_seed(5)
    b, s, h = 4, 150, 16
    base = torch.randn(b, s, h, generator=gen, dtype=torch.float64)
    mask = torch.ones(b, s)
    mask[:, 135:] = 0
    # Layer 0 identical on real tokens but garbage on padding; layer 1 independent.
    other0 = base.clone()
    other0[:, 135:] = torch.randn(b, 15, h, generator=gen, dtype=torch.float64)
    other1 = torch.randn(b, s, h, generator=gen, dtype=torch.float64)
    out = layerwise_svcca([base, base], [other0, other1], mask, seed=0)
    assert len(out) == 2
    assert out[0] < 1e-6
    assert out[1] > 0.8  # 540 real tokens, sampled down to 20 x 16: the noise floor stays low
    assert capsys.readouterr().err == ""
    # Seeded subsampling is deterministic.
    again = layerwise_svcca([base, base], [other0, other1], mask, seed=0)
    assert again == out


def test_layerwise_svcca_warns_once_when_too_few_tokens(capsys):
    gen = torch.Generator().manual_seed(6)
    x, y = (torch.randn(1, 30, 16, generator=gen, dtype=torch.float64) for _ in range(2))
    layerwise_svcca([x, x, x], [y, x, y], None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: layerwise SVCCA compared 30 points")


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


def test_layer_tensor_distances_keep_every_tensor_and_name_the_output_sublayer():
    """Hand-computed: layer 1's output.dense.weight moves by (3, 4) -> 5; its query bias by 12 -> 12;
    layer 0's output.dense.weight by 0.5 in each of its 8 x 16 entries -> 0.5 * sqrt(128)."""
    sd = _state(torch.Generator().manual_seed(10))
    other = {k: v.clone() for k, v in sd.items()}
    other["encoder.layer.1.output.dense.weight"][0, 0] += 3.0
    other["encoder.layer.1.output.dense.weight"][7, 15] -= 4.0
    other["encoder.layer.1.attention.self.query.bias"][2] += 12.0
    other["encoder.layer.0.output.dense.weight"] += 0.5
    out = layer_tensor_distances(sd, other, num_layers=3)
    assert set(out) == {"attention.self.query.weight", "attention.self.query.bias", OUTPUT_SUBLAYER_WEIGHT}
    assert out[OUTPUT_SUBLAYER_WEIGHT] == pytest.approx([0.5 * math.sqrt(128), 5.0, 0.0], rel=1e-6)
    assert out["attention.self.query.bias"] == pytest.approx([0.0, 12.0, 0.0], rel=1e-6)
    assert out["attention.self.query.weight"] == [0.0, 0.0, 0.0]
    assert layer_weight_distances(sd, other, num_layers=3) == pytest.approx([0.5 * math.sqrt(128), 13.0, 0.0])

"""Model edits: exactly the named tensors change, the way the studies define it."""
import copy

import pytest
import torch

import minbert
from minbert import UserError


@pytest.fixture()
def model(pretrained):
    return copy.deepcopy(pretrained)


def _changed(before: dict, after: dict) -> set:
    return {k for k in before if not torch.equal(before[k], after[k])}


def _layer_keys(model, i):
    return {k for k in model.state_dict() if k.startswith(f"encoder.layer.{i}.")}


def test_reinit_from_layer_draws_truncated_normal_and_leaves_the_rest(model, pretrained):
    before = pretrained.state_dict()
    minbert.reinit_layers_from(model, 4, generator=torch.Generator().manual_seed(0))
    after = model.state_dict()
    assert _changed(before, after) == _layer_keys(model, 4) | _layer_keys(model, 5)
    std = model.config.initializer_range
    for name, t in after.items():
        if name.startswith(("encoder.layer.4.", "encoder.layer.5.")):
            if name.endswith("weight") and t.dim() == 2:
                assert abs(t.std().item() - std * 0.88) < 0.002  # std of N(0, s) truncated at 2s is 0.88 s
                assert t.abs().max().item() <= 2 * std + 1e-7
            elif "LayerNorm.weight" in name:
                assert torch.all(t == 1)
            else:
                assert torch.all(t == 0)


def test_reinit_all_and_none(model, pretrained):
    minbert.reinit_layers_from(model, model.num_layers)
    assert not _changed(pretrained.state_dict(), model.state_dict())
    minbert.reinit_layers_from(model, 0)
    changed = _changed(pretrained.state_dict(), model.state_dict())
    assert changed == set().union(*(_layer_keys(model, i) for i in range(6)))  # embeddings kept


def test_reinit_embeddings_only_touches_embeddings(model, pretrained):
    minbert.reinit_embeddings(model)
    changed = _changed(pretrained.state_dict(), model.state_dict())
    assert changed and all(k.startswith("embeddings.") for k in changed)


def test_head_reinit_touches_only_that_heads_slices(model, pretrained):
    minbert.reinit_heads(model, [(2, 5)])
    before, after = pretrained.state_dict(), model.state_dict()
    d = model.config.head_size
    rows = slice(5 * d, 6 * d)
    changed = _changed(before, after)
    prefix = "encoder.layer.2.attention."
    assert changed == {prefix + s for s in ("self.query.weight", "self.key.weight", "self.value.weight",
                                            "self.query.bias", "self.key.bias", "self.value.bias",
                                            "output.dense.weight")}
    for proj in ("query", "key", "value"):
        w0, w1 = before[f"{prefix}self.{proj}.weight"], after[f"{prefix}self.{proj}.weight"]
        mask = torch.ones_like(w0, dtype=torch.bool)
        mask[rows] = False
        assert torch.equal(w0[mask], w1[mask]) and not torch.equal(w0[rows], w1[rows])
    o0, o1 = before[prefix + "output.dense.weight"], after[prefix + "output.dense.weight"]
    keep = torch.ones(o0.shape[1], dtype=torch.bool)
    keep[rows] = False
    assert torch.equal(o0[:, keep], o1[:, keep])


SIX_LINEAR_WEIGHTS = ("attention.self.query.weight", "attention.self.key.weight", "attention.self.value.weight",
                      "attention.output.dense.weight", "intermediate.dense.weight", "output.dense.weight")


@pytest.fixture()
def tiny():
    """A small BERT whose every tensor (biases and LayerNorms too) is away from its initial value, as a
    pretrained model's are, so that a reset to 0 or 1 shows."""
    model = minbert.build_model(minbert.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                                                   num_attention_heads=2, intermediate_size=32,
                                                   max_position_embeddings=16))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    return model


def test_linear_weights_policy_redraws_only_the_six_weight_matrices(tiny):
    """Singh & Giovanardi: biases and LayerNorms keep their pretrained values; the weights drawn are
    the ones policy "all" draws from the same seed."""
    before = copy.deepcopy(tiny.state_dict())
    every = minbert.reinit_layers(copy.deepcopy(tiny), [0, 2], generator=torch.Generator().manual_seed(0))
    minbert.reinit_layers(tiny, [0, 2], generator=torch.Generator().manual_seed(0), policy="linear-weights")
    changed = _changed(before, tiny.state_dict())
    assert changed == {f"encoder.layer.{i}.{name}" for i in (0, 2) for name in SIX_LINEAR_WEIGHTS}
    for name in changed:
        assert torch.equal(tiny.state_dict()[name], every.state_dict()[name]), name
    assert _changed(before, every.state_dict()) == _layer_keys(tiny, 0) | _layer_keys(tiny, 2)  # policy "all"


def test_linear_weights_policy_for_heads_and_embeddings(tiny):
    before = copy.deepcopy(tiny.state_dict())
    minbert.reinit_heads(tiny, [(1, 1)], policy="linear-weights")
    minbert.reinit_embeddings(tiny, policy="linear-weights")
    prefix = "encoder.layer.1.attention."
    assert _changed(before, tiny.state_dict()) == {
        prefix + "self.query.weight", prefix + "self.key.weight", prefix + "self.value.weight",
        prefix + "output.dense.weight", "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight"}
    minbert.reinit_heads(tiny, [(1, 1)])
    minbert.reinit_embeddings(tiny)
    assert {"embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias", prefix + "self.query.bias"} <= \
        _changed(before, tiny.state_dict())
    with pytest.raises(UserError, match="policy 'biases'"):
        minbert.reinit_layers(tiny, [0], policy="biases")


def test_head_index_past_the_heads_is_rejected(model):
    with pytest.raises(UserError):
        minbert.reinit_heads(model, [(0, 12)])
    with pytest.raises(UserError):
        minbert.reinit_layers(model, [6])


def test_permutation_reorders_and_identity_keeps_outputs(model, pretrained, tokenizer):
    batch = tokenizer(["a permutation test", "with two sentences of different length"])
    with torch.no_grad():
        ref = pretrained(**batch).last_hidden_state
        same = minbert.permute_layers(copy.deepcopy(pretrained), range(6))(**batch).last_hidden_state
        order = [3, 1, 0, 5, 2, 4]
        minbert.permute_layers(model, order)
        permuted = model(**batch).last_hidden_state
    assert torch.equal(ref, same)
    assert not torch.allclose(ref, permuted)
    for pos, old in enumerate(order):
        assert torch.equal(model.encoder.layer[pos].output.dense.weight,
                           pretrained.encoder.layer[old].output.dense.weight)
    with pytest.raises(UserError):
        minbert.permute_layers(model, [0, 0, 1, 2, 3, 4])


def test_truncate_keeps_first_layers(model, pretrained, tokenizer):
    batch = tokenizer(["probe me"])
    minbert.truncate_layers(model, 3)
    with torch.no_grad():
        full = pretrained(**batch, output_hidden_states=True).hidden_states[3]
        cut = model(**batch).last_hidden_state
    assert model.num_layers == 3 and torch.equal(full, cut)


@pytest.mark.parametrize("k,frozen", [(0, 0), (2, 2), (-1, 5), (6, 6), (9, 6)])
def test_freeze_until(model, k, frozen):
    assert minbert.freeze_until(model, k) == frozen
    for i, block in enumerate(model.encoder.layer):
        assert all(p.requires_grad == (i >= frozen) for p in block.parameters())
    assert all(p.requires_grad == (frozen == 0) for p in model.embeddings.parameters())
    assert all(p.requires_grad for p in model.pooler.parameters())


def test_freeze_beyond_layers_from_the_top_is_rejected(model):
    with pytest.raises(UserError):
        minbert.freeze_until(model, -7)

import copy

import pytest
import torch

import minbert
from tasks.heads import MultitaskModel
from tasks.smart import Smart, SmartConfig

FIRST = ["a gripping , funny film .", "dull .", "the plot never quite comes together", "i loved it"]
SECOND = ["an entertaining movie", "boring and slow , with no point", "it falls apart", "great"]


def make_model(pretrained, pair_mode="cross"):
    encoder = minbert.truncate_layers(copy.deepcopy(pretrained), 2)
    return MultitaskModel(encoder, pair_mode=pair_mode)


def make_batch(tokenizer, task, pair_mode):
    if task == "sst":
        return tokenizer(FIRST)
    if pair_mode == "cross":
        return tokenizer(FIRST, SECOND)
    a, b = tokenizer(FIRST), tokenizer(SECOND)
    return {**{f"a_{k}": v for k, v in a.items()}, **{f"b_{k}": v for k, v in b.items()}}


def spy_on_embeds(model):
    """Record the `inputs_embeds` each forward pass receives, to inspect the perturbation."""
    seen, forward = [], model.forward

    def spy(task, batch, inputs_embeds=None):
        if inputs_embeds is not None:
            seen.append([e.detach().clone() for e in inputs_embeds])
        return forward(task, batch, inputs_embeds=inputs_embeds)

    model.forward = spy
    return seen


def test_smoothness_vanishes_without_perturbation(pretrained, tokenizer):
    model = make_model(pretrained).eval()
    batch = make_batch(tokenizer, "sst", "cross")
    smart = Smart(model, SmartConfig(eps=0.0, sigma=0.0, mu=0.0), "cross")
    out = model("sst", batch)
    assert smart.regularisers("sst", batch, out)["smoothness"].item() < 1e-7


@pytest.mark.parametrize("task,pair_mode", [("sst", "cross"), ("sts", "cross"), ("quora", "siamese")])
def test_smoothness_is_positive_and_trains_the_encoder(pretrained, tokenizer, task, pair_mode):
    model = make_model(pretrained, pair_mode).eval()
    batch = make_batch(tokenizer, task, pair_mode)
    cfg = SmartConfig(eps=1e-2, sigma=1e-3, eta=1e-2, steps=2, lambda_s=3.0, mu=0.0)
    smart = Smart(model, cfg, pair_mode)
    out = model(task, batch)
    seen = spy_on_embeds(model)
    with torch.no_grad():
        clean = model.embed_inputs(batch)
    terms = smart.regularisers(task, batch, out)
    assert terms["smoothness"].item() > 0 and terms["proximal"].item() == 0.0
    terms["smoothness"].backward()
    for p in (model.encoder.encoder.layer[0].attention.self.query.weight,
              model.encoder.embeddings.word_embeddings.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    # Every pass perturbs every sequence (two in siamese mode), within the ball, off the padding.
    assert len(seen) == cfg.steps + 1
    final = seen[-1]
    masks = [batch[k] for k in sorted(batch) if k.endswith("attention_mask")]
    assert len(final) == len(clean) == (2 if pair_mode == "siamese" else 1)
    for e, c, m in zip(final, clean, masks):
        delta = e - c
        assert delta.abs().max() <= cfg.eps + 1e-6
        assert delta[m.bool()].abs().amax() > 5e-3   # the ascent moved it well beyond the random start
        assert delta[~m.bool()].abs().max() == 0.0


def test_projection_clamps_to_the_ball(pretrained, tokenizer):
    model = make_model(pretrained).eval()
    batch = make_batch(tokenizer, "sst", "cross")
    # sigma > 0 matters: at delta = 0 (eval mode) the divergence is at its minimum, so its gradient is 0.
    smart = Smart(model, SmartConfig(eps=1e-3, sigma=1e-4, eta=1.0, mu=0.0), "cross")
    seen = spy_on_embeds(model)
    with torch.no_grad():
        clean = model.embed_inputs(batch)[0]
    out = model("sst", batch)
    smart.regularisers("sst", batch, out)
    delta = seen[-1][0] - clean
    # Each example's largest gradient entry takes a full unit step, so it lands on the boundary.
    per_example = delta.abs().amax(dim=(1, 2))
    assert torch.allclose(per_example, torch.full_like(per_example, 1e-3), atol=1e-6)


def test_proximal_term_and_ema_update(pretrained, tokenizer):
    model = make_model(pretrained).eval()
    batch = make_batch(tokenizer, "sst", "cross")
    smart = Smart(model, SmartConfig(lambda_s=0.0, mu=2.0, beta=0.9), "cross")
    assert smart.regularisers("sst", batch, model("sst", batch))["proximal"].item() == 0.0
    assert not any(p.requires_grad for p in smart.ema.parameters())

    # Everything but the 11M-entry word-embedding table, which would only slow the test down.
    moved = {n: p for n, p in model.named_parameters() if "word_embeddings" not in n}
    with torch.no_grad():
        for p in moved.values():
            p.add_(0.01 * torch.randn_like(p))
    out = model("sst", batch)
    prox = smart.regularisers("sst", batch, out)["proximal"]
    assert prox.item() > 0
    prox.backward()
    assert model.heads["sst"].weight.grad.abs().sum() > 0

    before = {n: p.clone() for n, p in smart.ema.named_parameters() if n in moved}
    smart.update_ema()
    ema = dict(smart.ema.named_parameters())
    for n, p in moved.items():
        step = ema[n] - before[n]
        assert torch.allclose(step, 0.1 * (p.detach() - before[n]), atol=1e-6, rtol=0), n
    current = dict(model.named_parameters())
    smart.update_ema(beta=0.0)  # the override: a full copy
    assert all(torch.equal(p, current[n]) for n, p in smart.ema.named_parameters())


def test_ema_follows_train_mode(pretrained, tokenizer):
    model = make_model(pretrained).train()
    smart = Smart(model, SmartConfig(lambda_s=0.0), "cross")
    batch = make_batch(tokenizer, "sst", "cross")
    smart.regularisers("sst", batch, model("sst", batch))
    assert smart.ema.training
    model.eval()
    smart.regularisers("sst", batch, model("sst", batch))
    assert not smart.ema.training


def test_state_dict_round_trip(pretrained, tokenizer):
    model = make_model(pretrained).eval()
    smart = Smart(model, SmartConfig(), "cross")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    smart.update_ema()
    saved = copy.deepcopy(smart.state_dict())

    fresh = Smart(model, SmartConfig(), "cross")
    assert not torch.equal(fresh.ema.heads["sst"].bias, smart.ema.heads["sst"].bias)
    fresh.load_state_dict(saved)
    for (n, a), (_, b) in zip(fresh.ema.state_dict().items(), smart.ema.state_dict().items()):
        assert torch.equal(a, b), n
    with pytest.raises(ValueError):
        Smart(model, SmartConfig(mu=0.0), "cross").load_state_dict(saved)


def test_works_under_bf16_autocast(pretrained, tokenizer):
    model = make_model(pretrained, "siamese").train()
    batch = make_batch(tokenizer, "quora", "siamese")
    smart = Smart(model, SmartConfig(eps=1e-2, sigma=1e-3), "siamese")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model("quora", batch)
        terms = smart.regularisers("quora", batch, out)
    total = terms["smoothness"] + terms["proximal"]
    assert terms["smoothness"].dtype == torch.float32 and torch.isfinite(total)
    total.backward()
    grad = model.encoder.embeddings.word_embeddings.weight.grad
    assert grad is not None and torch.isfinite(grad).all()


def test_config_rejects_bad_values():
    with pytest.raises(ValueError):
        SmartConfig(eps=-1.0)
    with pytest.raises(ValueError):
        SmartConfig(beta=1.5)

import argparse
import copy
import dataclasses
import json
import math

import pytest
import torch

import minbert
import train_multitask
from tasks.config import SmartConfig
from tasks.heads import MultitaskModel, task_spec
from tasks.training.options import smart_beta_value
from tasks.training.smart import Smart
from tests.helpers import run_cli

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
    smart.update_ema(1, 10)
    ema = dict(smart.ema.named_parameters())
    for n, p in moved.items():
        step = ema[n] - before[n]
        assert torch.allclose(step, 0.1 * (p.detach() - before[n]), atol=1e-6, rtol=0), n
    current = dict(model.named_parameters())
    smart.config = dataclasses.replace(smart.config, beta=0.0)  # momentum 0: a full copy
    smart.update_ema(2, 10)
    assert all(torch.equal(p, current[n]) for n, p in smart.ema.named_parameters())


def test_anchor_is_evaluated_without_dropout(pretrained, tokenizer):
    """The proximal term's anchor is the EMA model's prediction with dropout off, while the model
    itself trains with dropout: two calls on the same outputs give the same term."""
    model = minbert.set_dropout(make_model(pretrained), 0.5).train()
    smart = Smart(model, SmartConfig(lambda_s=0.0), "cross")
    batch = make_batch(tokenizer, "sst", "cross")
    modes, forward = [], smart.ema.forward

    def spy(*args, **kwargs):
        modes.append(smart.ema.training)
        return forward(*args, **kwargs)

    smart.ema.forward = spy
    outputs = model("sst", batch)
    first = smart.regularisers("sst", batch, outputs)["proximal"]
    second = smart.regularisers("sst", batch, outputs)["proximal"]
    assert modes == [False, False] and model.training
    assert torch.equal(first, second)
    with torch.no_grad():
        anchor = forward("sst", batch)  # the EMA copy, still in eval mode
    assert first.item() == pytest.approx(task_spec("sst").divergence(outputs, anchor).item(), rel=1e-6)
    assert first.item() > 0  # the model's dropout makes its outputs differ from the anchor's


def test_symmetric_kl_is_the_sum_of_both_directions():
    """Jiang et al.: KL(P||Q) + KL(Q||P), not halved. P = (0.5, 0.5), Q = (0.9, 0.1):
    KL(P||Q) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1) = 0.51083, KL(Q||P) = 0.9 ln(0.9/0.5) + 0.1 ln(0.1/0.5)
    = 0.36806; the sum is 0.87889."""
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1) + 0.9 * math.log(0.9 / 0.5) \
        + 0.1 * math.log(0.1 / 0.5)
    assert expected == pytest.approx(0.87889, abs=1e-5)
    p, q = torch.tensor([[0.5, 0.5]]).log(), torch.tensor([[0.9, 0.1]]).log()
    five = task_spec("sst").divergence
    pad = torch.full((1, 3), -1e4)  # three more classes with no mass
    assert five(torch.cat([p, pad], 1), torch.cat([q, pad], 1)).item() == pytest.approx(expected, rel=1e-5)
    # Quora's one logit x stands for P(duplicate) = sigmoid(x): P = sigmoid(0), Q = sigmoid(ln(0.1 / 0.9)).
    binary = task_spec("quora").divergence
    assert binary(torch.tensor([0.0]), torch.tensor([math.log(0.1 / 0.9)])).item() == pytest.approx(expected, rel=1e-5)


def test_momentum_follows_the_papers_schedule_unless_fixed():
    """0.99 for the first 10% of the updates (t <= 0.1 T), 0.999 after; a number fixes it."""
    schedule = SmartConfig()
    assert schedule.beta == "schedule"
    assert [schedule.momentum(t, 50) for t in (1, 5, 6, 50)] == [0.99, 0.99, 0.999, 0.999]
    assert [schedule.momentum(t, 3) for t in (1, 2, 3)] == [0.999, 0.999, 0.999]  # 10% of 3 is under one update
    assert [SmartConfig(beta=0.9).momentum(t, 50) for t in (1, 50)] == [0.9, 0.9]


def test_trainer_moves_the_ema_with_the_scheduled_momentum(small_data_dir, tmp_path, monkeypatch):
    seen = []
    real = Smart.update_ema

    def spy(self, update, total_updates):
        seen.append((update, total_updates, self.config.momentum(update, total_updates)))
        return real(self, update, total_updates)

    monkeypatch.setattr(Smart, "update_ema", spy)
    code, _, err = run_cli(train_multitask.main, ["--device", "cpu",
                                                    # the smoothness term off and short inputs: a quick run
        "--model", "minilm", "--data-dir", str(small_data_dir), "--tasks", "sst", "--batch-size", "2",
        "--max-length", "8", "--max-steps", "11", "--precision", "fp32", "--smart", "--smart-lambda-s", "0",
        "--out", str(tmp_path / "run")])
    assert code == 0, err
    assert seen == [(t, 11, 0.99 if t == 1 else 0.999) for t in range(1, 12)]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["arguments"]["smart_beta"] == "schedule"


def test_state_dict_round_trip(pretrained, tokenizer):
    model = make_model(pretrained).eval()
    smart = Smart(model, SmartConfig(), "cross")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    smart.update_ema(1, 10)
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
    with pytest.raises(ValueError):
        SmartConfig(beta="sometimes")
    assert smart_beta_value("schedule") == "schedule" and smart_beta_value("0.5") == 0.5
    for text in ("sometimes", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="schedule"):
            smart_beta_value(text)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ascent_direction_survives_16_bit_arithmetic(pretrained, tokenizer, dtype):
    """The inner step under fp16 and bf16 autocast points where the fp32 one does and is not zero: the
    perturbation is probed at a size the format resolves, and the gradient is scaled so it does not flush."""
    model = make_model(pretrained).eval()
    batch = make_batch(tokenizer, "sst", "cross")
    smart = Smart(model, SmartConfig(), "cross")  # the paper's constants: sigma = eps = 1e-5
    divergence = task_spec("sst").divergence
    with torch.no_grad():
        clean = [e.float() for e in model.embed_inputs(batch)]
    start = [torch.randn_like(e) * 1e-5 * batch["attention_mask"][..., None] for e in clean]

    def direction(autocast: bool):
        with torch.autocast("cpu", dtype=dtype, enabled=autocast):
            with torch.no_grad():
                target = model("sst", batch)
            probe = smart.probe_scale(torch.device("cpu"))
            return smart.ascent_directions("sst", batch, clean, start, target, divergence, probe)[0], probe

    exact, one = direction(False)
    low, probe = direction(True)
    assert one == 1.0 and probe > 50
    real = batch["attention_mask"].bool()
    assert low[real].abs().amax(dim=-1).gt(0).all()  # every real token moves
    cosine = torch.nn.functional.cosine_similarity(low.flatten().double(), exact.flatten().double(), dim=0)
    assert cosine >= 0.9, cosine
    with torch.autocast("cpu", dtype=dtype):  # and the term itself is a positive, finite number
        out = model("sst", batch)
        smooth = smart.regularisers("sst", batch, out)["smoothness"]
    assert torch.isfinite(smooth) and smooth > 0

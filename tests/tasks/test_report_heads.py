"""--task-heads report: the heads of the CS224N report "Freeze Your Layers" on hand-made inputs, in a model and
end to end; and the report's raw-mean overall score beside the course's."""
import json
import math

import pytest
import torch
import torch.nn.functional as F

import minbert
import predict
import train_multitask
from tasks.heads import BilinearPairHead, MLPHead, MultitaskModel, ProjectedCosineHead, task_spec
from tasks.metrics import overall_score, raw_mean_score
from tests.helpers import run_cli
from tests.helpers.runs import TINY


def _set(linear, weight, bias=None):
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight, dtype=torch.float32))
        if bias is not None:
            linear.bias.copy_(torch.tensor(bias, dtype=torch.float32))


def test_mlp_head_is_two_linear_layers_around_a_gelu():
    head = MLPHead(2, 1)
    _set(head[0], [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0])
    _set(head[2], [[1.0, 1.0]], [0.5])
    gelu = lambda x: x * 0.5 * (1 + math.erf(x / math.sqrt(2)))  # x * Phi(x)
    out = head(torch.tensor([[1.0, -1.0]]))
    assert out.shape == (1, 1) and out.item() == pytest.approx(gelu(1.0) + gelu(-1.0) + 0.5, abs=1e-6)  # 1.1827


def test_bilinear_pair_head_shares_one_bias_between_the_projections():
    head = BilinearPairHead(2)
    _set(head.first, [[1.0, 0.0], [0.0, 2.0]])
    _set(head.second, [[1.0, 0.0], [0.0, 1.0]])
    with torch.no_grad():
        head.bias.copy_(torch.tensor([1.0, 0.0]))
    u, v = torch.tensor([[1.0, 1.0], [0.0, 0.0]]), torch.tensor([[2.0, 3.0], [1.0, 1.0]])
    # (W1 u + b) . (W2 v + b): [2, 2] . [3, 3] = 12; [1, 0] . [2, 1] = 2
    assert head(u, v).tolist() == pytest.approx([12.0, 2.0])
    assert sum(p.numel() for p in head.parameters()) == 2 * 4 + 2


def test_projected_cosine_head_scores_five_relu_cos_and_trains_on_that_score():
    head = ProjectedCosineHead(2)
    _set(head.first, [[1.0, 0.0], [0.0, 1.0]])
    _set(head.second, [[0.0, 1.0], [1.0, 0.0]])  # swaps the coordinates of v
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, -1.0]])  # W2 v: [1, 0], [0, 1], [-1, 0]
    cos = head(u, v)
    assert cos.tolist() == pytest.approx([1.0, 0.0, -1.0])
    spec = task_spec("sts", "siamese", "report")
    assert spec.predict(cos).tolist() == pytest.approx([5.0, 0.0, 0.0])  # 5 * relu(cos)
    gold = torch.tensor([4.0, 1.0, 2.0])
    assert spec.loss(cos, gold).item() == pytest.approx((1 + 1 + 4) / 3)  # MSE of the score, not of the cosine
    assert task_spec("sts", "siamese").loss(cos, gold).item() == pytest.approx(
        F.mse_loss(cos, gold / 5).item())  # the default head regresses the cosine onto score / 5


def _batch(tokenizer, pairs: bool):
    def encoded(texts):
        return tokenizer.collate(tokenizer.encode(texts))
    a = encoded(["a fine film .", "dull and long", "what a lovely surprise !"])
    if not pairs:
        return a
    b = encoded(["a good movie .", "long and slow", "nothing surprising here"])
    return {**{f"a_{k}": v for k, v in a.items()}, **{f"b_{k}": v for k, v in b.items()}}


def test_report_heads_in_the_model_read_each_sentence_vector(tiny_model):
    encoder = minbert.from_pretrained(str(tiny_model))
    tokenizer = minbert.Tokenizer.from_folder(tiny_model, max_length=64)
    model = MultitaskModel(encoder, ("sst", "quora", "sts"), pair_mode="siamese", pooling="pooler", dropout=0.0,
                           task_heads="report").eval()
    assert isinstance(model.heads["sst"], MLPHead) and isinstance(model.heads["quora"], BilinearPairHead)
    assert isinstance(model.heads["sts"], ProjectedCosineHead)
    h = TINY["hidden_size"]
    assert model.heads["sst"][0].weight.shape == (h, h) and model.heads["sst"][2].weight.shape == (5, h)
    with torch.no_grad():
        single, pair = _batch(tokenizer, False), _batch(tokenizer, True)
        assert model("sst", single).shape == (3, 5)
        u = encoder(**{k[2:]: v for k, v in pair.items() if k.startswith("a_")}).pooler_output
        v = encoder(**{k[2:]: v for k, v in pair.items() if k.startswith("b_")}).pooler_output
        assert torch.allclose(model("quora", pair), model.heads["quora"](u, v), atol=1e-6)
        cos = model("sts", pair)
        assert cos.shape == (3,) and torch.allclose(cos, model.heads["sts"](u, v), atol=1e-6)
        # an untrained STS head is the sentence vectors' own cosine (W1 = W2 = I), not a random projection's
        assert torch.allclose(cos, F.cosine_similarity(u, v, dim=-1), atol=1e-6)
    with pytest.raises(ValueError, match="--pair-mode siamese"):
        MultitaskModel(encoder, ("sst", "quora"), pair_mode="cross", task_heads="report")


def test_raw_mean_score_counts_a_correlation_as_itself():
    metrics = {"sst": 0.5, "quora": 0.8, "sts": 0.6}
    assert raw_mean_score(metrics) == pytest.approx((0.5 + 0.8 + 0.6) / 3)      # the report's: 0.6333
    assert overall_score(metrics) == pytest.approx((0.5 + 0.8 + 0.8) / 3)       # the course's: 0.7
    assert raw_mean_score({"sst": 0.4, "sts": None}) == 0.4 and raw_mean_score({"sts": None}) is None


def test_train_multitask_with_the_report_heads_prints_both_overall_scores(tiny_model, small_data_dir, tmp_path):
    out = tmp_path / "run"
    argv = ["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--batch-size", "8", "--precision", "fp32",
            "--max-steps", "3", "--task-heads", "report", "--pair-mode", "siamese", "--pooling", "pooler",
            "--out", str(out), "--predictions-dir", ""]
    code, stdout, err = run_cli(train_multitask.main, argv)
    assert code == 0, err
    best = json.loads((out / "metrics.json").read_text())["best"]
    assert best["overall_raw"] == pytest.approx((best["sst"] + best["quora"] + best["sts"]) / 3)
    assert best["overall"] == pytest.approx((best["sst"] + best["quora"] + (best["sts"] + 1) / 2) / 3)
    assert f"overall={best['overall']:.4f} overall_raw={best['overall_raw']:.4f}" in stdout
    assert json.loads((out / "config.json").read_text())["arguments"]["task_heads"] == "report"
    # predict.py rebuilds the report's heads, from the run folder and from its exported model folder alone.
    for source, again in ((out, tmp_path / "again"), (out / "model", tmp_path / "again-model")):
        code, _, err = run_cli(predict.main, ["--device", "cpu", str(source), "--out", str(again), "--data-dir",
                                              str(small_data_dir)])
        assert code == 0, err
        for produced in (p for p in (out / "predictions").rglob("*") if p.is_file()):  # with the score files
            assert (again / produced.relative_to(out / "predictions")).read_bytes() == produced.read_bytes()

    code, _, err = run_cli(train_multitask.main, argv[:-4] + ["--pair-mode", "cross", "--out", str(tmp_path / "x")])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--task-heads report" in lines[0] and "--pair-mode siamese" in lines[0]

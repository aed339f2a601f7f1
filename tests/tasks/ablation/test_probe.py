"""Linear probes: convergence on toy tasks, the penalty chosen on held-out data, features of every layer in one
pass, and the probe sweep through ablate.py."""
import copy
import json

import numpy as np
import pytest
import torch

import ablate
import minbert
from minbert import UserError
from tasks.ablation.studies import probe
from tasks.ablation.studies.probe.features import layer_features
from tasks.ablation.studies.probe.linear_probe import PENALTIES, fit_probe
from tasks.encoded import EncodedSplit
from tasks.heads import mean_pool
from tests.helpers import run_cli


def _blobs(n, classes, dim, seed, spread=0.3):
    """Gaussian classes around well separated centres: linearly separable."""
    rng = np.random.default_rng(seed)
    centres = np.eye(classes, dim) * 4.0
    y = np.arange(n) % classes
    return centres[y] + spread * rng.normal(size=(n, dim)), y


@pytest.mark.parametrize("classes", [2, 3])
def test_logistic_probe_converges_on_a_separable_toy_task(classes):
    x, y = _blobs(240, classes, 10, seed=0)
    dev_x, dev_y = _blobs(90, classes, 10, seed=1)
    fit = fit_probe(x, y, dev_x, dev_y, "logistic", "accuracy", penalties=(0.1, 1.0, 10.0), seed=0)
    assert fit.dev == 1.0 and fit.converged and 0 < fit.iterations
    # Converged: the gradient of its objective, C * sum of cross-entropies + |W|^2 / 2, is zero at the solution.
    scaler, model = fit.model[0], fit.model[-1]
    z = scaler.transform(x)
    logits = z @ model.coef_.T + model.intercept_
    if classes == 2:  # sklearn's binary form: one weight vector for class 1
        p = 1 / (1 + np.exp(-logits[:, 0]))
        residual = (p - (y == 1))[:, None]
    else:
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        residual = p - np.eye(classes)[y]
    C = 1.0 / fit.penalty
    grad_w = C * residual.T @ z + model.coef_
    grad_b = C * residual.sum(0)
    assert np.abs(grad_w).max() < 1e-3 * max(1.0, np.abs(model.coef_).max()) and np.abs(grad_b).max() < 1e-3


def test_ridge_probe_recovers_a_linear_score():
    rng = np.random.default_rng(0)
    w = rng.normal(size=8)
    x, dev_x = rng.normal(size=(300, 8)), rng.normal(size=(100, 8))
    y = x @ w + 0.01 * rng.normal(size=300)
    fit = fit_probe(x, y, dev_x, dev_x @ w, "ridge", "pearson", seed=0)
    assert fit.dev > 0.999 and fit.converged and fit.iterations == 0
    # The refit is ridge's exact solution on the standardised features at the chosen penalty.
    z = fit.model[0].transform(x)
    zc, yc = z - z.mean(0), y - y.mean()
    exact = np.linalg.solve(zc.T @ zc + fit.penalty * np.eye(8), zc.T @ yc)
    assert np.allclose(fit.model[-1].coef_, exact, atol=1e-8)


def test_the_penalty_is_the_held_out_best_and_a_tie_keeps_the_strongest():
    # Few examples, one informative feature among 200: the weakest penalty overfits the noise.
    rng = np.random.default_rng(3)
    x, dev_x = rng.normal(size=(60, 200)), rng.normal(size=(400, 200))
    y, dev_y = (x[:, 0] > 0).astype(int), (dev_x[:, 0] > 0).astype(int)
    fit = fit_probe(x, y, dev_x, dev_y, "logistic", "accuracy", seed=0)
    assert set(fit.holdout) == set(PENALTIES)
    best = max(fit.holdout.values())
    assert fit.penalty == max(p for p, s in fit.holdout.items() if s == best)
    # Easy data: every penalty scores 1.0 on the held-out part, so the strongest is kept.
    easy_x, easy_y = _blobs(100, 2, 5, seed=4)
    assert fit_probe(easy_x, easy_y, easy_x, easy_y, "logistic", "accuracy", penalties=(0.1, 1.0, 10.0)).penalty == 10.0


def test_features_of_every_layer_in_one_pass_equal_the_truncated_encoder(pretrained, tokenizer):
    texts = ["a short one .", "the film is long , slow and rather dull", "what a warm , funny surprise !"]
    encodings = tokenizer.encode(texts)
    split = EncodedSplit("sst", ["a", "b", "c"], [(e,) for e in encodings], torch.tensor([0, 1, 2]),
                         [len(e.ids) for e in encodings])
    features = layer_features(pretrained, split, tokenizer, torch.device("cpu"), batch_size=2)
    n, h = pretrained.num_layers, pretrained.config.hidden_size
    assert features["mean"].shape == features["cls-token"].shape == (n + 1, 3, h)
    batch = tokenizer.collate(encodings)
    for k in (0, 2, n):
        truncated = minbert.truncate_layers(copy.deepcopy(pretrained), k).eval()
        with torch.no_grad():
            hidden = truncated(**batch).last_hidden_state
        assert np.allclose(features["mean"][k], mean_pool(hidden, batch["attention_mask"]).numpy(), atol=1e-5)
        assert np.allclose(features["cls-token"][k], hidden[:, 0].numpy(), atol=1e-5)
    mode = pretrained.training
    pretrained.train()  # dropout on: the features must not see it, and the mode comes back
    try:
        again = layer_features(pretrained, split, tokenizer, torch.device("cpu"), batch_size=2)
        assert pretrained.training and np.array_equal(again["mean"], features["mean"])
    finally:
        pretrained.train(mode)


def test_siamese_pairs_give_sentence_bert_features(pretrained, tokenizer):
    a, b = tokenizer.encode(["one cat sits ."]), tokenizer.encode(["a dog runs far ."])
    split = EncodedSplit("sts", ["x"], [(a[0], b[0])], torch.tensor([3.0]), [max(len(a[0].ids), len(b[0].ids))])
    features = layer_features(pretrained, split, tokenizer, torch.device("cpu"))
    h = pretrained.config.hidden_size
    u, v = (layer_features(pretrained, EncodedSplit("sst", ["x"], [(e,)], None, [len(e.ids)]), tokenizer,
                           torch.device("cpu"))["mean"][:, 0] for e in (a[0], b[0]))
    expected = np.concatenate([u, v, np.abs(u - v), u * v], -1)
    assert features["mean"].shape[-1] == 4 * h and np.allclose(features["mean"][:, 0], expected, atol=1e-6)


# --workers 1: these tests read results in plan order
BASE = ["--device", "cpu", "--model", "minilm", "--precision", "fp32", "--eval-batch-size", "64", "--workers", "1"]


def test_probe_sweep_fits_every_layer_and_leaves_the_encoder_untouched(small_data_dir, tmp_path, pretrained):
    out = tmp_path / "probe"
    before = {k: v.clone() for k, v in pretrained.state_dict().items()}
    summary = tmp_path / "reinit"
    summary.mkdir()
    (summary / "summary.csv").write_text("mode,config,data_fraction,metric,n,mean,std,ci95_low,ci95_high\n" + "".join(
        f"reinit,from={k},1.0,dev/sst,2,{0.2 + 0.03 * k},0.01,{0.19 + 0.03 * k},{0.21 + 0.03 * k}\n" for k in range(7)))
    code, stdout, err = run_cli(ablate.main, ["--mode", "probe", "--task", "sst", "--data-dir", str(small_data_dir),
                                              "--layers", "0", "--probe-penalties", "0.1,10", "--out", str(out),
                                              "--reinit-sweep", str(summary), *BASE])
    assert code == 0, err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["config"] for r in records] == ["layer=0,pooling=cls-token", "layer=0,pooling=mean",
                                              "layer=6,pooling=cls-token,random", "layer=6,pooling=mean,random"]
    assert all(r["status"] == "ok" and 0 <= r["dev"]["sst"] <= 1 for r in records)
    info = records[0]["info"]
    assert info["penalty"]["sst"] in (0.1, 10.0) and set(info["holdout"]["sst"]) == {"0.1", "10"}
    assert info["converged"] and info["train_examples"]["sst"] == 40
    # Features are extracted once per encoder: the second pooling and the control's second reuse them.
    assert [r["info"]["feature_seconds"] > 0 for r in records] == [True, False, True, False]
    assert 'probe,"layer=0,pooling=mean",1.0,dev/sst,1,' in (out / "summary.csv").read_text()
    assert (out / "plots" / "probe.png").read_bytes().startswith(b"\x89PNG")
    assert "do not apply" in stdout
    for name, tensor in pretrained.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_probe_curve_overlays_the_reinit_curve(tmp_path):
    def row(config, params, mean):
        return {"config": config, "metric": "dev/sst", "data_fraction": 1.0, "n": 3, "mean": mean,
                "ci95_low": mean - 0.01, "ci95_high": mean + 0.01, "params": params}
    rows = [row(f"layer={k},pooling={p}", {"layer": k, "pooling": p, "control": False}, 0.3 + 0.02 * k)
            for k in range(3) for p in ("cls-token", "mean")]
    finetuned = [row(f"from={k}", {"scheme": "from", "from": k}, 0.4 + 0.03 * k) for k in range(3)]
    fig = probe.probe_curve(rows, "dev/sst", 2, finetuned=finetuned)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert sum("fine-tuned, layers >= k reinitialised" in t for t in labels) == 2  # one per pooling panel
    assert probe.probe_curve(rows, "dev/sst", 2) is not None
    with pytest.raises(UserError, match="--reinit-sweep"):
        probe.reinit_rows(tmp_path / "nowhere")

"""bench/compile.py: its region computes what the fast path's layers compute, and the benchmark runs."""
import json

import torch
from test_reliability import TINY, tiny_model  # noqa: F401 (fixture)

import minbert
from bench import compile as bench_compile
from conftest import run_cli


def outputs_and_grads(model, ids, mask):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_the_region_between_attentions_is_the_fast_paths_layer_work():
    torch.manual_seed(0)
    model = minbert.build_model(minbert.BertConfig(**TINY, implementation="fast")).eval()
    ids = torch.randint(1, 1000, (3, 9))
    mask = torch.tensor([[1] * 9, [1] * 5 + [0] * 4, [1] * 2 + [0] * 7])
    eager, eager_grads = outputs_and_grads(model, ids, mask)
    rows = set()
    bench_compile.use_region(model, bench_compile.between_attentions, False, rows)  # uncompiled: same maths
    routed, routed_grads = outputs_and_grads(model, ids, mask)
    assert rows == {64}  # 16 real tokens, rounded up to fast.ROW_MULTIPLE
    torch.testing.assert_close(routed, eager, rtol=0, atol=1e-6)
    assert routed_grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        torch.testing.assert_close(routed_grads[name], grad, rtol=0, atol=1e-6, msg=name)
    bench_compile.use_region(model, None, False, rows)
    assert all("forward" not in layer.__dict__ for layer in model.encoder.layer)


def test_the_benchmark_times_compiled_against_eager_steps(tiny_model, small_data_dir, tmp_path,  # noqa: F811
                                                          monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # the test's own, removed with it
    out = tmp_path / "compile.json"
    code, printed, err = run_cli(bench_compile.main, [
        "--model", str(tiny_model), "--data-dir", str(small_data_dir), "--precision", "fp32", "--steps", "1",
        "--rounds", "2", "--warmup", "1", "--recompile-steps", "2", "--warm-cache", "--json", str(out),
        "--", "--batch-size", "4", "--device", "cpu"])
    assert code == 0, err
    figures = json.loads(out.read_text())
    assert len(figures["ratios"]) == 2 and figures["median_ratio"] > 0 and figures["graphs"] >= 1
    assert figures["first_compiled_step_s"] > 0 and figures["row_counts"] >= 1
    assert "eager / compiled" in printed

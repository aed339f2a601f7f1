"""On a CUDA GPU: the fast path against the reference, the fast path's CPU kernels' fallbacks against
torch's, the precision the GPU's compute capability gives, a short run, a kill and resume, and NCCL
data parallelism against one process.

Every test here is marked `gpu` and skipped without CUDA (tests/conftest.py): `pytest -m gpu` runs
just these. First run on an NVIDIA H200, 2026-11-26 (docs/measurements/2026-11-26-h200-first-gpu-run.md).
"""
import json

import pytest
import torch
from test_distributed import WEIGHT_TOLERANCE, torchrun, weights
from test_fast_path import BF16_TOL, FP32_TOL, LENGTHS, make_batch, max_diff_on_tokens, models
from test_reliability import run, step_in, tiny_model  # noqa: F401 (fixtures)

import minbert
import train_multitask
from conftest import run_cli
from minbert import fast_layers

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
RESUMED_TOLERANCE = 1e-4  # CUDA's attention backward accumulates in a varying order: not bitwise


def on_cuda(batch: dict) -> dict:
    return {k: v.to(CUDA) for k, v in batch.items()}


@pytest.fixture
def base(tiny_model, small_data_dir):  # noqa: F811
    """test_reliability's options on the GPU, in the precision `auto` gives there."""
    return ["--model", str(tiny_model), "--batch-size", "8", "--eval-batch-size", "64", "--device", "cuda",
            "--data-dir", str(small_data_dir), "--checkpoint-every", "2"]


def loss_of(out, mask):
    """tests/test_fast_path.py's loss, its weights drawn on the CPU."""
    w = torch.randn(out.last_hidden_state.shape, generator=torch.Generator().manual_seed(2)).to(CUDA)
    return (out.last_hidden_state * w * mask[..., None]).sum() / mask.sum() + out.pooler_output.pow(2).mean()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("case", ["mixed", "several-blocks"])
def test_fast_path_matches_the_reference_on_cuda(precision, case):
    if precision == "bf16" and not minbert.native_bf16(CUDA):
        pytest.skip("this GPU has no native bf16")
    reference, fast_model = (m.to(CUDA).train() for m in models())
    batch = on_cuda(make_batch(*LENGTHS[case]))
    mask = batch["attention_mask"]
    outs, grads = [], []
    for model in (reference, fast_model):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(**batch)
        loss_of(out, mask).float().backward()
        outs.append(out.last_hidden_state.float())
        grads.append({name: p.grad for name, p in model.named_parameters()})
    tolerance = FP32_TOL if precision == "fp32" else BF16_TOL
    assert max_diff_on_tokens(*outs, mask) <= tolerance
    floor = 1e-2 * max(g.norm().item() for g in grads[0].values())
    for name, g in grads[0].items():
        assert (g - grads[1][name]).norm().item() <= tolerance * max(g.norm().item(), floor), name


def test_dropout_falls_back_to_torchs_on_cuda():
    x = torch.randn(1 << 16, device=CUDA, requires_grad=True)
    torch.manual_seed(0)
    ours = fast_layers.dropout(x, 0.1, training=True)
    torch.manual_seed(0)
    theirs = torch.nn.functional.dropout(x, 0.1, training=True)
    assert torch.equal(ours, theirs)


def test_embedding_gradient_falls_back_to_autograd_on_cuda():
    reference, fast_model = (m.to(CUDA).train() for m in models())
    ids = on_cuda(make_batch(*LENGTHS["mixed"]))["input_ids"]
    for model in (reference, fast_model):
        model.embeddings.word_embeddings(ids).pow(2).sum().backward()
    assert torch.allclose(reference.embeddings.word_embeddings.weight.grad,
                          fast_model.embeddings.word_embeddings.weight.grad, atol=FP32_TOL)
    assert "_grad_buffer" not in vars(fast_model.embeddings.word_embeddings)  # the CPU kernel stayed out


def test_clipping_matches_torchs_on_cuda():
    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(64, 32, device=CUDA)) for _ in range(3)]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    for a, b in zip(ours, theirs):
        a.grad = torch.randn_like(a) * 10
        b.grad = a.grad.clone()
    norm = minbert.clip_grad_norm_(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert torch.allclose(norm, expected) and all(torch.allclose(a.grad, b.grad) for a, b in zip(ours, theirs))


def test_auto_precision_follows_this_gpus_capability():
    capability = torch.cuda.get_device_capability(CUDA)
    native = torch.cuda.is_bf16_supported(including_emulation=False)
    expected = "bf16" if native else ("fp16" if capability >= (7, 0) else "fp32")
    assert minbert.resolve_precision("auto", CUDA) == expected


def test_a_four_step_run_on_cuda(base, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = run_cli(train_multitask.main, base + ["--tasks", "sst,sts", "--max-steps", "4",
                                                              "--out", str(out)])
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["device"].startswith("cuda") and config["implementation"]["used"] == "reference"
    assert config["precision"]["used"] == minbert.resolve_precision("auto", CUDA)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 4 and all(v is not None for v in metrics["final"].values())


def test_killed_and_resumed_on_cuda_ends_as_an_unbroken_run(base, tmp_path):
    argv = base + ["--batch-size", "16", "--max-steps", "8"]  # dropout on: the CUDA RNG is restored
    code, _, err = run(tmp_path, "none", 0, argv + ["--out", str(tmp_path / "reference")])
    assert code == 0, err
    out = tmp_path / "run"
    code, _, err = run(tmp_path, "kill-after-save", 4, argv + ["--out", str(out)])
    assert code != 0 and step_in(out / "checkpoint.pt") == 4, err
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    one, two = weights(tmp_path / "reference"), weights(out)
    assert max((one[k] - two[k]).abs().max().item() for k in one) <= RESUMED_TOLERANCE


def test_nccl_data_parallel_ends_with_the_weights_of_one_process(base, tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    argv = base + ["--precision", "fp32", "--batch-size", "7", "--max-steps", "6", "--dropout", "0"]
    code, _, err = run_cli(train_multitask.main, argv + ["--out", str(tmp_path / "one")])
    assert code == 0, err
    code, _, err = torchrun(tmp_path, argv + ["--out", str(tmp_path / "two")])
    assert code == 0, err
    one, two = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert max((one[k] - two[k]).abs().max().item() for k in one) < WEIGHT_TOLERANCE * 10
    assert json.loads((tmp_path / "two" / "config.json").read_text())["backend"] == "nccl"

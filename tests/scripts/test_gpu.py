"""On a CUDA GPU: the fast path against the reference, the fast path's CPU kernels' fallbacks against
torch's, the precision the GPU's compute capability gives, the student's path (every precision, SMART and
gradient surgery under fp16, siamese pairs and the report heads, minbert's AdamW, a frozen encoder, the
course's scripts, predicting on the CPU from a GPU run, an ablation trial), a kill and resume in fp16 and
in `auto`, bert-base's memory at the course's batch, a compiled encoder, and NCCL data parallelism
against one process.

Every test here is marked `gpu` and skipped without CUDA (tests/conftest.py): `pytest -m gpu` runs
just these (`python -m bench gpu` runs them first, capped at 230 s; the first eleven took 52 s on an H200,
the whole file has not run on a GPU yet). Each run is a few steps of the tiny 2-layer model on the small
course files; the compile test, the slowest, comes last. First run on an NVIDIA H200,
2026-11-26 (docs/measurements/2026-11-26-h200-first-gpu-run.md).
"""
import copy
import json
import math

import pytest
import torch

import ablate
import classifier
import minbert
import multitask_classifier
import predict
import train_multitask
from minbert import fast_layers
from tests.helpers import run_cli
from tests.helpers.fast_path import BF16_TOL, FP32_TOL, LENGTHS, make_batch, max_diff_on_tokens, models
from tests.helpers.runs import WEIGHT_TOLERANCE, run, step_in, torchrun, weights

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
RESUMED_TOLERANCE = 1e-4  # CUDA's attention backward accumulates in a varying order: not bitwise


def on_cuda(batch: dict) -> dict:
    return {k: v.to(CUDA) for k, v in batch.items()}


@pytest.fixture
def base(tiny_model, small_data_dir):
    """test_reliability's options on the GPU, in the precision `auto` gives there."""
    return ["--model", str(tiny_model), "--batch-size", "8", "--eval-batch-size", "64", "--device", "cuda",
            "--data-dir", str(small_data_dir), "--checkpoint-every", "2"]


def loss_of(out, mask):
    """tests/minbert/test_fast.py's loss, its weights drawn on the CPU."""
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


@pytest.mark.parametrize("precision", ["auto", "fp16"])  # fp16: the scaler's state is resumed too
def test_killed_and_resumed_on_cuda_ends_as_an_unbroken_run(base, tmp_path, precision):
    argv = base + ["--batch-size", "16", "--max-steps", "8", "--precision", precision]  # dropout on: CUDA RNG
    code, _, err = run(tmp_path, "none", 0, argv + ["--out", str(tmp_path / "reference")])
    assert code == 0, err
    out = tmp_path / "run"
    code, _, err = run(tmp_path, "kill-after-save", 4, argv + ["--out", str(out)])
    assert code != 0 and step_in(out / "checkpoint.pt") == 4, err
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    one, two = weights(tmp_path / "reference"), weights(out)
    assert max((one[k] - two[k]).abs().max().item() for k in one) <= RESUMED_TOLERANCE
    skipped = [metrics_of(folder).get("scaler_skipped") for folder in (tmp_path / "reference", out)]
    assert skipped[0] == skipped[1] and (skipped[0] is not None) == (precision == "fp16")


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


# ------------------------------------------------------------------------------------ the student's path

def train(argv: list, out, main=train_multitask.main) -> tuple:
    """A command's run into `out`: (its config.json, its metrics.json), after checking it succeeded."""
    code, stdout, err = run_cli(main, argv + ["--out", str(out)])
    assert code == 0, err
    return json.loads((out / "config.json").read_text()), metrics_of(out), stdout


def metrics_of(out) -> dict:
    return json.loads((out / "metrics.json").read_text())


def scored(metrics: dict) -> bool:
    """Every dev score of the final evaluation is there and finite."""
    return all(v is not None and math.isfinite(v) for v in metrics["final"].values())


def tf32_expected() -> bool:
    return torch.cuda.get_device_capability(CUDA) >= (8, 0)


@pytest.mark.parametrize("precision", ["fp16", "bf16", "fp32"])
def test_each_precision_trains_on_cuda(base, tmp_path, precision):
    if precision == "bf16" and not minbert.native_bf16(CUDA):
        pytest.skip("this GPU has no native bf16")
    config, metrics, stdout = train(base + ["--tasks", "sst,sts", "--max-steps", "4", "--precision", precision],
                                    tmp_path / "run")
    assert config["precision"]["used"] == precision and config["precision"]["tf32"] == tf32_expected()
    assert metrics["steps"] == 4 and scored(metrics)
    assert ("scaler_skipped" in metrics) == (precision == "fp16")
    if precision == "fp16":
        assert metrics["scaler_skipped"] < 4  # at least one step was taken
    if precision == "fp32" and tf32_expected():
        assert "matmuls in TF32" in stdout


def test_no_tf32_keeps_fp32_matmuls_ieee(base, tmp_path):
    config, metrics, stdout = train(base + ["--tasks", "sst", "--max-steps", "2", "--precision", "fp32",
                                            "--no-tf32"], tmp_path / "run")
    assert config["precision"]["tf32"] is False and config["arguments"]["no_tf32"] is True
    assert torch.get_float32_matmul_precision() == "highest" and "TF32" not in stdout


@pytest.mark.parametrize("extra", [
    ["--smart"],
    ["--surgery", "pcgrad"],
    ["--surgery", "dominant", "--smart"],
], ids=["smart", "pcgrad", "dominant-smart"])
def test_fp16_with_smart_and_gradient_surgery(base, tmp_path, extra):
    config, metrics, _ = train(base + ["--max-steps", "4", "--precision", "fp16", *extra], tmp_path / "run")
    assert config["precision"]["used"] == "fp16" and metrics["steps"] == 4 and scored(metrics)
    assert metrics["scaler_skipped"] < 4


@pytest.mark.parametrize("extra", [
    ["--pair-mode", "siamese"],
    ["--pair-mode", "siamese", "--task-heads", "report", "--pooling", "pooler"],
    ["--optimizer", "minbert", "--precision", "fp16"],
    ["--freeze-until", "all", "--surgery", "pcgrad"],  # no encoder gradient at all for surgery to combine
], ids=["siamese", "report-heads", "minbert-adamw-fp16", "frozen-encoder-pcgrad"])
def test_the_options_of_the_students_path_train_on_cuda(base, tmp_path, extra):
    config, metrics, _ = train(base + ["--max-steps", "3", *extra], tmp_path / "run")
    assert config["device"].startswith("cuda") and metrics["steps"] == 3 and scored(metrics)


def test_multitask_classifier_with_the_courses_flags_on_cuda(tiny_model, small_data_dir, tmp_path):
    argv = ["--option", "finetune", "--use_gpu", "--batch_size", "8", "--hidden_dropout_prob", "0.3", "--lr", "1e-5",
            "--epochs", "1", "--model", str(tiny_model), "--data-dir", str(small_data_dir), "--max-steps", "2",
            "--eval-batch-size", "64"]
    config, metrics, _ = train(argv, tmp_path / "run", multitask_classifier.main)
    assert config["device"].startswith("cuda") and config["arguments"]["batch_size"] == 8 and scored(metrics)


def test_classifier_part1_on_cuda(tiny_model, part1_data, tmp_path):
    """SST alone: the GPU's data folder may lack CFIMDB's files, which take the same path."""
    out = tmp_path / "part1"
    code, stdout, err = run_cli(classifier.main, [
        "--option", "finetune", "--use_gpu", "--model", str(tiny_model), "--data-dir", str(part1_data),
        "--tasks", "sst", "--epochs", "1", "--max-steps", "2", "--batch_size", "4", "--out", str(out),
        "--predictions-dir", ""])
    assert code == 0, err
    assert json.loads((out / "sst" / "config.json").read_text())["device"].startswith("cuda")
    assert "dev acc sst (finetune) :: " in stdout


def test_a_cuda_runs_model_predicts_on_the_cpu(base, tmp_path):
    run_dir = tmp_path / "run"
    train(base + ["--max-steps", "3", "--precision", "fp16"], run_dir)
    code, _, err = run_cli(predict.main, ["--device", "cpu", str(run_dir), "--out", str(tmp_path / "again")])
    assert code == 0, err
    ours = sorted(p.name for p in (run_dir / "predictions").glob("*.csv"))
    assert ours and sorted(p.name for p in (tmp_path / "again").glob("*.csv")) == ours
    for name in ours:  # the same rows; the values may differ in the last bits (fp16 on the GPU, the CPU's here)
        ids = [[line.split(",")[0] for line in (folder / name).read_text().splitlines()]
               for folder in (run_dir / "predictions", tmp_path / "again")]
        assert ids[0] == ids[1], name


def test_an_ablation_trial_on_cuda(tiny_model, small_data_dir, tmp_path):
    """--from-layer 2 of the tiny model's 2 layers: one trial, the unmodified model."""
    out = tmp_path / "reinit"
    code, _, err = run_cli(ablate.main, ["--mode", "reinit", "--task", "sst", "--from-layer", "2", "--seeds", "0",
                                         "--model", str(tiny_model), "--data-dir", str(small_data_dir),
                                         "--batch-size", "8", "--max-steps", "2", "--eval-batch-size", "64",
                                         "--workers", "1", "--device", "cuda", "--out", str(out)])
    assert code == 0, err
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] == "ok" and record["device"].startswith("cuda") and record["steps"] == 2


def test_bert_base_at_the_courses_batch_in_fp16_stays_under_8_gb():
    """bert-base's shape (random weights), batch 32 x 128 tokens, fp16 with the scaler and fused AdamW: what a
    student's T4 (16 GB) must hold, with room to spare."""
    torch.manual_seed(0)
    model = minbert.build_model(minbert.BertConfig(implementation="reference")).to(CUDA).train()
    head = torch.nn.Linear(768, 5).to(CUDA)
    optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-5, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    ids = torch.randint(1000, 30000, (32, 128), device=CUDA)
    mask = (torch.arange(128, device=CUDA)[None] < torch.randint(20, 129, (32, 1), device=CUDA)).long()
    labels = torch.randint(0, 5, (32,), device=CUDA)
    torch.cuda.reset_peak_memory_stats(CUDA)
    for _ in range(3):
        with torch.autocast("cuda", dtype=torch.float16):
            pooled = model(input_ids=ids, attention_mask=mask).pooler_output
            loss = torch.nn.functional.cross_entropy(head(pooled).float(), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(CUDA)
    peak_gib = torch.cuda.max_memory_allocated(CUDA) / 2**30
    print(f"bert-base, batch 32 x 128, fp16: peak {peak_gib:.2f} GiB")
    assert math.isfinite(loss.item()) and peak_gib < 8


def test_the_fast_path_on_cuda_runs_after_one_warning_line(base, tmp_path):
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "2", "--implementation",
                                                         "fast", "--out", str(out)])
    assert code == 0, err
    assert sum(line.startswith("warning: --implementation fast on CUDA") for line in err.splitlines()) == 1
    assert json.loads((out / "config.json").read_text())["implementation"]["used"] == "fast"


def test_a_compiled_reference_matches_the_eager_one_on_cuda():
    """torch.compile of the reference (--compile): the same outputs and gradients. One batch shape: each new
    shape is another compile, tens of seconds."""
    eager = models()[0].to(CUDA).eval()
    compiled = copy.deepcopy(eager)
    compiled.compile()
    batch = on_cuda(make_batch(*LENGTHS["mixed"]))
    outs = []
    for model in (eager, compiled):
        out = model(**batch)
        loss_of(out, batch["attention_mask"]).backward()
        outs.append((out.last_hidden_state, model.embeddings.word_embeddings.weight.grad))
    assert max_diff_on_tokens(outs[0][0], outs[1][0], batch["attention_mask"]) <= FP32_TOL
    assert torch.allclose(outs[0][1], outs[1][1], atol=FP32_TOL)

"""What a GPU changes, held on a CPU: the reference's SDPA attention against its written-out one, the
implementation and the precision chosen per device (CUDA's capabilities mocked), fp16's gradient scaler
(skipped steps, its state across a resume), and a resume with fewer GPUs than the run saved RNG states for.

The same on a real GPU: tests/scripts/test_gpu.py (marked `gpu`, skipped without CUDA).
"""
import json
import os
import signal

import pytest
import torch

import minbert
import train_multitask
from minbert.model import attention_keys
from tasks import machine, training
from tasks.distributed import SINGLE, World
from tasks.inputs import prepare
from tasks.saved.checkpoint_files import load_checkpoint
from tasks.training import checkpoint
from tests.helpers import run_cli

FP32_TOL = 1e-5
CONFIG = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64, attention_probs_dropout_prob=0.0, implementation="reference")


# ------------------------------------------------------------------------------------ SDPA attention

def attention_inputs(lengths=(13, 1, 7, 12), seq=13):
    torch.manual_seed(0)
    attention = minbert.BertModel(minbert.BertConfig(**CONFIG)).encoder.layer[0].attention.self
    x = torch.randn(len(lengths), seq, CONFIG["hidden_size"], requires_grad=True)
    mask = (torch.arange(seq)[None] < torch.tensor(lengths)[:, None]).long()
    return attention, x, mask


def split_heads(attention, x):
    """(B, T, hidden) -> (B, heads, T, head_size), from one `Linear`'s output: the three projections
    apart, not the model's stacked `project_qkv`."""
    B, T, _ = x.shape
    return x.view(B, T, attention.num_heads, attention.head_size).transpose(1, 2)


def outputs_and_grads(attention, x, mask, how):
    """The attention's output on the real tokens, and the gradients of a weighted sum of it."""
    x.grad = None
    attention.zero_grad()
    if how == "sdpa":
        y, probs = attention(x, attention_keys(mask))
        assert probs is None
    else:
        layers = (attention.query, attention.key, attention.value)
        q, k, v = (split_heads(attention, layer(x)) for layer in layers)
        y, _ = attention.written_out(q, k, v, attention_keys(mask))
        y = y.transpose(1, 2).reshape(x.shape)
    y = y * mask[..., None]  # padding positions mean nothing
    (y * torch.linspace(-1, 1, y.numel()).view(y.shape)).sum().backward()
    return y.detach(), x.grad.clone(), {n: p.grad.clone() for n, p in attention.named_parameters()}


def test_sdpa_attention_matches_the_written_out_one_values_and_gradients():
    attention, x, mask = attention_inputs()
    fused, written = (outputs_and_grads(attention, x, mask, how) for how in ("sdpa", "written-out"))
    assert (fused[0] - written[0]).abs().max().item() <= FP32_TOL
    assert (fused[1] - written[1]).abs().max().item() <= FP32_TOL
    for name, g in written[2].items():
        assert (fused[2][name] - g).abs().max().item() <= FP32_TOL, name


def test_probabilities_come_from_the_written_out_attention(monkeypatch):
    attention, x, mask = attention_inputs()
    expected, _ = attention(x, attention_keys(mask))
    monkeypatch.setattr(type(attention), "sdpa", lambda *a: pytest.fail("SDPA has no probabilities"))
    y, probs = attention(x, attention_keys(mask), output_attentions=True)
    assert (y - expected).mul(mask[..., None]).abs().max().item() <= FP32_TOL
    assert probs.shape == (4, 4, 13, 13) and torch.allclose(probs.sum(-1), torch.ones(4, 4, 13))
    assert probs[1, :, :, 1:].abs().max().item() == 0  # a one-token sequence looks at its one token


def test_sdpa_attention_drops_at_the_modules_rate_in_training_only():
    attention, x, mask = attention_inputs()
    x, mask = x.detach(), attention_keys(mask)
    with torch.no_grad():
        attention.eval()
        evaluated = attention(x, mask)[0]
        attention.train()
        attention.dropout.p = 0.0
        assert torch.allclose(attention(x, mask)[0], evaluated, atol=FP32_TOL)
        attention.dropout.p = 0.5
        a, b = attention(x, mask)[0], attention(x, mask)[0]
    assert not torch.allclose(a, evaluated, atol=1e-3) and not torch.allclose(a, b, atol=1e-3)


def test_the_padding_mask_is_built_once_per_forward_in_the_form_sdpa_takes(monkeypatch):
    """One bool key mask for every layer (SDPA's fused kernels take it as it is), None without padding."""
    model = minbert.BertModel(minbert.BertConfig(**CONFIG)).eval()
    masks = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda *a, attn_mask=None, **k: masks.append(attn_mask) or sdpa(*a, attn_mask=attn_mask, **k))
    _, _, mask = attention_inputs()
    ids = torch.randint(1, 100, mask.shape)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
        assert len(masks) == 2 and masks[0] is masks[1] and masks[0].dtype == torch.bool
        assert masks[0].shape == (4, 1, 1, 13) and torch.equal(masks[0][:, 0, 0], mask.bool())
        masks.clear()
        model(input_ids=ids, attention_mask=torch.ones_like(mask))
        model(input_ids=ids)
    assert masks == [None] * 4


def test_a_sequence_without_real_tokens_attends_to_all_of_them_not_to_none():
    model = minbert.BertModel(minbert.BertConfig(**CONFIG)).eval()
    ids = torch.randint(1, 100, (2, 9))
    with torch.no_grad():
        empty = model(input_ids=ids, attention_mask=torch.tensor([[1] * 9, [0] * 9])).last_hidden_state
        whole = model(input_ids=ids).last_hidden_state
    assert torch.isfinite(empty).all() and torch.allclose(empty[1], whole[1], atol=FP32_TOL)


# ------------------------------------------------------------------------------------ implementation

def test_auto_implementation_is_the_fast_path_on_a_cpu_and_the_reference_elsewhere():
    config = minbert.BertConfig(**{**CONFIG, "implementation": "auto"})
    on_cpu, on_gpu = minbert.build_model(config, "cpu"), minbert.build_model(config, torch.device("cuda"))
    assert type(on_cpu).__name__ == "FastBertModel" and on_cpu.config.implementation == "fast"
    assert type(on_gpu) is minbert.BertModel and on_gpu.config.implementation == "reference"
    assert minbert.resolve_implementation("fast", "cuda") == "fast"
    with pytest.raises(minbert.UserError, match="--implementation"):
        minbert.resolve_implementation("quick", "cpu")


def test_run_records_the_implementation_asked_for_and_used(base, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "1",
                                                              "--implementation", "reference", "--out", str(out)])
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["implementation"] == {"requested": "reference", "used": "reference"}
    assert config["arguments"]["implementation"] == "reference" and "implementation reference" in stdout


# ------------------------------------------------------------------------------------ precision

@pytest.mark.parametrize("capability, bf16, expected", [
    ((8, 0), True, "bf16"),   # A100
    ((7, 5), False, "fp16"),  # T4
    ((7, 0), False, "fp16"),  # V100
    ((6, 1), False, "fp32"),  # GTX 10x0: fp16 at 1/64 of fp32
])
def test_auto_precision_follows_the_gpus_compute_capability(monkeypatch, capability, bf16, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)
    assert minbert.resolve_precision("auto", torch.device("cuda")) == expected
    assert minbert.native("fp16", "cuda") == (capability >= (7, 0))
    assert minbert.resolve_precision("bf16", "cuda") == "bf16"  # kept, said in the run's first line when emulated


def test_fp16_on_a_cpu_is_one_line_exit_2_before_any_work(base, tmp_path):
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "1", "--precision", "fp16",
                                                         "--out", str(out)])
    assert code == 2 and err.count("\n") == 1 and "--precision fp16 needs a CUDA GPU" in err, err
    assert not out.exists()


def fp16_inputs(base, argv):
    """A run's inputs with fp16 forced on the CPU (whose autocast computes it, slowly): the scaler's
    bookkeeping is the same on every device."""
    config = training.parse_train_command(base + argv).config
    inputs = prepare(config)
    inputs.precision = "fp16"
    return config, inputs


def test_fp16_overflowing_steps_are_skipped_by_the_scaler_not_failures(base, tmp_path, monkeypatch):
    real = torch.amp.GradScaler
    monkeypatch.setattr(torch.amp, "GradScaler", lambda *a, **k: real(*a, **{**k, "init_scale": float("inf")}))
    config, inputs = fp16_inputs(base, ["--tasks", "sst", "--max-steps", "3", "--out", str(tmp_path / "run")])
    before = {k: v.clone() for k, v in inputs.encoder.state_dict().items()}
    result = training.fit(config, inputs, tmp_path / "run")
    assert result["scaler_skipped"] == 3 and result["nonfinite_skipped"] == 0 and result["steps"] == 3
    after = result["model"].encoder.state_dict()
    assert all(torch.equal(before[k], after[k].cpu()) for k in before)  # every step skipped: nothing moved


def test_fp16_resume_restores_the_loss_scale(base, tmp_path):
    out = tmp_path / "run"
    config, inputs = fp16_inputs(base, ["--tasks", "sst", "--max-steps", "4", "--checkpoint-every", "1",
                                        "--out", str(out)])

    class StopAt2(training.Callback):
        def on_step(self, run, info):
            if run.state.global_step == 2:
                os.kill(os.getpid(), signal.SIGTERM)  # the loop checkpoints and leaves

    with pytest.raises(training.Interrupted):
        training.fit(config, inputs, out, callbacks=[StopAt2()])
    saved = load_checkpoint(out / "checkpoint.pt")
    assert saved["scaler"]["scale"] == 65536.0
    saved["scaler"]["scale"] = 1024.0
    torch.save(saved, out / "checkpoint.pt")
    scales = []

    class Watch(training.Callback):
        def on_plan(self, run, plan):
            scales.append(run.scaler.get_scale())

    result = training.fit(config, inputs, out, resume=True, callbacks=[Watch()])
    assert scales[0] == 1024.0 and result["steps"] == 4 and result["scaler_skipped"] == 0


# ------------------------------------------------------------------------------------ RNG restore

def test_resume_with_fewer_gpus_than_saved_rng_states_restores_those_there_are(monkeypatch, capsys):
    restored = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.__setitem__(device, state))
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: pytest.fail("IndexError on 1 GPU"))
    state = {**checkpoint.rng_state(), "cuda": [torch.tensor([1], dtype=torch.uint8),
                                                torch.tensor([2], dtype=torch.uint8)]}
    checkpoint.set_rng_state(state)
    assert list(restored) == [0] and restored[0].item() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA RNG states of 2 GPUs and 1 are visible" in err


def test_resumed_under_torchrun_with_another_world_size_every_rank_drops_its_own_units():
    """A checkpoint of one process resumed by two: both ranks start from its state, then draw their own
    dropout streams; resumed by as many processes as saved, each rank gets its own saved state back."""
    torch.manual_seed(5)
    one = {"rng": checkpoint.rng_state(), "rng_ranks": [checkpoint.rng_state()]}
    draws = []
    for rank in (0, 1):
        checkpoint.restore_rng(one, World(rank, 2, rank, "gloo"), seed=0, step=4)
        draws.append(torch.rand(8))
    torch.manual_seed(5)
    unbroken = torch.rand(8)
    assert not torch.equal(draws[0], draws[1]) and not any(torch.equal(d, unbroken) for d in draws)
    states = [checkpoint.rng_state() for _ in range(2)]
    states[1]["torch"] = torch.manual_seed(9).get_state()
    two = {"rng": states[0], "rng_ranks": states}
    checkpoint.restore_rng(two, World(1, 2, 1, "gloo"), seed=0, step=4)
    assert torch.equal(torch.rand(8), torch.rand(8, generator=torch.Generator().manual_seed(9)))
    checkpoint.restore_rng(one, SINGLE, seed=0, step=4)  # one process: the saved state, untouched
    assert torch.equal(torch.rand(8), unbroken)


@pytest.mark.parametrize("available, count, device, said", [
    (False, 0, "cuda", "CUDA is not available on this machine"),
    (True, 1, "cuda:1", "this machine has 1 CUDA device(s), cuda:0"),
    (True, 2, "cuda:7", "this machine has 2 CUDA device(s), cuda:0 to cuda:1"),
])
def test_a_cuda_device_this_machine_lacks_is_one_line_exit_2_before_any_work(base, tmp_path, monkeypatch,
                                                                          available, count, device, said):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "1", "--device", device,
                                                         "--out", str(out)])
    assert code == 2 and err.count("\n") == 1 and f"--device {device}: {said}" in err, err
    assert not out.exists()


# ------------------------------------------------------------------------------------ GPU settings

@pytest.mark.parametrize("capability, allowed, precision, used", [
    ((9, 0), True, "high", True),      # H100: TF32 by default
    ((9, 0), False, "highest", False),  # --no-tf32
    ((7, 5), True, "high", False),     # T4: no TF32 to use
])
def test_tf32_is_on_by_default_on_cuda_from_ampere_on(monkeypatch, capability, allowed, precision, used):
    set_to = []
    monkeypatch.setattr(torch, "set_float32_matmul_precision", set_to.append)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert machine.use_tf32(torch.device("cuda"), allowed) is used and set_to == [precision]
    assert machine.use_tf32(torch.device("cpu"), True) is False and set_to == [precision]  # CPUs untouched


def test_run_records_tf32_and_compile(base, tmp_path, monkeypatch):
    """--compile compiles the encoder in place (inductor here swapped for dynamo's eager backend: the plumbing,
    not the compiler): the run trains, its checkpoint keeps the uncompiled keys."""
    compiled = []
    real = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile",
                        lambda self, **k: compiled.append(type(self).__name__) or real(self, backend="eager"))
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "2", "--compile",
                                                         "--implementation", "reference", "--out", str(out)])
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["precision"]["tf32"] is False and config["arguments"]["no_tf32"] is False
    assert config["arguments"]["compile"] is True and compiled == ["BertModel"]
    saved = load_checkpoint(out / "checkpoint.pt")["model"]
    assert not any("_orig_mod" in k for k in saved) and "encoder.embeddings.word_embeddings.weight" in saved


def test_the_fast_path_on_cuda_is_one_warning_line(base, tmp_path, monkeypatch):
    warning = machine.implementation_warning(torch.device("cuda"), "fast")
    assert "\n" not in warning and "fp32 probabilities" in warning
    assert machine.implementation_warning(torch.device("cuda"), "reference") is None
    assert machine.implementation_warning(torch.device("cpu"), "fast") is None
    import tasks.inputs  # the run says it once, this CPU taken for a GPU
    monkeypatch.setattr(tasks.inputs, "implementation_warning",
                        lambda device, used: machine.implementation_warning(torch.device("cuda"), used))
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "1", "--implementation",
                                                         "fast", "--out", str(tmp_path / "run")])
    assert code == 0 and err.splitlines().count(warning) == 1, err


def test_busy_time_is_the_union_of_intervals_overlaps_once_gaps_never():
    assert machine.busy_time([]) == 0.0
    assert machine.busy_time([(0, 10), (5, 12), (2, 3)]) == 12          # overlapping and nested: once
    assert machine.busy_time([(20, 25), (0, 10)]) == 15                # unsorted, with a gap between them

"""--precision auto: bf16 only where the device computes it natively and, on a CPU, faster than
fp32; recorded in config.json."""
import json

import pytest
import torch

import minbert
import train_multitask
from tests.helpers import run_cli

NATIVE = {"architecture": "x86_64", "avx512_f": True, "avx512_bf16": True, "amx_bf16": False}
EMULATED = {"architecture": "x86_64", "avx512_f": True, "avx512_bf16": False, "amx_bf16": False}
FAST, SLOW = 2.0, 0.55   # bf16 matmuls over fp32's: AVX512-BF16 on Zen or AMX; the Xeon whose bf16 units lose


@pytest.fixture
def bf16_speedup(monkeypatch):
    """Set what this CPU's matmul probe measures (the real one answers for the machine the tests run on)."""
    def set_to(ratio: float):
        monkeypatch.setattr(minbert.precision, "cpu_bf16_speedup", lambda: ratio)
        monkeypatch.setattr(minbert, "cpu_bf16_speedup", lambda: ratio)
    set_to(FAST)
    return set_to


@pytest.mark.parametrize("capabilities, expected", [
    (NATIVE, "bf16"), (EMULATED, "fp32"), ({**EMULATED, "amx_bf16": True}, "bf16"),
    ({"architecture": "arm64", "neon": True, "bf16": True}, "bf16"), ({"architecture": "arm64", "neon": True}, "fp32"),
])
def test_auto_follows_the_cpu(monkeypatch, bf16_speedup, capabilities, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    assert minbert.native_bf16("cpu") == (expected == "bf16")
    assert minbert.resolve_precision("auto", torch.device("cpu")) == expected


@pytest.mark.parametrize("ratio, expected", [(SLOW, "fp32"), (minbert.CPU_BF16_GAIN, "bf16"), (FAST, "bf16")])
def test_auto_keeps_fp32_where_the_cpus_bf16_units_lose_to_it(monkeypatch, bf16_speedup, ratio, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: NATIVE)
    bf16_speedup(ratio)
    assert minbert.native_bf16("cpu")          # the units are there: an explicit bf16 is not called emulated
    assert minbert.resolve_precision("auto", "cpu") == expected
    assert minbert.resolve_precision("bf16", "cpu") == "bf16"


def test_the_matmul_probe_measures_once_a_process():
    minbert.precision.cpu_bf16_speedup.cache_clear()
    ratio = minbert.cpu_bf16_speedup()
    assert 0 < ratio < float("inf")
    assert minbert.cpu_bf16_speedup() is ratio and minbert.precision.cpu_bf16_speedup.cache_info().hits == 1


def test_explicit_choice_is_kept(monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: EMULATED)
    assert minbert.resolve_precision("bf16", "cpu") == "bf16"
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: NATIVE)
    assert minbert.resolve_precision("fp32", "cpu") == "fp32"
    with pytest.raises(minbert.UserError, match="fp16 needs a CUDA GPU"):
        minbert.resolve_precision("fp16", "cpu")


@pytest.mark.parametrize("capabilities, used", [(NATIVE, "bf16"), (EMULATED, "fp32")])
def test_run_records_requested_and_used_precision(monkeypatch, bf16_speedup, small_data_dir, tiny_model,
                                                  tmp_path, capabilities, used):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(train_multitask.main, [
        "--model", str(tiny_model), "--device", "cpu", "--tasks", "sst", "--batch-size", "8",
        "--eval-batch-size", "64",
        "--max-steps", "1", "--data-dir", str(small_data_dir), "--out", str(out)])
    assert code == 0, stderr
    config = json.loads((out / "config.json").read_text())
    assert config["precision"] == {"requested": "auto", "used": used, "native_bf16": used == "bf16", "tf32": False}
    assert config["arguments"]["precision"] == used  # what --resume continues with, on any machine
    assert f"precision {used} (auto: " in stdout


def test_a_cpu_whose_bf16_loses_trains_in_fp32_and_says_why(monkeypatch, bf16_speedup, small_data_dir,
                                                             tiny_model, tmp_path):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: NATIVE)
    bf16_speedup(SLOW)
    code, stdout, stderr = run_cli(train_multitask.main, [
        "--model", str(tiny_model), "--device", "cpu", "--tasks", "sst", "--batch-size", "8",
        "--eval-batch-size", "64",
        "--max-steps", "1", "--data-dir", str(small_data_dir), "--out", str(tmp_path / "r")])
    assert code == 0, stderr
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["precision"] == {"requested": "auto", "used": "fp32", "native_bf16": True, "tf32": False}
    assert "precision fp32 (auto: this CPU's bf16 matmuls ran at 0.55x its fp32 rate" in stdout


def test_emulated_bf16_is_said(monkeypatch, small_data_dir, tiny_model, tmp_path):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: EMULATED)
    code, stdout, stderr = run_cli(train_multitask.main, [
        "--model", str(tiny_model), "--device", "cpu", "--tasks", "sst", "--batch-size", "8",
        "--eval-batch-size", "64",
        "--max-steps", "1", "--precision", "bf16", "--data-dir", str(small_data_dir), "--out", str(tmp_path / "r")])
    assert code == 0, stderr
    assert "precision bf16 (emulated on this device" in stdout

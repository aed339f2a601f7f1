"""--precision auto: bf16 only where the device computes it natively, recorded in config.json."""
import json

import pytest
import torch

import minbert
import train_multitask
from tests.helpers import run_cli

NATIVE = {"architecture": "x86_64", "avx512_f": True, "avx512_bf16": True, "amx_bf16": False}
EMULATED = {"architecture": "x86_64", "avx512_f": True, "avx512_bf16": False, "amx_bf16": False}


@pytest.mark.parametrize("capabilities, expected", [
    (NATIVE, "bf16"), (EMULATED, "fp32"), ({**EMULATED, "amx_bf16": True}, "bf16"),
    ({"architecture": "arm64", "neon": True, "bf16": True}, "bf16"), ({"architecture": "arm64", "neon": True}, "fp32"),
])
def test_auto_follows_the_cpu(monkeypatch, capabilities, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities)
    assert minbert.native_bf16("cpu") == (expected == "bf16")
    assert minbert.resolve_precision("auto", torch.device("cpu")) == expected


def test_explicit_choice_is_kept(monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: EMULATED)
    assert minbert.resolve_precision("bf16", "cpu") == "bf16"
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: NATIVE)
    assert minbert.resolve_precision("fp32", "cpu") == "fp32"
    with pytest.raises(minbert.UserError, match="fp16 needs a CUDA GPU"):
        minbert.resolve_precision("fp16", "cpu")


@pytest.mark.parametrize("capabilities, used", [(NATIVE, "bf16"), (EMULATED, "fp32")])
def test_run_records_requested_and_used_precision(monkeypatch, small_data_dir, tiny_model, tmp_path,
                                                  capabilities, used):
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


def test_emulated_bf16_is_said(monkeypatch, small_data_dir, tiny_model, tmp_path):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: EMULATED)
    code, stdout, stderr = run_cli(train_multitask.main, [
        "--model", str(tiny_model), "--device", "cpu", "--tasks", "sst", "--batch-size", "8",
        "--eval-batch-size", "64",
        "--max-steps", "1", "--precision", "bf16", "--data-dir", str(small_data_dir), "--out", str(tmp_path / "r")])
    assert code == 0, stderr
    assert "precision bf16 (emulated on this device" in stdout

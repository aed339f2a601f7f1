"""Reliability of a training run: every fault is injected for real and what it leaves is checked.

Kills (SIGKILL after and during a checkpoint write, SIGTERM from outside) run `train_multitask.py`
in a subprocess; failures that need a precise trigger (NaN losses, a full disk) are injected with
monkeypatch in-process. Runs use a tiny randomly initialised BERT (2 layers x 32, the real
vocabulary) so that a run takes seconds: what is tested is the loop's bookkeeping, not the model.

That `minbert.from_pretrained` refuses a code-running pickle is shown in
tests/minbert/test_loading.py::test_pickle_that_runs_code_is_refused; here the same is shown for --resume.
"""
import errno
import json
import os
import pickle
import shutil
import signal
from pathlib import Path

import pytest
import torch

import train_multitask
from tasks import fileio, training
from tasks.evaluation import predict
from tasks.inputs import prepare
from tasks.saved.checkpoint_files import load_checkpoint
from tasks.training import command as training_command  # the module command.py, whose prepare is patched
from tests.helpers import run_cli
from tests.helpers.runs import assert_same_run, nan_loss_at, run, start, step_in, without_times

# ------------------------------------------------------------------------------------------------ helpers


def temp_files(folder: Path) -> list:
    return sorted(p.name for p in folder.rglob(".*.tmp")) + sorted(p.name for p in folder.glob("*.next.pt"))


# ------------------------------------------------------------------------------------------------ kill and resume

ALL_TASKS = ["--batch-size", "16", "--max-steps", "12"]  # 3 tasks x 3 batches: 9 steps an epoch, 12 in all
SMART = ["--tasks", "sst", "--smart", "--max-steps", "8"]  # 5 steps an epoch, 8 in all
EVAL_EVERY = ALL_TASKS + ["--eval-every", "4"]  # evaluated at steps 4, 8 and 12, not at the epoch's end (9)


@pytest.fixture(scope="module")
def reference_runs(base, tmp_path_factory):
    """The unbroken runs each interrupted one must reproduce, bit for bit."""
    root = tmp_path_factory.mktemp("reference")
    runs = {}
    for name, extra in (("all", ALL_TASKS), ("smart", SMART), ("eval", EVAL_EVERY)):
        code, _, err = run(root, "none", 0, base + extra + ["--out", str(root / name)])
        assert code == 0, err
        runs[name] = root / name
    return runs


def test_sigkill_during_and_after_checkpoints_then_resume_is_bitwise_identical(base, tmp_path, reference_runs):
    out = tmp_path / "run"
    # 1. killed while step 4's checkpoint is half written: step 2's stays whole.
    code, _, _ = run(tmp_path, "kill-during-save", 4, base + ALL_TASKS + ["--out", str(out)])
    assert code == -signal.SIGKILL
    assert step_in(out / "checkpoint.pt") == 2 and temp_files(out)
    # 2. resumed, then killed right after saving step 10 (mid-epoch 2, after epoch 1's evaluation).
    code, _, err = run(tmp_path, "kill-after-save", 10, ["--resume", str(out)])
    assert code == -signal.SIGKILL, err
    assert step_in(out / "checkpoint.pt") == 10 and step_in(out / "checkpoint.prev.pt") == 9
    assert not temp_files(out)  # the half-written file of the first kill was cleaned up
    assert not (out / "metrics.json").exists()
    # 3. resumed to the end.
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    assert_same_run(reference_runs["all"], out)


def test_sigkill_with_smart_resumes_the_ema_copy_bitwise(base, tmp_path, reference_runs):
    out = tmp_path / "run"
    code, _, _ = run(tmp_path, "kill-after-save", 6, base + SMART + ["--out", str(out)])
    assert code == -signal.SIGKILL
    assert load_checkpoint(out / "checkpoint.pt")["smart"]["ema"]
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    assert_same_run(reference_runs["smart"], out)


def test_killed_after_a_mid_epoch_evaluation_resumes_bitwise(base, tmp_path, reference_runs):
    out = tmp_path / "run"
    code, _, _ = run(tmp_path, "kill-after-save", 4, base + EVAL_EVERY + ["--out", str(out)])
    assert code == -signal.SIGKILL
    progress = json.loads(load_checkpoint(out / "checkpoint.pt")["progress"])
    assert progress["global_step"] == 4 and [e["step"] for e in progress["history"]] == [4]
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    assert_same_run(reference_runs["eval"], out)
    assert [e["step"] for e in json.loads((out / "metrics.json").read_text())["history"]] == [4, 8, 12]


def test_sigterm_checkpoints_exits_cleanly_and_resumes(base, tmp_path, reference_runs):
    out = tmp_path / "run"
    proc = start(tmp_path, "announce", 0, base + ALL_TASKS + ["--out", str(out)])
    for line in proc.stdout:
        if line.startswith("trained step 3"):
            proc.send_signal(signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and f"resume with --resume {out}" in err.strip().splitlines()[-1]
    stopped = step_in(out / "checkpoint.pt")
    assert 3 <= stopped < 12 and f"stopped by SIGTERM at step {stopped}" in err
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    assert_same_run(reference_runs["all"], out)


def test_evaluation_after_training_sees_the_current_weights(base, tmp_path):
    """Dev scores after further optimizer steps are those of the weights a resumed run loads.

    Regression: minbert's attention caches its fused QKV weights keyed on the tensors' version
    counters, which the fused torch AdamW kernel does not bump; epoch 2 was then scored with
    epoch 1's QKV weights, and a resumed run (fresh cache) reported different dev metrics.
    """
    # 2 tasks x 3 batches: evaluated after step 6, trained two more steps, evaluated again
    argv = base + ["--tasks", "sst,sts", "--batch-size", "16", "--max-steps", "8"]
    config = training.parse_train_command(argv).config
    inputs = prepare(config)
    trained = training.fit(config, inputs, training.InMemory())["model"]
    fresh = training.build_multitask_model(config, inputs)
    fresh.load_state_dict(trained.state_dict())
    dev = inputs.data["sts"]["dev"]
    assert [predict(m, dev, inputs.tokenizer, inputs.device, 64, "fp32") for m in (trained, fresh)] == \
        [predict(fresh, dev, inputs.tokenizer, inputs.device, 64, "fp32")] * 2


def test_ctrl_c_before_training_is_one_line(base, tmp_path, monkeypatch):
    def interrupted(args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(training_command, "prepare", interrupted)
    code, _, err = run_cli(train_multitask.main, base + ["--out", str(tmp_path / "r")])
    assert code == 130 and err.strip() == "interrupted"


# ------------------------------------------------------------------------------------------------ damaged checkpoints


@pytest.fixture(scope="module")
def finished_run(base, tmp_path_factory):
    """A completed 4-step run: checkpoint.pt at step 4 (after the final evaluation), checkpoint.prev.pt at 2."""
    out = tmp_path_factory.mktemp("finished") / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "4", "--out", str(out)])
    assert code == 0, err
    return out


@pytest.fixture()
def run_copy(finished_run, tmp_path):
    return Path(shutil.copytree(finished_run, tmp_path / "run"))


def errors(err: str) -> list:
    """stderr's lines but the warning a short run gives at its start (its EMA: training/averaging.py)."""
    return [line for line in err.strip().splitlines() if not line.startswith("warning:")]


def resume(run_dir):
    code, _, err = run_cli(train_multitask.main, ["--device", "cpu", "--resume", str(run_dir)])
    return code, [line for line in err.strip().splitlines() if not line.startswith("note:")]


def test_resuming_a_finished_run_rewrites_the_same_results(run_copy, finished_run):
    (run_copy / "metrics.json").unlink()  # as if killed after the final checkpoint
    code, err = resume(run_copy)
    assert code == 0, err
    assert without_times(json.loads((run_copy / "metrics.json").read_text())) == \
        without_times(json.loads((finished_run / "metrics.json").read_text()))


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "empty"])
def test_damaged_checkpoint_is_one_line_exit_2_offering_the_previous(run_copy, damage):
    latest = run_copy / "checkpoint.pt"
    data = latest.read_bytes()
    if damage == "truncated":
        latest.write_bytes(data[: len(data) // 2])
    elif damage == "flipped byte":  # inside a tensor: torch.load alone would not notice
        latest.write_bytes(data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:])
    else:
        latest.write_bytes(b"")
    code, err = resume(run_copy)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error:") and "corrupted" in err[0] and "checkpoint.prev.pt" in err[0]
    os.replace(run_copy / "checkpoint.prev.pt", latest)  # what the message offers
    code, err = resume(run_copy)
    assert code == 0, err


def test_checkpoint_of_another_run_is_one_line_exit_2(run_copy):
    ckpt = torch.load(run_copy / "checkpoint.pt", weights_only=True)
    ckpt["model"]["heads.quora.weight"] = ckpt["model"].pop("heads.sst.weight")
    torch.save(ckpt, run_copy / "checkpoint.pt")
    code, err = resume(run_copy)
    assert code == 2 and len(err) == 1 and "does not fit this run" in err[0], err


def test_missing_checkpoint_offers_the_previous(run_copy):
    (run_copy / "checkpoint.pt").unlink()
    code, err = resume(run_copy)
    assert code == 2 and len(err) == 1 and "checkpoint.prev.pt" in err[0], err


class _Boom:
    """Unpickling this runs a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("kind", ["torch.save", "raw pickle"])
def test_resume_refuses_a_checkpoint_that_would_run_code(run_copy, tmp_path, kind):
    marker = tmp_path / "pwned"
    if kind == "torch.save":
        torch.save({"model": _Boom(marker)}, run_copy / "checkpoint.pt")
    else:
        with open(run_copy / "checkpoint.pt", "wb") as f:
            pickle.dump({"model": _Boom(marker)}, f)
    code, err = resume(run_copy)
    assert code == 2 and len(err) == 1 and "checkpoint.pt" in err[0], err
    assert ("refused" if kind == "torch.save" else "corrupted") in err[0]
    assert not marker.exists()


def test_resume_ignores_paths_and_checks_arguments_from_config(run_copy, tmp_path):
    """config.json is file content: its "out" cannot redirect the run, its values are re-validated."""
    config = json.loads((run_copy / "config.json").read_text())
    config["arguments"]["out"] = str(tmp_path / "elsewhere")
    (run_copy / "config.json").write_text(json.dumps(config))
    (run_copy / "metrics.json").unlink()
    assert resume(run_copy)[0] == 0
    assert (run_copy / "metrics.json").exists() and not (tmp_path / "elsewhere").exists()
    for key, value in (("tasks", "../../etc"), ("lr", -1.0), ("lr", "fast")):
        bad = json.loads(json.dumps(config))
        bad["arguments"][key] = value
        (run_copy / "config.json").write_text(json.dumps(bad))
        code, err = resume(run_copy)
        assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err


# ------------------------------------------------------------------------------------------------ non-finite losses


@pytest.mark.parametrize("kind", ["loss", "gradient"])
def test_nonfinite_stops_naming_step_and_task_keeping_the_checkpoint(base, tmp_path, monkeypatch, kind):
    nan_loss_at(monkeypatch, 5, kind)
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "6", "--out", str(out)])
    lines = errors(err)
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"error: non-finite {kind}") and "at step 5 on task sst" in lines[0]
    assert step_in(out / "checkpoint.pt") == 4 and not (out / "metrics.json").exists()
    params = load_checkpoint(out / "checkpoint.pt")["model"].values()
    assert all(torch.isfinite(p).all() for p in params)


def test_skip_nonfinite_skips_and_counts(base, tmp_path, monkeypatch):
    nan_loss_at(monkeypatch, 3)
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "4", "--skip-nonfinite",
                                                         "--out", str(out)])
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["nonfinite_skipped"] == 1 and metrics["steps"] == 4


# ------------------------------------------------------------------------------------------------ full disk


@pytest.mark.parametrize("name,skip", [("checkpoint.next.pt", 1), ("best.pt", 0), ("metrics.json", 0),
                                       ("sst-dev-output.csv", 0)])
def test_full_disk_is_one_line_exit_1_and_the_run_resumes(base, tmp_path, monkeypatch, name, skip):
    """The write of `name` fails (after `skip` good ones) with ENOSPC halfway through its bytes."""
    real, seen = fileio.atomic_write_with, []

    def write(path, fill):
        if Path(path).name == name:
            seen.append(path)
            if len(seen) > skip:
                def half(handle):
                    handle.write(b"partial")
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real(path, half)
        return real(path, fill)
    monkeypatch.setattr(fileio, "atomic_write_with", write)
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--max-steps", "4", "--out", str(out)])
    lines = errors(err)
    assert code == 1 and len(lines) == 1 and "No space left on device" in lines[0], err
    assert lines[0].startswith("error: cannot write") and "previous version is intact" in lines[0]
    assert not temp_files(out)
    expected = 2 if name in ("checkpoint.next.pt", "best.pt") else 4  # the last checkpoint that was saved
    assert step_in(out / "checkpoint.pt") == expected
    monkeypatch.undo()
    code, err = resume(out)
    assert code == 0, err
    assert json.loads((out / "metrics.json").read_text())["steps"] == 4


# ------------------------------------------------------------------------------------------------ strict inputs


@pytest.mark.parametrize("argv,needle", [
    (["--lr", "-0.001"], "--lr"),
    (["--freeze-until", "-3"], "--freeze-until"),  # the tiny model has 2 layers
    (["--tasks", "sst,nli"], "nli"),
    (["--tasks", "../../x"], "../../x"),  # task names are never joined into paths unchecked
    (["--checkpoint-every", "-1"], "--checkpoint-every"),
])
def test_bad_arguments_are_rejected_before_anything_is_written(base, tmp_path, argv, needle):
    out = tmp_path / "r"
    code, _, err = run_cli(train_multitask.main, base + ["--max-steps", "1", "--out", str(out)] + argv)
    assert code == 2 and err.strip().count("\n") == 0 and needle in err and err.startswith("error:"), err
    assert not out.exists()


def test_out_holding_another_run_is_refused(run_copy):
    before = {p.name: p.stat().st_mtime_ns for p in run_copy.iterdir()}
    code, _, err = run_cli(train_multitask.main, ["--device", "cpu", "--out", str(run_copy), "--max-steps", "1"])
    assert code == 2 and "--resume" in err
    assert {p.name: p.stat().st_mtime_ns for p in run_copy.iterdir()} == before


def test_freeze_until_beyond_the_layers_freezes_the_encoder_with_a_note(base, tmp_path):
    out = tmp_path / "r"
    code, _, err = run_cli(train_multitask.main, base + ["--tasks", "sst", "--freeze-until", "5", "--max-steps", "1",
                                                         "--out", str(out)])
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "whole encoder is frozen" in notes[0]
    assert json.loads((out / "config.json").read_text())["frozen_layers"] == 2


def test_overlong_sentences_are_truncated_not_fatal(base, small_data_dir, tmp_path):
    """100,000 characters (~50,000 tokens) against a model with 64 positions, alone and in a pair."""
    data = Path(shutil.copytree(small_data_dir, tmp_path / "data"))
    long_text = ("word " * 20_001).strip()
    for name in ("ids-sst-train.csv", "sts-train.csv"):
        header, first, *rest = (data / name).read_text().splitlines(keepends=True)
        fields = first.split("\t")
        fields[2] = long_text  # the sentence (sst) or first sentence (sts) column
        (data / name).write_text(header + "\t".join(fields) + "".join(rest))
    out = tmp_path / "r"
    argv = base + ["--data-dir", str(data), "--tasks", "sst,sts", "--max-steps", "4", "--batch-size", "40",
                   "--out", str(out)]
    code, _, err = run_cli(train_multitask.main, argv)
    assert code == 0, err

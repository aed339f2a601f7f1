"""Training runs in a fresh process (a fault injected at a step, or under torchrun) and comparing what they leave."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import torch

from tasks.heads import task_spec
from tasks.saved.checkpoint_files import load_checkpoint
from tasks.training import build as training_build  # the module build.py, whose task_spec is patched
from tests.helpers import REPO

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64)


# Runs train_multitask.py's command (tasks.training.train_command) in a fresh process; MODE AT injects a
# fault at global step AT.
DRIVER = r'''
import io, json, os, signal, sys
sys.path.insert(0, sys.argv[1])
import torch
from tasks import fileio
from tasks import training
from tasks.training import checkpoint, outputs

mode, at, argv = sys.argv[2], int(sys.argv[3]), sys.argv[4:]
step_of = lambda state: json.loads(state["progress"])["global_step"]
callbacks = []

if mode == "kill-after-save":  # SIGKILL once the checkpoint of step AT is in place
    real_save = outputs.save_checkpoint
    def save_checkpoint(out_dir, state):
        real_save(out_dir, state)
        if step_of(state) == at:
            os.kill(os.getpid(), signal.SIGKILL)
    outputs.save_checkpoint = save_checkpoint
elif mode == "kill-during-save":  # SIGKILL with half of step AT's checkpoint written
    real_torch_save = checkpoint.atomic_save_torch
    def atomic_save_torch(path, obj):
        if "progress" in obj and step_of(obj) == at:
            buffer = io.BytesIO()
            torch.save(obj, buffer)
            def half(handle):
                handle.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
                handle.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            fileio.atomic_write_with(path, half)
        return real_torch_save(path, obj)
    checkpoint.atomic_save_torch = atomic_save_torch
elif mode == "sigterm-rank-1":  # under torchrun, only rank 1 is sent SIGTERM, after step AT
    class SigtermRank1(training.Callback):
        def on_step(self, run, info):
            if run.state.global_step == at and os.environ.get("RANK") == "1":
                os.kill(os.getpid(), signal.SIGTERM)
    callbacks.append(SigtermRank1())
elif mode == "announce":  # print each finished step, for the test to signal at
    class Announce(training.Callback):
        def on_step(self, run, info):
            print("trained step", run.state.global_step, flush=True)
    callbacks.append(Announce())
sys.exit(training.train_command(argv, callbacks=callbacks))
'''


def start(tmp_path, mode, at, argv) -> subprocess.Popen:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    return subprocess.Popen([sys.executable, str(driver), str(REPO), mode, str(at), *argv], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(tmp_path, mode, at, argv):
    proc = start(tmp_path, mode, at, argv)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def step_in(path: Path) -> int:
    return json.loads(load_checkpoint(path)["progress"])["global_step"]


def assert_same(a, b, where="checkpoint"):
    """Bitwise: tensors with torch.equal, everything else with ==."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    else:
        assert a == b, where


def without_times(value):
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def scalars(run_dir: Path) -> dict:
    """Every TensorBoard scalar as tag -> [(step, value)], after TensorBoard's purge of orphaned steps."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def assert_same_run(reference: Path, resumed: Path):
    final_a, final_b = (torch.load(d / "checkpoint.pt", weights_only=True) for d in (reference, resumed))
    progress_a, progress_b = (without_times(json.loads(c.pop("progress"))) for c in (final_a, final_b))
    assert_same(final_a, final_b)  # weights, optimizer, scheduler, SMART's EMA copy, RNG states
    assert progress_a == progress_b
    assert_same(*(torch.load(d / "best.pt", weights_only=True) for d in (reference, resumed)))
    metrics_a, metrics_b = (json.loads((d / "metrics.json").read_text()) for d in (reference, resumed))
    assert without_times(metrics_a) == without_times(metrics_b)
    for pred in (p for p in (reference / "predictions").rglob("*") if p.is_file()):  # with the score files
        name = pred.relative_to(reference / "predictions")
        assert (resumed / "predictions" / name).read_bytes() == pred.read_bytes(), name
    for exported in ("model.safetensors", "heads.safetensors", "tasks.json"):
        assert (resumed / "model" / exported).read_bytes() == (reference / "model" / exported).read_bytes(), exported
    assert scalars(resumed) == scalars(reference)  # each step once: the killed process's extra steps are purged


def nan_loss_at(monkeypatch, step, kind="loss"):
    """The `step`-th loss computed is NaN ("loss"), or finite with a NaN gradient ("gradient")."""
    calls = []

    def patched(task, pair_mode="cross", task_heads="default"):
        spec = task_spec(task, pair_mode, task_heads)

        def loss(outputs, labels):
            calls.append(1)
            value = spec.loss(outputs, labels)
            if len(calls) != step:
                return value
            if kind == "loss":
                return value * float("nan")
            return value + torch.sqrt(outputs.float() * 0).sum()  # 0, whose gradient is 0 * inf
        return dataclasses.replace(spec, loss=loss)
    monkeypatch.setattr(training_build, "task_spec", patched)


WEIGHT_TOLERANCE = 1e-5  # measured: 8e-8 .. 6e-7 after 6 steps


def torchrun(tmp_path, argv, mode="none", at=0):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(driver), str(REPO), mode, str(at), *argv],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def weights(run_dir):
    return torch.load(run_dir / "checkpoint.pt", weights_only=True)["model"]

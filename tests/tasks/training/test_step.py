"""The training step's contracts: how often it reads the device, and --grad-accum's equivalence to one batch."""
import dataclasses

import pytest
import torch

import minbert.clip
import minbert.model
from tasks import training
from tasks.inputs import prepare
from tasks.training.build import start
from tasks.training.loop import run_epoch
from tasks.training.step import micro_batches
from tests.helpers.runs import nan_loss_at
from tests.helpers.step import READS, NoSignal, build


@pytest.mark.parametrize("extra", [[], ["--surgery", "pcgrad"], ["--smart"]])
def test_the_step_reads_the_host_once_per_log_interval(tiny_model, small_data_dir, monkeypatch, extra):
    """Six steps with --log-every 3: the logged values are read twice, and nothing else reads the device
    (gradient surgery adds its one Gram-matrix read a step). The reference implementation, CUDA's default: the
    fast path (a CPU's default) lays its tokens out on the host from the attention mask."""
    # --average none: the EMA copy's update reads its step counter, a CPU tensor on every device (no wait on
    # the device), which this count could not tell from a device read; test_averaging holds the EMA.
    run = build(tiny_model, small_data_dir, "--max-steps", "6", "--log-every", "3", "--precision", "bf16",
                "--implementation", "reference", "--average", "none", *extra)
    # minbert's CPU clipping reads its norm (a CPU value, nothing to wait for); on CUDA it runs torch's
    # clip_grad_norm_, which does not: the test takes that path.
    monkeypatch.setattr(minbert.clip, "_cpu_fast_path", lambda grads: False)
    monkeypatch.setattr(minbert.model, "_unpadded_on_the_cpu", lambda mask: False)  # CUDA builds the mask unread
    reads, seen = [], []
    for name in READS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            reads.append(_name)
            return _real(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    probe = type("Probe", (training.Callback,), {"on_losses": lambda self, run, step, values: seen.append(step)})
    run.callbacks.append(probe())
    run_epoch(run, NoSignal())
    monkeypatch.undo()
    assert run.state.global_step == 6 and seen == list(range(1, 7))
    per_step = 1 if extra[:1] == ["--surgery"] else 0
    assert len(reads) == 2 + 6 * per_step, reads


def test_grad_accum_equals_one_batch(tiny_model, small_data_dir):
    """--batch-size 2 --grad-accum 2 trains as --batch-size 4: the same batches, the same weights (fp32,
    no dropout), with an odd batch split unevenly."""
    assert micro_batches([1, 2, 3], 2) == [[1, 2], [3]] and micro_batches([1], 4) == [[1]]
    runs = []
    for extra in (["--batch-size", "4"], ["--batch-size", "2", "--grad-accum", "2"], ["--batch-size", "3",
                                                                                      "--grad-accum", "1"]):
        run = build(tiny_model, small_data_dir, "--precision", "fp32", "--dropout", "0", "--max-steps", "3",
                    "--sampler", "union", *extra)
        run_epoch(run, NoSignal())
        runs.append(run)
    assert runs[0].sampler.plan(0)[:3] == runs[1].sampler.plan(0)[:3]
    one, accumulated, other = ({k: v.detach() for k, v in r.model.state_dict().items()} for r in runs)
    moved = [k for k in one if not torch.equal(one[k], other[k])]
    assert moved  # the comparison can tell batches apart
    for k in one:
        assert torch.allclose(one[k], accumulated[k], atol=2e-6, rtol=1e-5), k
    assert dataclasses.asdict(runs[1].config)["grad_accum"] == 2


def test_steps_the_fp16_scaler_skips_move_neither_the_schedule_nor_smarts_ema(tiny_model, small_data_dir,
                                                                             monkeypatch):
    """fp16 forced on the CPU, every scaled gradient overflowing: the scaler skips each step, the count
    comes from the scaler's own finding, and neither the learning rate nor the EMA copy moves."""
    real = torch.amp.GradScaler
    monkeypatch.setattr(torch.amp, "GradScaler", lambda *a, **k: real(*a, **{**k, "init_scale": float("inf")}))
    config = training.parse_train_command(["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--device",
                                           "cpu", "--max-length", "16", "--batch-size", "4", "--tasks", "sst",
                                           "--max-steps", "3", "--smart", "--smart-lambda-s", "0"]).config
    inputs = prepare(config)
    inputs.precision = "fp16"
    run = training.build_run(config, inputs)
    start(run)
    lr = run.scheduler.get_last_lr()
    ema = {k: v.clone() for k, v in run.smart.ema.state_dict().items()}
    run_epoch(run, NoSignal())
    assert run.state.scaler_skipped == 3 and run.state.nonfinite_skipped == 0
    assert run.scheduler.last_epoch == 0 and run.scheduler.get_last_lr() == lr
    assert all(torch.equal(v, run.smart.ema.state_dict()[k]) for k, v in ema.items())


def test_fp16_skip_nonfinite_skips_and_carries_on(tiny_model, small_data_dir, monkeypatch):
    """Under fp16 a NaN loss with --skip-nonfinite is dropped before the update, and the scaler's step is
    closed so that the next step can unscale again."""
    nan_loss_at(monkeypatch, 2)
    config = training.parse_train_command(["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--device",
                                           "cpu", "--max-length", "16", "--batch-size", "4", "--tasks", "sst",
                                           "--max-steps", "3", "--skip-nonfinite"]).config
    inputs = prepare(config)
    inputs.precision = "fp16"
    run = training.build_run(config, inputs)
    start(run)
    run_epoch(run, NoSignal())
    assert run.state.global_step == 3 and run.state.nonfinite_skipped == 1 and run.scheduler.last_epoch == 2

"""On a CUDA GPU: the graphed step (--cuda-graphs on) held to the eager one, and evaluation's single read and
cast-once weights held to the per-batch algorithm. Marked `gpu`, skipped without CUDA (tests/conftest.py); not yet
run on a GPU (written in a session without one, issue 48)."""
import pytest
import torch
from test_evaluation import TASKS, assert_untouched, multitask, per_batch_predict, snapshot
from test_reliability import tiny_model  # noqa: F401 (fixture)
from test_step import NoSignal, build

from tasks import training
from tasks.data import read_split
from tasks.encoded import encode_split
from tasks.evaluation import predict
from tasks.training.loop import run_epoch

pytestmark = pytest.mark.gpu
STEPS = 20
BF16_LOSS_TOLERANCE = dict(rel=5e-2, abs=2e-2)  # 20 bf16 steps, the two paths' padding and kernels differ


def losses_of(run) -> dict:
    seen = {}
    probe = type("Probe", (training.Callback,), {"on_losses": lambda self, r, step, values: seen.update(
        {(step, k): v for k, v in values.items() if k.startswith("train/loss")})})
    run.callbacks.append(probe())
    run_epoch(run, NoSignal())
    return seen


def test_the_graphed_step_gives_the_eager_steps_losses(tiny_model, small_data_dir):  # noqa: F811
    argv = ("--device", "cuda", "--precision", "bf16", "--implementation", "reference", "--dropout", "0",
            "--max-steps", str(STEPS), "--log-every", "5", "--tasks", "sst,quora,sts")
    eager = build(tiny_model, small_data_dir, *argv, "--cuda-graphs", "off")
    graphed = build(tiny_model, small_data_dir, *argv, "--cuda-graphs", "on")
    assert not eager.graphs.graphed and graphed.graphs.graphed
    assert isinstance(graphed.loss_fn, torch._dynamo.eval_frame.OptimizedModule)
    assert isinstance(graphed.optimizer.param_groups[0]["lr"], torch.Tensor)
    a, b = losses_of(eager), losses_of(graphed)
    assert graphed.state.global_step == STEPS and a.keys() == b.keys() and len(a) >= STEPS
    assert b == pytest.approx(a, **BF16_LOSS_TOLERANCE)


@pytest.mark.parametrize("implementation", ["reference", "fast"])
def test_cuda_predictions_equal_the_per_batch_algorithm(small_data_dir, tokenizer, implementation):
    cuda = torch.device("cuda")
    model = multitask(implementation).to(cuda)
    before = snapshot(model)
    for task in TASKS:
        split = encode_split(read_split(small_data_dir, task, "dev"), tokenizer, "cross")
        assert predict(model, split, tokenizer, cuda, 7, "bf16") == \
            per_batch_predict(model, split, tokenizer, cuda, 7, "bf16"), task
    assert_untouched(model, before)

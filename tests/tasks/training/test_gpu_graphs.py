"""The graphed step (--cuda-graphs on) held to the eager one by the weights both end with, and evaluation's single
read and cast-once weights held to the per-batch algorithm.

The comparison is `update_gap`: how far the graphed run's final weights are from the eager run's, as a share of
how far the eager run moved them. fp32 without TF32, dropout off, a real learning rate, three tasks padded to
several widths. Its CPU twin runs in CI: the same comparison between the eager step and the eager step on padded
widths passes, and it fails when the learning rate is zeroed or one step is left out, so the tolerance catches a
graph that never updates, a device learning rate never filled, or a skipped replay. The `gpu` tests are skipped
without CUDA (tests/conftest.py)."""
import pytest
import torch

from tasks.data import read_split
from tasks.encoded import encode_split
from tasks.evaluation import predict
from tasks.training.graphs import StepGraphs, widths_up_to
from tasks.training.loop import run_epoch
from tasks.training.step import step_batches
from tests.helpers.evaluation import TASKS, assert_untouched, multitask, per_batch_predict, snapshot
from tests.helpers.step import NoSignal, build

STEPS = 12
GAP_TOLERANCE = 1e-3   # fp32, no TF32: padding changes summation order only (7e-7 in the CPU twin)
OPTIONS = ("--precision", "fp32", "--no-tf32", "--implementation", "reference", "--dropout", "0", "--lr", "1e-4",
           "--max-steps", str(STEPS), "--log-every", "4", "--tasks", "sst,quora,sts", "--max-length", "64")


def weights(run) -> dict:
    return {name: p.detach().float().cpu().clone() for name, p in run.model.named_parameters()}


def update_gap(start: dict, reference: dict, other: dict) -> float:
    """|other - reference| / |reference - start| over every parameter: 0 when both runs end alike, 1 when `other`
    never moved from `start`."""
    apart = sum(float((other[k] - reference[k]).pow(2).sum()) for k in start)
    moved = sum(float((reference[k] - start[k]).pow(2).sum()) for k in start)
    return (apart / moved) ** 0.5


def widths_seen(run) -> set:
    """The token widths of the run's first STEPS steps, as its batches are made."""
    return {int(tensors["input_ids"].shape[1]) for step in run.sampler.plan(0)[:STEPS]
            for parts in step_batches(run, step).values() for _, tensors in parts}


def trained(run, skip: int = -1) -> dict:
    """The run's epoch as the loop runs it; `skip`: that step's update left out (the schedule still moves)."""
    if skip >= 0:
        step = run.optimizer.step
        calls = iter(range(STEPS * 4))
        run.optimizer.step = lambda *a, **k: None if next(calls) == skip else step(*a, **k)
    run_epoch(run, NoSignal())
    return weights(run)


def zeroed(run):
    """The run with its learning rate 0 throughout: as if a device learning rate were never filled."""
    for group in run.optimizer.param_groups:
        group["lr"] = 0.0
    run.scheduler.base_lrs = [0.0 for _ in run.scheduler.base_lrs]
    return run


def padded(run):
    """The eager run on the graphed step's padded widths: its batches, not its kernels."""
    run.graphs = StepGraphs(False, widths_up_to(run.inputs.tokenizer.max_length), "test: padded widths, eager")
    return run


@pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")
def test_the_comparison_fails_when_the_rate_is_zeroed_or_a_step_is_skipped(tiny_model, small_data_dir):
    """CPU twin of the gpu test below: the same options, the eager step against itself on padded widths."""
    def fresh(*extra):
        return build(tiny_model, small_data_dir, *OPTIONS, *extra)
    eager = fresh()
    start = weights(eager)
    reference = trained(eager)
    same = padded(fresh())
    assert all(torch.equal(start[k], v) for k, v in weights(same).items()) and len(widths_seen(same)) >= 2
    gap = update_gap(start, reference, trained(same))
    zero = update_gap(start, reference, trained(zeroed(padded(fresh()))))
    skipped = update_gap(start, reference, trained(padded(fresh()), skip=STEPS // 2))
    print(f"gaps: padded {gap:.1e}, zeroed lr {zero:.2f}, one step skipped {skipped:.3f}")
    assert gap < GAP_TOLERANCE and zero > 100 * GAP_TOLERANCE and skipped > 10 * GAP_TOLERANCE


@pytest.mark.gpu
def test_the_graphed_step_ends_with_the_eager_steps_weights(tiny_model, small_data_dir):
    from torch._dynamo.utils import counters
    argv = (*OPTIONS, "--device", "cuda")
    eager = build(tiny_model, small_data_dir, *argv, "--cuda-graphs", "off")
    graphed = build(tiny_model, small_data_dir, *argv, "--cuda-graphs", "on")
    assert not eager.graphs.graphed and graphed.graphs.graphed and not torch.backends.cuda.matmul.allow_tf32
    assert isinstance(graphed.optimizer.param_groups[0]["lr"], torch.Tensor)
    start = weights(eager)
    assert all(torch.equal(start[k], v) for k, v in weights(graphed).items())
    assert len(widths_seen(graphed)) >= 2
    skips_before = counters["inductor"]["cudagraph_skips"]
    gap = update_gap(start, trained(eager), trained(graphed))
    assert graphed.state.global_step == STEPS
    assert counters["inductor"]["cudagraph_skips"] == skips_before, dict(counters["inductor"])  # no step ran eagerly
    assert gap < GAP_TOLERANCE


@pytest.mark.gpu
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

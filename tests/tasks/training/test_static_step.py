"""What a graphed step needs, checked where the CPU can: batches padded to a few static widths with the results
unchanged at the real tokens, the learning rate as a device tensor with the schedule's values, the graph-safe
step's losses equal to the eager step's, the one decision of --cuda-graphs and its refusals, and the encoder's
fewer kernels (the pooler only when read). The graphed step itself is held to eager in tests/scripts/test_gpu.py."""
import copy
from types import SimpleNamespace

import pytest
import torch

import minbert
import train_multitask
from tasks import training
from tasks.config import TrainConfig
from tasks.data import read_split
from tasks.distributed import SINGLE
from tasks.encoded import bucket_width, encode_split, make_batch
from tasks.heads import MultitaskModel
from tasks.schedules import lr_lambda
from tasks.training.build import make_optimizer
from tasks.training.graphs import StepGraphs, resolve_graphs, widths_up_to
from tasks.training.loop import run_epoch
from tests.helpers import run_cli
from tests.helpers.step import NoSignal, build

WIDTHS = widths_up_to(512)


def test_the_widths_cover_every_length_up_to_the_models_positions():
    assert WIDTHS == (16, 32, 64, 128, 256, 512) and widths_up_to(64) == (16, 32, 64)
    assert widths_up_to(100) == (16, 32, 64, 100)
    assert [bucket_width(n, WIDTHS) for n in (1, 16, 17, 33, 511, 512)] == [16, 16, 32, 64, 512, 512]
    assert bucket_width(40, None) is None


@pytest.mark.parametrize("pair_mode", ["cross", "siamese"])
def test_each_padded_batch_has_a_buckets_width(small_data_dir, tokenizer, pair_mode):
    split = encode_split(read_split(small_data_dir, "quora", "dev"), tokenizer, pair_mode)
    for start in range(0, len(split), 8):
        idx = list(range(start, min(start + 8, len(split))))
        own, padded = make_batch(split, idx, tokenizer, "cpu"), make_batch(split, idx, tokenizer, "cpu", WIDTHS)
        for key in own:
            if key.endswith("input_ids"):
                longest = own[key].shape[1]
                assert padded[key].shape[1] == bucket_width(longest, WIDTHS) >= longest
        for key, t in own.items():  # the same tokens, then masked padding
            if key != "labels":
                width = t.shape[1] if t.ndim == 2 else None
                assert torch.equal(padded[key][:, :width], t) if width else torch.equal(padded[key], t)
        mask_key = "attention_mask" if pair_mode == "cross" else "a_attention_mask"
        assert padded[mask_key][:, own[mask_key].shape[1]:].sum() == 0


@pytest.mark.parametrize("implementation", ["reference", "fast"])
@pytest.mark.parametrize("pooling", ["mean", "pooler"])
def test_masked_outputs_at_a_buckets_width_equal_the_unpadded_ones(pretrained, small_data_dir, tokenizer,
                                                                    implementation, pooling):
    torch.manual_seed(1)
    encoder = minbert.from_pretrained("minilm", implementation=implementation)
    model = MultitaskModel(encoder, ("sst", "quora"), pooling=pooling).eval()
    for task in ("sst", "quora"):
        split = encode_split(read_split(small_data_dir, task, "dev"), tokenizer, "cross")
        idx = list(range(12))
        own, padded = (make_batch(split, idx, tokenizer, "cpu", w) for w in (None, WIDTHS))
        own.pop("labels"), padded.pop("labels")
        assert padded["input_ids"].shape[1] > own["input_ids"].shape[1]
        with torch.no_grad():
            torch.testing.assert_close(model(task, padded), model(task, own), rtol=1e-5, atol=1e-5)
            width = own["input_ids"].shape[1]
            a, b = encoder(**padded).last_hidden_state[:, :width], encoder(**own).last_hidden_state
            real = own["attention_mask"].bool()
            torch.testing.assert_close(a[real], b[real], rtol=1e-5, atol=1e-5)


def test_the_pooler_runs_only_when_a_head_reads_it(pretrained, small_data_dir, tokenizer):
    split = encode_split(read_split(small_data_dir, "sst", "dev"), tokenizer, "cross")
    batch = make_batch(split, [0, 1, 2], tokenizer, "cpu")
    batch.pop("labels")
    for pooling, calls in (("mean", 0), ("pooler", 1), ("cls-token", 0)):
        model = MultitaskModel(copy.deepcopy(pretrained), ("sst",), pooling=pooling).eval()
        seen = []
        model.encoder.pooler.register_forward_hook(lambda *args: seen.append(1))
        with torch.no_grad():
            model("sst", batch)
        assert len(seen) == calls, pooling
    assert pretrained(**batch, pool=False).pooler_output is None


def test_a_device_learning_rate_follows_the_float_schedule():
    """The graphed step's optimizer (fused, capturable, lr a tensor the schedule fills in place) takes the
    steps the float one takes."""
    config = TrainConfig(lr=1e-3)
    results = []
    for graphs in (StepGraphs(), StepGraphs(True, WIDTHS, "test")):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
        optimizer = make_optimizer(config, model, graphs)
        lr = optimizer.param_groups[0]["lr"]
        assert isinstance(lr, torch.Tensor) == graphs.graphed
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(10, 0.3, "linear"))
        lrs = []
        for step in range(6):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step))
            model(x).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            lrs.append(float(optimizer.param_groups[0]["lr"]))
        assert optimizer.param_groups[0]["lr"] is lr or not graphs.graphed  # filled in place, never replaced
        results.append((lrs, [p.detach().clone() for p in model.parameters()]))
    (float_lrs, float_params), (tensor_lrs, tensor_params) = results
    assert tensor_lrs == pytest.approx(float_lrs, rel=1e-6)
    for a, b in zip(float_params, tensor_params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def graph_safe(run):
    """`run` switched to the graphed step's code path, without the capture itself (CUDA's): static widths, the
    device learning rate and capturable AdamW, the logged values copied out of the step."""
    run.graphs = StepGraphs(True, widths_up_to(run.inputs.tokenizer.max_length), "test")
    run.optimizer = make_optimizer(run.config, run.model, run.graphs)
    run.scheduler = torch.optim.lr_scheduler.LambdaLR(
        run.optimizer, lr_lambda(run.total_steps, run.config.warmup, run.config.lr_schedule))
    return run


def test_the_graph_safe_step_trains_as_the_eager_one(tiny_model, small_data_dir):
    argv = ("--max-steps", "4", "--log-every", "2", "--precision", "fp32", "--implementation", "reference",
            "--dropout", "0", "--max-length", "64")
    losses = []
    for switch in (lambda run: run, graph_safe):
        run = switch(build(tiny_model, small_data_dir, *argv))
        if run.graphs.graphed:  # the steps' batches are wider than their longest: the padding is what is tested
            extra = [run.job.make_batch(run, task, indices)["input_ids"].shape[1] - max(
                run.train[task].lengths[i] for i in indices) for step in run.sampler.plan(0)[:4]
                for task, indices in step.items()]
            assert max(extra) > 0 and min(extra) >= 0
        seen = {}
        probe = type("Probe", (training.Callback,), {"on_losses": lambda self, r, step, values: seen.update(
            {(step, k): v for k, v in values.items() if k.startswith("train/loss")})})
        run.callbacks.append(probe())
        run_epoch(run, NoSignal())
        assert run.state.global_step == 4
        losses.append(seen)
    eager, safe = losses
    assert eager.keys() == safe.keys() and len(eager) >= 4
    assert safe == pytest.approx(eager, rel=1e-4, abs=1e-6)


def inputs_on(device: str, implementation: str = "reference", world=SINGLE):
    return SimpleNamespace(device=torch.device(device), world=world, tokenizer=SimpleNamespace(max_length=128),
                           encoder=SimpleNamespace(config=SimpleNamespace(implementation=implementation)))


def test_cuda_graphs_are_decided_in_one_place():
    config = TrainConfig()
    for device in ("cpu", "cuda"):  # auto: the eager step until a GPU measures the graphed one faster
        assert not resolve_graphs(config, inputs_on(device)).graphed
        assert not resolve_graphs(TrainConfig(cuda_graphs="off"), inputs_on(device)).graphed
    on = TrainConfig(cuda_graphs="on")
    graphs = resolve_graphs(on, inputs_on("cuda"))
    assert graphs.graphed and graphs.widths == (16, 32, 64, 128)
    with pytest.raises(minbert.UserError, match="needs a CUDA GPU"):
        resolve_graphs(on, inputs_on("cpu"))
    refusals = {"--smart": TrainConfig(cuda_graphs="on", smart=True),
                "--surgery": TrainConfig(cuda_graphs="on", surgery="pcgrad"),
                "--compile": TrainConfig(cuda_graphs="on", compile=True),
                "--optimizer torch": TrainConfig(cuda_graphs="on", optimizer="minbert")}
    for flag, config in refusals.items():
        with pytest.raises(minbert.UserError, match=flag):
            resolve_graphs(config, inputs_on("cuda"))
    with pytest.raises(minbert.UserError, match="--implementation reference"):
        resolve_graphs(on, inputs_on("cuda", "fast"))
    with pytest.raises(minbert.UserError, match="torchrun"):
        resolve_graphs(on, inputs_on("cuda", world=SimpleNamespace(active=True)))


def test_cuda_graphs_on_is_refused_in_one_line_on_the_cpu(tiny_model, small_data_dir, tmp_path):
    code, out, err = run_cli(train_multitask.main, [
        "--model", str(tiny_model), "--data-dir", str(small_data_dir), "--device", "cpu", "--tasks", "sst",
        "--max-steps", "1", "--cuda-graphs", "on", "--out", str(tmp_path / "run")])
    assert code == 2
    assert err.strip().splitlines()[-1].endswith("use --cuda-graphs auto or off")
    assert "Traceback" not in err


def test_a_resume_keeps_the_learning_rate_kind_of_the_resuming_run():
    """A checkpoint of an eager run resumed graphed, and the other way round: the values the schedule had, in the
    kind (float or device tensor) the resuming run's step uses."""
    from tasks.training.graphs import settle_lr
    config = TrainConfig(lr=1e-3)
    eager, graphed = StepGraphs(), StepGraphs(True, WIDTHS, "test")

    def built(graphs):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        optimizer = make_optimizer(config, model, graphs)
        return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(10, 0.3, "linear"))
    for saved, resumed in ((eager, graphed), (graphed, eager)):
        model, optimizer, scheduler = built(saved)
        for _ in range(3):
            model(torch.ones(1, 4)).sum().backward()
            optimizer.step()
            scheduler.step()
        expected = float(optimizer.param_groups[0]["lr"])
        model, optimizer2, scheduler2 = built(resumed)
        optimizer2.load_state_dict(copy.deepcopy(optimizer.state_dict()))
        scheduler2.load_state_dict(copy.deepcopy(scheduler.state_dict()))
        settle_lr(optimizer2, scheduler2, resumed, torch.device("cpu"))
        for group in optimizer2.param_groups:
            assert isinstance(group["lr"], torch.Tensor) == resumed.graphed
            assert float(group["lr"]) == pytest.approx(expected, rel=1e-6)
        model(torch.ones(1, 4)).sum().backward()
        optimizer2.step()
        scheduler2.step()
        assert isinstance(optimizer2.param_groups[0]["lr"], torch.Tensor) == resumed.graphed
        assert float(optimizer2.param_groups[0]["lr"]) == pytest.approx(1e-3 * lr_lambda(10, 0.3, "linear")(4),
                                                                          rel=1e-6)


@pytest.mark.parametrize("pair_mode", ["cross", "siamese"])
def test_each_tasks_loss_traces_as_one_graph(tiny_model, small_data_dir, monkeypatch, pair_mode):
    """What --cuda-graphs on compiles, traced by dynamo (no compiler needed): one graph per task, no break,
    so nothing in the loss reads the host. On CUDA the reference builds its mask unread; the CPU's read of it
    (`_unpadded_on_the_cpu`) is what a CPU run does instead, patched out as test_step does."""
    import torch._dynamo

    import minbert.model
    monkeypatch.setattr(minbert.model, "_unpadded_on_the_cpu", lambda mask: False)
    run = build(tiny_model, small_data_dir, "--implementation", "reference", "--precision", "bf16",
                "--tasks", "sst,quora,sts", "--pair-mode", pair_mode)
    run.graphs = StepGraphs(True, widths_up_to(run.inputs.tokenizer.max_length), "test")
    torch._dynamo.reset()
    try:
        for task in ("sst", "quora", "sts"):
            batch = run.job.make_batch(run, task, [0, 1, 2, 3])
            explained = torch._dynamo.explain(run.loss_fn)(task, batch, 1.0)
            assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    finally:
        torch._dynamo.reset()


def test_the_loss_is_compiled_only_for_a_graphed_step(monkeypatch):
    import torch._dynamo

    from tasks.training.graphs import graphed_loss
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 8)
    module = torch.nn.Linear(2, 2)
    assert graphed_loss(module, StepGraphs()) is module and torch._dynamo.config.recompile_limit == 8
    compiled = graphed_loss(module, StepGraphs(True, WIDTHS, "test"))  # compiled at its first call, on CUDA
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule) and compiled._orig_mod is module
    assert torch._dynamo.config.recompile_limit >= 3 * len(WIDTHS) * 2  # the course's tasks, a short last batch

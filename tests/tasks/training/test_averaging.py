"""--average (EMA and SWA copies of the weights) and --per-task-best (each task's predictions from its best
evaluation), on the tiny 2-layer model of test_reliability and the small data: the averages against hand
computations from the trained weights of each step, the trained trajectory unchanged by them, kill and resume
bit for bit, each task's choice against a scripted sequence of dev metrics, and the refusals."""
import copy
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import ablate
import minbert
import train_multitask
from minbert import UserError
from tasks import training
from tasks.ablation import sweep
from tasks.config import TrainConfig, with_environment
from tasks.course.provenance import run_problems, run_provenance
from tasks.evaluation import write_all_predictions
from tasks.inputs import prepare
from tasks.metrics import overall_score
from tasks.training.averaging import Averages, early_weights_warning
from tasks.training.build import MultitaskJob
from tests.helpers import run_cli
from tests.helpers.runs import assert_same, assert_same_run, run


@pytest.fixture(scope="module")
def base(tiny_model, small_data_dir):
    return ["--model", str(tiny_model), "--batch-size", "8", "--eval-batch-size", "64", "--precision", "fp32",
            "--data-dir", str(small_data_dir), "--device", "cpu"]


def trainable(model) -> dict:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


class Steps(training.Callback):
    """The trained weights after every step, and the model's weights at every evaluation (the run's model copy)."""

    def __init__(self):
        self.after, self.evaluated = {}, {}

    def on_step(self, run, info):
        self.after[run.state.global_step] = trainable(run.model)

    def on_evaluate(self, run, metrics, seconds):
        self.evaluated[run.state.global_step] = copy.deepcopy(run.model.state_dict())


def train(argv, callbacks=()):
    code = training.train_command(argv, callbacks=callbacks)
    assert code == 0
    folder = Path(argv[argv.index("--out") + 1])
    return folder, json.loads((folder / "metrics.json").read_text())


def averages_in(folder: Path, kind: str) -> dict:
    saved = torch.load(folder / "checkpoint.pt", weights_only=True)["averages"][kind]
    return {key[len("module."):].replace("/", "."): value for key, value in saved.items() if key != "n_averaged"}


AVERAGED = ["--max-steps", "6", "--eval-every", "2", "--ema-decay", "0.5", "--swa-start", "0.5"]


def assert_summary_of_copies(metrics: dict) -> None:
    """metrics.json of an `--average ema,none,swa` run (decay 0.5, SWA from step 3): each copy per evaluation
    and the summary, the run's model (ema) first."""
    summary = metrics["averages"]
    assert summary["model"] == "ema" and summary["ema_decay"] == 0.5 and summary["swa_start_step"] == 3
    assert list(summary["copies"]) == ["ema", "none", "swa"]
    for entry in metrics["history"]:
        assert list(entry["copies"]) == ["ema", "none", "swa"] and entry["copies"]["ema"]["dev"] == entry["dev"]
        assert entry["copies"]["ema"]["averaged_steps"] == entry["step"]
        assert entry["copies"]["swa"]["averaged_steps"] == max(0, entry["step"] - 3)
    assert metrics["history"][0]["copies"]["swa"]["dev"] == metrics["history"][0]["copies"]["none"]["dev"]
    assert summary["copies"]["none"]["final"] == metrics["history"][-1]["copies"]["none"]["dev"]
    assert summary["copies"]["ema"]["final"] == metrics["final"]


def test_ema_and_swa_are_the_hand_averages_and_the_trajectory_is_unchanged(base, tmp_path):
    steps = Steps()
    folder, metrics = train(base + AVERAGED + ["--average", "ema,none,swa", "--out", str(tmp_path / "avg")], [steps])
    w = {step: {k: v.double() for k, v in weights.items()} for step, weights in steps.after.items()}
    ema = {1: w[1]}  # the first update copies, each later one moves (1 - decay) of the way to the new weights
    for step in range(2, 7):
        ema[step] = {k: 0.5 * ema[step - 1][k] + 0.5 * w[step][k] for k in w[step]}
    swa = {k: sum(w[s][k] for s in (4, 5, 6)) / 3 for k in w[6]}  # after step round(0.5 * 6) = 3: steps 4-6
    for kind, expected in (("ema", ema[6]), ("swa", swa)):
        saved = averages_in(folder, kind)
        assert saved.keys() == expected.keys()
        for k in expected:
            torch.testing.assert_close(saved[k].double(), expected[k], rtol=1e-5, atol=1e-6)
    # the run's model is the EMA copy: what it evaluated at each step, and best.pt, are the EMA weights then
    for step in (2, 4, 6):
        for k in w[step]:
            torch.testing.assert_close(steps.evaluated[step][k].double(), ema[step][k], rtol=1e-5, atol=1e-6)
    best = torch.load(folder / "best.pt", weights_only=True)["model"]
    assert_same(best, steps.evaluated[metrics["best_step"]])
    assert_summary_of_copies(metrics)
    # the same run without averages trains the same weights, bit for bit
    plain = Steps()
    other, _ = train(base + AVERAGED[:4] + ["--average", "none", "--out", str(tmp_path / "plain")], [plain])
    assert_same(plain.after, steps.after)
    a, b = (torch.load(f / "checkpoint.pt", weights_only=True) for f in (folder, other))
    assert_same(a["model"], b["model"])
    assert_same(a["optimizer"], b["optimizer"])
    assert "averages" not in b and "copies" not in json.loads((other / "metrics.json").read_text())["history"][0]
    record = json.loads((folder / "config.json").read_text())["arguments"]
    assert (record["average"], record["ema_decay"], record["swa_start"]) == ("ema,none,swa", 0.5, 0.5)


@pytest.mark.parametrize("implementation", ["fast", "reference"])
def test_an_averaged_copy_is_evaluated_with_its_own_weights_not_stale_casts(pretrained, tokenizer, implementation):
    """bf16 evaluation on the fast path keeps cast weights between evaluations: putting a copy's weights in the
    model and taking them out again must be seen by it."""
    # The embedded model's first two layers: the casts are kept per layer; six would cost three times as much.
    config = dataclasses.replace(pretrained.config, implementation=implementation, num_hidden_layers=2)
    model = minbert.build_model(config)
    model.load_state_dict({k: v for k, v in pretrained.state_dict().items()
                           if not k.startswith("encoder.layer.") or int(k.split(".")[2]) < 2})
    model.eval()
    batch = tokenizer.collate(tokenizer.encode(["a short one", "a longer sentence about a film and its actors"]))

    def hidden(m):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return m(**batch).last_hidden_state

    never_run = copy.deepcopy(model)   # no casts cached yet: each copy of it is a fresh model, built once

    def fresh(weights):
        other = copy.deepcopy(never_run)
        other.load_state_dict(weights)
        return hidden(other)

    averages = Averages(model, ("none", "ema"), 0.5, 0)
    hidden(model)  # casts cached
    averages.update(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    averages.update(2)
    trained = copy.deepcopy(model.state_dict())
    assert torch.equal(hidden(model), fresh(trained))
    with averages.loaded("ema"):
        averaged = copy.deepcopy(model.state_dict())
        assert torch.equal(hidden(model), fresh(averaged))
    assert not torch.equal(fresh(averaged), fresh(trained))
    assert torch.equal(hidden(model), fresh(trained))
    assert_same(model.state_dict(), trained)  # put back bit for bit


PER_TASK = ["--batch-size", "16", "--max-steps", "12", "--eval-every", "4", "--checkpoint-every", "2"]


def test_killed_with_averages_and_task_bests_resumes_bitwise(base, tmp_path):
    argv = base + PER_TASK + ["--average", "swa,ema", "--swa-start", "0.25", "--per-task-best"]
    code, _, err = run(tmp_path, "none", 0, argv + ["--out", str(tmp_path / "reference")])
    assert code == 0, err
    out = tmp_path / "killed"
    code, _, err = run(tmp_path, "kill-after-save", 6, argv + ["--out", str(out)])
    assert code == -9, err
    code, _, err = run(tmp_path, "none", 0, ["--resume", str(out)])
    assert code == 0, err
    assert_same_run(tmp_path / "reference", out)  # the checkpoint's averages included
    for task in ("sst", "quora", "sts"):
        assert_same(*(torch.load(d / f"best-{task}.pt", weights_only=True) for d in (tmp_path / "reference", out)))
    assert set(json.loads((out / "metrics.json").read_text())["per_task_best"]["tasks"]) == {"sst", "quora", "sts"}


# Each task's dev metric at the evaluations of steps 2, 4, 6, 8: sst best at 4, quora at 6, sts at 2 (tied at 4:
# the first counts); overall best at 6.
SCRIPT = {"sst": [0.1, 0.5, 0.3, 0.2], "quora": [0.4, 0.2, 0.6, 0.1], "sts": [0.3, 0.3, 0.1, 0.2]}


def test_each_task_predictions_come_from_its_best_evaluation(base, tmp_path, monkeypatch):
    files = tmp_path / "at-step"
    real = MultitaskJob.evaluate

    def scripted(self, run, show):
        metrics, predictions = real(self, run, show)
        step = run.state.global_step
        write_all_predictions(run.model, run.inputs, files / str(step), run.config)  # every task's files, now
        metrics = {task: SCRIPT[task][step // 2 - 1] for task in SCRIPT}
        return {**metrics, "overall": overall_score(metrics), "overall_raw": 0.0}, predictions

    monkeypatch.setattr(MultitaskJob, "evaluate", scripted)
    steps = Steps()
    folder, metrics = train(base + ["--max-steps", "8", "--eval-every", "2", "--per-task-best", "--average",
                                    "none",
                                    "--out", str(tmp_path / "run")], [steps])
    chosen = {task: choice["step"] for task, choice in metrics["per_task_best"]["tasks"].items()}
    assert chosen == {"sst": 4, "quora": 6, "sts": 2} and metrics["best_step"] == 6
    assert metrics["per_task_best"]["tasks"]["sst"] == {"epoch": 1, "step": 4, "dev": 0.5}
    assert metrics["per_task_best"]["overall"] == pytest.approx(overall_score({"sst": 0.5, "quora": 0.6, "sts": 0.3}))
    for task, step in chosen.items():
        assert_same(torch.load(folder / f"best-{task}.pt", weights_only=True)["model"], steps.evaluated[step])
    assert_same(torch.load(folder / "best.pt", weights_only=True)["model"], steps.evaluated[6])
    written = sorted(p.name for p in (folder / "predictions").glob("*.csv"))
    assert written == sorted(p.name for p in (files / "2").glob("*.csv"))
    prefix = {"sst": "sst-", "quora": "para-", "sts": "sts-"}
    for name in written:
        task = next(t for t, p in prefix.items() if name.startswith(p))
        assert (folder / "predictions" / name).read_bytes() == (files / str(chosen[task]) / name).read_bytes(), name
    assert (files / "2" / "sst-dev-output.csv").read_bytes() != (files / "4" / "sst-dev-output.csv").read_bytes()
    # the hand-in's record of the run: the dev figure of the files it wrote, and no new refusal
    record = run_provenance(folder)
    assert record["dev"] == metrics["per_task_best"]["overall"] and record["steps"] == 8
    assert {kind for kind, _ in run_problems(record)} == {"smoke", "other-model"}


def test_the_training_commands_model_is_ema_and_a_run_from_before_average_resumes_as_trained(tmp_path):
    """train_multitask.py's default copy is EMA (measured above zero over paired seeds); ablate.py keeps the
    trained weights its sweeps record; a run recorded before --average existed resumes with the trained
    weights as its model, not with today's default."""
    assert training.parse_train_command(["--out", str(tmp_path / "r")]).config.average == "ema"
    assert ablate.parse_args(["--mode", "reinit"]).training.average == "none"
    record = tmp_path / "config.json"
    record.write_text(json.dumps({"arguments": {"seed": 3, "pooling": "cls"}}))
    resumed, _ = training.recorded_arguments(training.train_parser(), record)
    assert (resumed.average, resumed.seed, resumed.pooling) == ("none", 3, "pooler")


def test_a_run_too_short_for_its_ema_says_how_much_of_its_first_weights_it_keeps(base, tmp_path):
    assert "37% of the first step's weights" in early_weights_warning(("ema",), 0.995, 200)
    assert early_weights_warning(("ema", "none"), 0.995, 1924) is None        # 0.995^1923: 7e-5 left
    assert early_weights_warning(("none", "ema"), 0.995, 200) is None         # EMA evaluated, not the model
    assert early_weights_warning(("ema",), 0.995, 1) is None                  # one update copies the weights
    code, _, err = run_cli(train_multitask.main, base + ["--max-steps", "3", "--out", str(tmp_path / "r")])
    assert code == 0, err
    assert "warning: the run's model is the EMA copy (--average ema) at --ema-decay 0.995" in err
    assert "3 planned steps leave 99% of the first step's weights in it" in err


@pytest.mark.parametrize("argv, needle", [
    (["--average", "mean"], "--average: unknown copy 'mean'"),
    (["--average", "ema,ema"], "--average: a copy is named twice"),
    (["--average", "none", "--ema-decay", "0.9"], "--ema-decay applies only with ema in --average"),
    (["--average", "ema", "--swa-start", "0.5"], "--swa-start applies only with swa in --average"),
    (["--average", "ema", "--ema-decay", "1"], "--ema-decay must be in (0, 1)"),
    (["--average", "swa", "--swa-start", "1"], "--swa-start must be in [0, 1)"),
    (["--per-task-best", "--tasks", "sst"], "--per-task-best needs at least two tasks"),
])
def test_options_that_cannot_apply_are_one_line_exit_2(base, tmp_path, argv, needle):
    code, _, err = run_cli(train_multitask.main, base + argv + ["--out", str(tmp_path / "r")])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_per_task_best_is_refused_for_runs_kept_in_memory(base, small_data_dir, tmp_path, tiny_model):
    code, _, err = run_cli(ablate.main, ["--mode", "reinit", "--data-dir", str(small_data_dir), "--model",
                                         str(tiny_model), "--per-task-best", "--out", str(tmp_path / "sweep")])
    assert code == 2 and "--per-task-best" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "sweep").exists()


def test_a_trial_kept_in_memory_averages_and_refuses_task_bests(tiny_model, small_data_dir):
    config = with_environment(TrainConfig(model=str(tiny_model), data_dir=str(small_data_dir), batch_size=8,
                                          precision="fp32", device="cpu", max_steps=4, eval_every=2,
                                          average="ema,none", ema_decay=0.5))
    inputs = prepare(config)
    steps = Steps()
    result = training.fit(config, inputs, training.InMemory(), callbacks=[steps])
    assert_same(result["model"].state_dict(), steps.evaluated[result["best_step"]])  # the best EMA weights
    assert list(result["averages"]["copies"]) == ["ema", "none"]
    with pytest.raises(UserError, match="--per-task-best .* needs a run folder"):
        training.fit(dataclasses.replace(config, per_task_best=True), inputs, training.InMemory())


def test_a_sweep_that_averages_is_fingerprinted_apart(small_data_dir):
    args = ablate.parse_args(["--mode", "reinit", "--data-dir", str(small_data_dir)])
    record = {"sst": {"train": {"path": "/a/sst.csv", "sha256": "x", "n_rows": 40}, "test": None}}
    inputs = SimpleNamespace(encoder=SimpleNamespace(source=None), data_record=record, device="cpu",
                             precision="fp32", precision_requested="auto")
    averaged = args.replace(training=dataclasses.replace(args.training, average="ema"))
    assert sweep.fingerprint(averaged, inputs) != sweep.fingerprint(args, inputs)


def test_two_processes_keep_the_averages_and_task_bests_of_one(base, tmp_path):
    from tests.helpers.runs import WEIGHT_TOLERANCE, torchrun
    argv = base + ["--batch-size", "7", "--max-steps", "6", "--dropout", "0", "--eval-every", "2",
                   "--average", "ema,swa", "--swa-start", "0.5", "--per-task-best"]
    code, _, err = run_cli(train_multitask.main, argv + ["--out", str(tmp_path / "one")])
    assert code == 0, err
    code, out, err = torchrun(tmp_path, argv + ["--out", str(tmp_path / "two")])
    assert code == 0, err
    for kind in ("ema", "swa"):
        one, two = (averages_in(tmp_path / r, kind) for r in ("one", "two"))
        assert one.keys() == two.keys()
        assert max((one[k] - two[k]).abs().max().item() for k in one) < WEIGHT_TOLERANCE
    m1, m2 = (json.loads((tmp_path / r / "metrics.json").read_text()) for r in ("one", "two"))
    assert m1["averages"]["swa_start_step"] == m2["averages"]["swa_start_step"] == 3
    assert m1["per_task_best"]["tasks"].keys() == m2["per_task_best"]["tasks"].keys() == {"sst", "quora", "sts"}
    assert sorted(p.name for p in (tmp_path / "two").glob("best*.pt")) == \
        ["best-quora.pt", "best-sst.pt", "best-sts.pt", "best.pt"]
    assert {p.name for p in (tmp_path / "two" / "predictions").glob("*.csv")} == \
        {p.name for p in (tmp_path / "one" / "predictions").glob("*.csv")}
    assert out.count("best dev") == 1  # rank 0 alone reports


def _averages_over_steps(model, update, steps=4):
    """Averages("ema", "swa") of `model`, updated by `update` after each of `steps` random moves of its
    weights."""
    averages = Averages(model, ("ema", "swa"), 0.9, 1)
    for step in range(1, steps + 1):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        update(averages, step)
    return averages


def test_the_averages_update_is_torchs_update_parameters_bit_for_bit():
    """`averaging._update` against AveragedModel.update_parameters, which it replaces (torch's copies the step
    counter to the device each step): the same EMA and SWA weights and step counters."""
    def torchs(averages, step):
        for kind, average in averages.copies.items():
            if kind == "ema" or step > averages.swa_start_step:
                average.update_parameters(averages.trainable)

    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.LayerNorm(3))
    torch.manual_seed(1)
    ours = _averages_over_steps(copy.deepcopy(model), Averages.update)
    torch.manual_seed(1)
    theirs = _averages_over_steps(copy.deepcopy(model), torchs)
    for kind in ("ema", "swa"):
        assert ours.averaged_steps(kind) == theirs.averaged_steps(kind) == (4 if kind == "ema" else 3)
        assert_same(ours.copies[kind].state_dict(), theirs.copies[kind].state_dict())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_averages_update_on_cuda_reads_nothing_to_the_host():
    """An averages update runs after every step: under CUDA's sync debug mode it makes no synchronising
    call."""
    model = torch.nn.Linear(64, 64).cuda()
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        _averages_over_steps(model, Averages.update)
    finally:
        torch.cuda.set_sync_debug_mode(before)

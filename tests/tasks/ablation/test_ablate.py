"""ablate.py on small real-format data: leaves, resuming, failures, probes, dynamics, transfer, shards, bad input."""
import copy
import csv
import dataclasses
import json
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

import ablate
import minbert
from minbert import UserError
from tasks.ablation import arguments, line, sweep
from tasks.ablation.config import SweepConfig, from_settings
from tasks.ablation.plateau import PlateauRule
from tasks.ablation.studies import STUDIES, dynamics, permute
from tasks.ablation.study import fingerprinted, planned
from tasks.inputs import prepare
from tests.helpers import run_cli

# --workers 1: these tests patch the trainer in this process and read the results in plan order
# (worker processes: tests/tasks/ablation/test_workers.py)
BASE = ["--model", "minilm", "--batch-size", "8", "--max-steps", "2", "--precision", "fp32",
        "--eval-batch-size", "64", "--workers", "1", "--device", "cpu"]


def _argv(data_dir, out, *extra):
    return ["--data-dir", str(data_dir), "--out", str(out), *BASE, *extra]


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]  # every line must parse


@pytest.fixture(scope="module")
def reinit_sweep(small_data_dir, tmp_path_factory):
    """A finished reinit sweep (layers >= 5 re-drawn against the unmodified model, two seeds): its folder and
    what it printed."""
    out = tmp_path_factory.mktemp("reinit") / "sweep"
    code, stdout, err = run_cli(ablate.main, _argv(small_data_dir, out, "--mode", "reinit", "--task", "sst",
                                                    "--from-layer", "5,6", "--seeds", "0,1"))
    assert code == 0, err
    return out, stdout


def test_a_reinit_sweep_records_every_trial(reinit_sweep):
    out, stdout = reinit_sweep
    records = _lines(out / "results.jsonl")
    assert sorted((r["config"], r["seed"]) for r in records) == [("from=5", 0), ("from=5", 1),
                                                                 ("from=6", 0), ("from=6", 1)]
    assert all(r["status"] == "ok" and r["steps"] == 2 and 0 <= r["dev"]["sst"] <= 1 for r in records)
    assert all(r["precision"] == "fp32" and r["device"] == "cpu" for r in records)
    assert "[4/4]" in stdout


def test_a_reinit_sweeps_summary_gives_final_and_best_and_the_paired_change(reinit_sweep):
    out, _ = reinit_sweep
    records = _lines(out / "results.jsonl")
    summary = (out / "summary.csv").read_text().splitlines()
    assert summary[0] == ("mode,config,data_fraction,metric,n,mean,std,ci95_low,ci95_high,best_mean,best_ci95_low,"
                          "best_ci95_high,reference,change_n,change_mean,change_ci95_low,change_ci95_high")
    row = next(line.split(",") for line in summary if line.startswith("reinit,from=5,1.0,dev/sst,"))
    assert row[4] == "2" and float(row[7]) <= float(row[5]) <= float(row[8])
    final = {r["seed"]: r["dev"]["sst"] for r in records if r["config"] == "from=5"}
    best = {r["seed"]: r["dev_best"]["sst"] for r in records if r["config"] == "from=5"}
    assert float(row[5]) == pytest.approx(sum(final.values()) / 2, abs=1e-6)  # the result: the final evaluation
    assert float(row[9]) == pytest.approx(sum(best.values()) / 2, abs=1e-6)   # the best one beside it
    unmodified = {r["seed"]: r["dev"]["sst"] for r in records if r["config"] == "from=6"}
    assert row[12] == "from=6" and row[13] == "2"
    assert float(row[14]) == pytest.approx(sum(final[s] - unmodified[s] for s in (0, 1)) / 2, abs=1e-6)


def test_a_reinit_sweep_draws_its_plot_and_logs_each_trial_to_tensorboard(reinit_sweep):
    out, _ = reinit_sweep
    assert (out / "plots" / "reinit_layers.png").read_bytes().startswith(b"\x89PNG")
    runs = {p.name for p in (out / "tensorboard").iterdir()}
    assert {"reinit-from=5-seed0-frac1", "reinit-from=6-seed1-frac1", "summary"} <= runs
    assert list((out / "tensorboard" / "reinit-from=5-seed1-frac1").glob("events.out.tfevents.*"))


def test_killed_sweep_resumes_and_failed_trials_are_retried(small_data_dir, tmp_path, monkeypatch):
    out = tmp_path / "resume"
    argv = _argv(small_data_dir, out, "--mode", "reinit", "--task", "sst", "--from-layer", "5,6")
    real_fit = sweep.fit

    def flaky_fit(args, inputs, out_dir, encoder=None, **kwargs):
        if "from=5" in str(out_dir):
            raise RuntimeError("simulated crash")
        return real_fit(args, inputs, out_dir, encoder=encoder, **kwargs)

    monkeypatch.setattr(sweep, "fit", flaky_fit)
    code, _, err = run_cli(ablate.main, argv)
    assert code == 1 and "1 of 2 trials failed" in err
    failed = [r for r in _lines(out / "results.jsonl") if r["status"] == "failed"]
    assert [r["config"] for r in failed] == ["from=5"] and "simulated crash" in failed[0]["error"]

    monkeypatch.setattr(sweep, "fit", real_fit)
    code, stdout, err = run_cli(ablate.main, argv)  # retries the failed trial only
    assert code == 0, err
    assert "2 trials, 1 already" in stdout
    assert [(r["config"], r["status"]) for r in _lines(out / "results.jsonl")] == \
        [("from=6", "ok"), ("from=5", "failed"), ("from=5", "ok")]

    # A kill in the middle of writing the last line: it is cut to half and that trial reruns.
    text = (out / "results.jsonl").read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    (out / "results.jsonl").write_text(text[:len(text) - len(last) // 2 - 1])
    code, stdout, err = run_cli(ablate.main, argv)
    assert code == 0 and "2 trials, 1 already" in stdout, err
    records = _lines(out / "results.jsonl")
    assert [(r["config"], r["status"]) for r in records] == [("from=6", "ok"), ("from=5", "failed"),
                                                             ("from=5", "ok")]

    # A torn line appended after the last trial: nothing reruns and the file is repaired.
    with open(out / "results.jsonl", "a") as f:
        f.write('{"key": "reinit|from=4|se')
    code, stdout, err = run_cli(ablate.main, argv)
    assert code == 0 and "2 trials, 2 already" in stdout, err
    assert len(_lines(out / "results.jsonl")) == 3
    assert "reinit,from=5,1.0,dev/sst,1," in (out / "summary.csv").read_text()


def test_a_resumed_auto_sweep_trains_in_the_precision_its_finished_trials_used(small_data_dir, tmp_path):
    """--precision auto is each machine's fast one: a sweep resumed on a machine whose fast one is another
    keeps its trials' precision, so its arms, paired by seed, never differ by precision."""
    out = tmp_path / "auto"
    argv = [*_argv(small_data_dir, out, "--mode", "reinit", "--task", "sst", "--from-layer", "6"),
            "--precision", "auto"]
    code, _, err = run_cli(ablate.main, [*argv, "--seeds", "0"])
    assert code == 0, err
    here = _lines(out / "results.jsonl")[0]["precision"]
    other = "bf16" if here == "fp32" else "fp32"    # as if the first trial had trained on another machine
    first = {**_lines(out / "results.jsonl")[0], "precision": other}
    (out / "results.jsonl").write_text(json.dumps(first) + "\n")
    code, stdout, err = run_cli(ablate.main, [*argv, "--seeds", "0,1"])
    assert code == 0, err
    assert f"trained in {other}: --precision auto keeps {other} for the rest" in stdout
    assert [(r["seed"], r["precision"]) for r in _lines(out / "results.jsonl")] == [(0, other), (1, other)]
    # a sweep begun beside other sweeps of its experiment that trained in `other` (the reproduction's case)
    config = ablate.parse_args([*argv, "--seeds", "0", "--out", str(tmp_path / "beside")])
    code, records = sweep.run_and_collect(config, frozenset({other}))
    assert code == 0 and [r.precision for r in records] == [other]


def _sweep(small_data_dir, tmp_path, *extra):
    config = ablate.parse_args(_argv(small_data_dir, tmp_path / "sweep", *extra))
    return sweep.Sweep(config, prepare(config.training))


def test_dynamics_of_a_model_with_itself_is_zero(pretrained, tokenizer):
    batch = tokenizer.collate(tokenizer.encode(["a short sentence .", "the film is long , slow and dull",
                                                "what a lovely , warm and funny surprise that was !"] * 8))
    curves = dynamics.compare_encoders(pretrained, pretrained, [batch])
    n = pretrained.num_layers
    assert curves["weight_l2"] == curves["weight_l2_layer"] == curves["weight_l2.output.dense.weight"] == [0.0] * n
    assert curves["attention_js"] == pytest.approx([0.0] * n, abs=1e-9)
    assert len(curves["svcca"]) == n + 1 and max(curves["svcca"]) < 1e-6


def test_dynamics_plots_the_output_sublayer_and_keeps_every_tensor(pretrained, tokenizer):
    """Hand-computed: layer 2's output.dense.weight moves by (3, 4) -> 5, its query weight by 12."""
    batch = tokenizer.collate(tokenizer.encode(["a short sentence .", "the film is long , slow and dull"]))
    moved = copy.deepcopy(pretrained)
    with torch.no_grad():
        moved.encoder.layer[2].output.dense.weight[0, 0] += 3.0
        moved.encoder.layer[2].output.dense.weight[5, 7] += 4.0
        moved.encoder.layer[2].attention.self.query.weight[1, 1] -= 12.0
    curves = dynamics.compare_encoders(pretrained, moved, [batch])
    n = pretrained.num_layers
    assert curves["weight_l2"] == pytest.approx([0, 0, 5.0, 0, 0, 0], abs=1e-5)
    assert curves["weight_l2.attention.self.query.weight"] == pytest.approx([0, 0, 12.0, 0, 0, 0], abs=1e-5)
    assert curves["weight_l2_layer"] == pytest.approx([0, 0, 13.0, 0, 0, 0], abs=1e-5)
    per_tensor = {k for k in curves if k.startswith("weight_l2.")}
    assert len(per_tensor) == 16  # 6 weight matrices, their 6 biases, 2 LayerNorms' weight and bias
    assert all(len(curves[k]) == n for k in per_tensor)


def test_dynamics_compares_the_same_seeded_sample_of_dev_examples(small_data_dir, tmp_path):
    inputs = _sweep(small_data_dir, tmp_path, "--mode", "dynamics", "--task", "sst", "--dynamics-examples", "7").inputs
    dev = inputs.data["sst"]["dev"]

    def sentences(batches):
        return [tuple(ids[mask.bool()].tolist()) for b in batches
                for ids, mask in zip(b["input_ids"], b["attention_mask"])]

    sample = sentences(dynamics.analysis_batches(inputs, 7, batch_size=3))
    assert len(sample) == len(set(sample)) == 7 and sample == sentences(dynamics.analysis_batches(inputs, 7))
    every = sentences(dynamics.analysis_batches(inputs, None))
    assert len(every) == len(dev) == 40 and set(sample) < set(every)
    assert every == sentences(dynamics.analysis_batches(inputs, 100))  # more than the dev set: all of it
    assert ablate.parse_args(_argv(small_data_dir, tmp_path, "--mode", "dynamics", "--dynamics-examples",
                                   "all")).options.dynamics_examples is None


def test_reinit_policy_is_recorded_and_decides_what_is_redrawn(small_data_dir, tmp_path, pretrained):
    options = ["--mode", "reinit", "--task", "sst", "--from-layer", "5", "--reinit-policy", "linear-weights"]
    reinit = _sweep(small_data_dir, tmp_path, *options)
    trials = STUDIES["reinit"].trials(reinit.config, reinit.shape)
    assert [t.label for t in trials] == ["from=6", "from=5"]
    assert all(t.params["policy"] == "linear-weights" for t in trials)  # in every results line's params
    reinit.fit = lambda trial, encoder, **kwargs: {"model": encoder}
    encoder = STUDIES["reinit"].run(reinit, trials[1])["model"]
    before = pretrained.state_dict()
    changed = {k for k, v in encoder.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {f"encoder.layer.5.{name}" for name in (
        "attention.self.query.weight", "attention.self.key.weight", "attention.self.value.weight",
        "attention.output.dense.weight", "intermediate.dense.weight", "output.dense.weight")}
    default = ablate.parse_args(_argv(small_data_dir, tmp_path / "sweep", *options[:-2]))
    assert default.options.reinit_policy == "all"
    assert sweep.Sweep(default, reinit.inputs).fingerprint != reinit.fingerprint


def test_transfer_fills_the_ordered_pair_matrix(small_data_dir, tmp_path):
    out = tmp_path / "transfer"
    code, _, err = run_cli(ablate.main, _argv(small_data_dir, out, "--mode", "transfer", "--tasks", "sst,sts",
                                              "--max-steps", "1"))
    assert code == 0, err
    records = {r["config"]: r for r in _lines(out / "results.jsonl")}
    assert set(records) == {"via=none,final=sst", "via=none,final=sts", "via=sst,final=sts", "via=sts,final=sst",
                            "via=none,final=sst,steps=x2", "via=none,final=sts,steps=x2"}
    assert set(records["via=sst,final=sts"]["dev"]) == {"sts", "overall", "overall_raw"}
    assert set(records["via=sst,final=sts"]["info"]["intermediate_dev"]) == {"sst", "overall", "overall_raw"}
    assert (out / "plots" / "transfer.png").exists()
    assert (out / "tensorboard" / "transfer-intermediate=sst-seed0-frac1").is_dir()


def _plan(*argv):
    config = ablate.parse_args([*argv, *BASE])
    return config.study.trials(config, sweep.Shape(num_layers=6, num_heads=12))


@pytest.mark.parametrize("mode", [["--mode", "reinit", "--heads", "2:*"], ["--mode", "transfer", "--task", "all"]])
def test_shards_partition_the_trials_and_keep_them_when_seeds_are_added(mode):
    trials = _plan(*mode, "--seeds", "0,1", "--data-fractions", "0.1,1")
    names = [t.name for t in trials]
    assert len(set(names)) == len(names)  # one folder per trial: owned by exactly one shard
    shards = [[t.name for t in sweep.shard_trials(trials, (i, 4))] for i in range(1, 5)]
    assert sorted(sum(shards, [])) == sorted(names) and all(shards)
    salted = [[t.name for t in sweep.shard_trials(trials, (i, 4), "quora-top/")] for i in range(1, 5)]
    assert sorted(sum(salted, [])) == sorted(names) and salted != shards   # a partition still, another one
    owner = {name: i for i, shard in enumerate(shards, 1) for name in shard}
    bigger = _plan(*mode, "--seeds", "0,1,2,3", "--data-fractions", "0.1,0.5,1")
    assert {t.name: sweep.shard_of(t, 4) for t in bigger if t.name in owner} == owner
    if mode[1] == "transfer":  # trials that share an intermediate model share its shard, which trains it once
        via = {}
        for t in trials:
            if t.params["via"]:
                via.setdefault((t.params["via"], t.seed, t.fraction), set()).add(owner[t.name])
        assert via and all(len(shards) == 1 for shards in via.values())


def test_plans_do_not_repeat_trials_and_fingerprints_ignore_where_a_sweep_runs():
    assert arguments.int_list("1,01,2") == [1, 2] and arguments.fraction_list("0.1,0.10") == [0.1]
    args = ablate.parse_args(["--mode", "permute", "--trials", "5", "--order", "0,1", *BASE])
    orders = [t.label for t in permute.trials(args, sweep.Shape(num_layers=2, num_heads=1))]
    # the original given again does not use up the only other order; last, the fully re-drawn reference
    assert orders == ["order=0-1", "order=1-0", "reinit=all"]
    args = ablate.parse_args(["--mode", "reinit", *BASE])

    def fingerprint(path, sha, device, requested="auto", used="fp32", graphs="auto"):
        config = args.replace(training=replace(args.training, device=device, precision=requested, cuda_graphs=graphs))
        record = {"sst": {"train": {"path": path, "sha256": sha, "n_rows": 40}, "test": None}}
        inputs = SimpleNamespace(encoder=SimpleNamespace(source=None), data_record=record, device=device,
                                 precision=used, precision_requested=requested)
        return sweep.fingerprint(config, inputs)

    assert fingerprint("/a/sst.csv", "x", "auto") == fingerprint("/nfs/sst.csv", "x", "cuda:1")
    assert fingerprint("/a/sst.csv", "x", "auto") == fingerprint("/a/sst.csv", "x", "cuda", graphs="on")
    assert fingerprint("/a/sst.csv", "x", "auto") != fingerprint("/a/sst.csv", "y", "auto")
    # --precision auto: what it chose on each machine (bf16 on a GPU, fp32 on an old CPU) does not count
    on_gpu = fingerprint("/a/sst.csv", "x", "cuda", used="bf16")
    assert fingerprint("/a/sst.csv", "x", "cpu", used="fp32") == on_gpu
    explicit = fingerprint("/a/sst.csv", "x", "cpu", requested="fp32", used="fp32")
    assert explicit != on_gpu  # an explicit fp32 is another sweep than auto


def _summary(path):
    return sorted((r["config"], r["data_fraction"], r["metric"], r["n"], round(float(r["mean"]), 4))
                  for r in csv.DictReader(path.open()))


def test_two_shards_then_summarize_equal_one_unsharded_sweep(small_data_dir, tiny_model, tmp_path):
    # The 2-layer model: from=1 against the unmodified from=2, two seeds; shard 1 gets 1 trial, shard 2 gets 3
    options = ["--mode", "reinit", "--task", "sst", "--from-layer", "1", "--seeds", "0,1",
               "--model", str(tiny_model)]
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    code, _, err = run_cli(ablate.main, _argv(small_data_dir, whole, *options))
    assert code == 0, err
    code, stdout, err = run_cli(ablate.main, _argv(small_data_dir, sharded, *options, "--shard", "1/2"))
    assert code == 0 and "shard 1/2: 1 of 4 trials" in stdout and "3 missing" in stdout, err
    assert not (sharded / "summary.csv").exists()  # the sweep is not complete yet
    code, stdout, err = run_cli(ablate.main, _argv(small_data_dir, sharded, *options, "--shard", "2/2"))
    assert code == 0 and "4 finished, 0 missing" in stdout, err  # the last shard writes the merged summary
    assert [p.name for p in sweep.results_files(sharded)] == ["results.shard-1-of-2.jsonl",
                                                              "results.shard-2-of-2.jsonl"]
    assert _summary(sharded / "summary.csv") == _summary(whole / "summary.csv")

    # The same trial in two files (a rerun elsewhere) counts once; a failure of a finished trial is not "failed".
    line = json.loads((sharded / "results.shard-1-of-2.jsonl").read_text())
    failed = {**line, "status": "failed", "error": "RuntimeError: earlier crash", "finished_at": "2000-01-01T00:00:00"}
    (sharded / "results.jsonl").write_text(json.dumps(failed) + "\n" + json.dumps(line) + "\n")
    (sharded / "summary.csv").unlink()
    code, stdout, err = run_cli(ablate.main, _argv(small_data_dir, sharded, *options, "--summarize"))
    assert code == 0 and "4 trials: 4 finished, 0 missing, 0 failed" in stdout, err
    assert _summary(sharded / "summary.csv") == _summary(whole / "summary.csv")
    assert (sharded / "plots" / "reinit_layers.png").exists()
    rows = {(r["config"], r["metric"]): r["n"] for r in csv.DictReader((sharded / "summary.csv").open())}
    assert rows[("from=1", "dev/sst")] == rows[("from=2", "dev/sst")] == "2"


@pytest.mark.parametrize("argv,needle", [
    (["--mode", "reinit", "--shard", "0/4"], "--shard"),
    (["--mode", "reinit", "--shard", "5/4"], "--shard"),
    (["--mode", "reinit", "--shard", "a/b"], "--shard"),
    (["--mode", "reinit", "--shard", "2"], "--shard"),
    (["--mode", "reinit", "--summarize", "--shard", "1/2"], "--shard"),
    (["--mode", "prune"], "--mode"),
    (["--mode", "reinit", "--heads", "2:12"], "head 12"),  # needs the model: checked before any trial
    (["--mode", "reinit", "--heads", "2"], "--heads"),
    (["--mode", "reinit", "--block", "4"], "--block"),
    (["--mode", "permute", "--order", "0,1,1,2,3,4"], "not a permutation"),
    (["--mode", "probe", "--block", "1:1"], "--mode reinit"),
    (["--mode", "reinit", "--data-fractions", "0.5,2"], "--data-fractions"),
    (["--mode", "reinit", "--reinit-policy", "biases"], "--reinit-policy"),
    (["--mode", "dynamics", "--dynamics-examples", "0"], "--dynamics-examples"),
])
def test_bad_arguments_exit_2_with_one_line_before_any_trial(small_data_dir, tmp_path, argv, needle):
    out = tmp_path / "bad"
    code, _, err = run_cli(ablate.main, _argv(small_data_dir, out, *argv))
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning:")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err
    assert not out.exists()


@pytest.mark.parametrize("argv,needle", [
    (["--mode", "reinit", "--block", "4:3"], "--block 4:3"),
    (["--mode", "reinit", "--from-layer", "7"], "--from-layer 7"),
    (["--mode", "reinit", "--heads", "6:*"], "--heads 6:*"),
    (["--mode", "permute", "--order", "2,0,1"], "--order"),
    (["--mode", "probe", "--layers", "7"], "--layers 7"),
    (["--mode", "transfer", "--task", "sst"], "two tasks"),
])
def test_plans_reject_layers_and_heads_the_model_lacks(argv, needle):
    with pytest.raises(UserError, match=re.escape(needle)):
        _plan(*argv)


def test_budget_rule_gives_every_data_fraction_the_same_number_of_steps(small_data_dir, data_dir, tmp_path):
    """Every trial trains --trial-steps steps: as many passes over its fraction of the data as that needs."""
    # The defaults on the course's SST (8,544 sentences, batch 32): 3 / 27 / 267 steps a pass at 0.01 / 0.1 / 1.
    args = ablate.parse_args(["--mode", "reinit", "--task", "sst", "--data-dir", str(data_dir), "--model", "minilm",
                              "--device", "cpu"])
    assert (args.trial_steps, args.training.eval_every, args.plateau.patience) == (1000, 50, 3)
    inputs = prepare(args.training)
    for fraction, per_pass, passes in ((0.01, 3, 100), (0.1, 27, 12), (1.0, 267, 2)):
        config, spent = sweep.budget(replace(args.training, data_fraction=fraction), inputs, 300)
        assert spent == {"steps": 300, "epochs": passes, "steps_per_epoch": per_pass, "eval_every": 50}
        assert (config.max_steps, config.epochs) == (300, passes)
        # --trial-steps 0: --epochs passes, so the steps shrink with the fraction (27 steps at 0.1)
        assert sweep.budget(replace(config, epochs=1, max_steps=None), inputs, 0)[1]["steps"] == per_pass
    assert sweep.budget(replace(args.training, max_steps=7), inputs, 300)[1]["steps"] == 7  # --max-steps caps it


def test_a_budgeted_trial_trains_its_steps_and_reports_the_final_evaluation(small_data_dir, tmp_path, tiny_model):
    out = tmp_path / "budget"  # 20 SST rows at fraction 0.5, batch 8: 3 steps a pass, 7 steps = 3 passes
    argv = ["--data-dir", str(small_data_dir), "--out", str(out), "--model", str(tiny_model), "--batch-size", "8",
            "--precision", "fp32", "--mode", "reinit", "--task", "sst", "--from-layer", "2",
            "--data-fractions", "0.5", "--trial-steps", "7", "--eval-every", "3", "--plateau-patience", "0",
            "--device", "cpu"]
    code, _, err = run_cli(ablate.main, argv)
    assert code == 0, err
    [record] = _lines(out / "results.jsonl")
    spent = record["budget"]
    assert record["steps"] == 7 and {k: spent[k] for k in ("steps", "epochs", "steps_per_epoch", "eval_every")} == \
        {"steps": 7, "epochs": 3, "steps_per_epoch": 3, "eval_every": 3}
    assert spent["trained_steps"] == 7 and spent["plateau"] is None and spent["heldout_curve"] == []
    assert record["schema"] == line.SCHEMA
    assert [e["step"] for e in spent["dev_curve"]] == [3, 6, 7]
    assert record["best_step"] in (3, 6, 7) and record["dev_best"]["sst"] >= record["dev"]["sst"]
    code, _, err = run_cli(ablate.main, argv + ["--epochs", "2"])
    assert code == 2 and "--epochs applies with --trial-steps 0" in err


def test_transfer_starts_the_final_stage_from_the_exported_intermediate_model(small_data_dir, tmp_path, monkeypatch,
                                                                            tiny_model):
    out = tmp_path / "transfer"
    started_from = {}
    real_fit = sweep.Sweep.fit

    def watched_fit(self, trial, encoder, name=None, tasks=None, **kwargs):
        started_from[name or trial.label] = ({k: v.clone() for k, v in encoder.state_dict().items()}, encoder.source)
        return real_fit(self, trial, encoder, name=name, tasks=tasks, **kwargs)

    monkeypatch.setattr(sweep.Sweep, "fit", watched_fit)
    argv = _argv(small_data_dir, out, "--mode", "transfer", "--tasks", "sst,sts", "--max-steps", "1", "--export-models",
                 "--model", str(tiny_model))  # a model folder per trial: the tiny model's are 4 MB
    code, _, err = run_cli(ablate.main, argv)
    assert code == 0, err
    folder = next((out / "intermediate").glob("*/transfer-intermediate=sst-seed0-frac1"))
    weights, source = started_from["via=sst,final=sts"]
    assert source.folder == str(folder)  # read back through from_pretrained, as --model RUN_DIR/model is
    exported = minbert.from_pretrained(str(folder)).state_dict()
    assert weights.keys() == exported.keys() and all(torch.equal(weights[k], exported[k]) for k in weights)
    # --export-models: every trial's own model folder, with its heads
    trials = {p.name for p in (out / "models").iterdir()}
    assert trials == {"transfer-via=none_final=sst-seed0-frac1", "transfer-via=none_final=sts-seed0-frac1",
                      "transfer-via=sst_final=sts-seed0-frac1", "transfer-via=sts_final=sst-seed0-frac1",
                      "transfer-via=none_final=sst_steps=x2-seed0-frac1",
                      "transfer-via=none_final=sts_steps=x2-seed0-frac1"}
    described = json.loads((out / "models" / "transfer-via=sst_final=sts-seed0-frac1" / "tasks.json").read_text())
    assert list(described["tasks"]) == ["sts"]

    # Rerun from scratch results: the exported intermediate models are reused, not trained again.
    (out / "results.jsonl").unlink()
    started_from.clear()
    code, _, err = run_cli(ablate.main, argv)
    assert code == 0, err
    assert not [name for name in started_from if name.startswith("transfer-intermediate")]
    assert len(_lines(out / "results.jsonl")) == 6


# ---------------------------------------------------------------------------- the typed sweep config


def test_a_sweep_config_is_validated_once_with_one_line_errors():
    config = ablate.parse_args(["--mode", "reinit", "--task", "sst", *BASE])
    assert isinstance(config, SweepConfig) and config.mode == "reinit" and config.out == "runs/ablate-reinit"
    assert config.seeds == (0,) and config.fractions == (1.0,) and config.options == STUDIES["reinit"].Options()
    for changes, needle in [(dict(seeds=(0, 0)), "twice"), (dict(fractions=(0.0,)), "(0, 1]"),
                            (dict(trial_steps=-1), "--trial-steps"), (dict(shard=(3, 2)), "--shard"),
                            (dict(workers=0), "--workers"), (dict(summarize=True, shard=(1, 2)), "--summarize"),
                            (dict(plateau=PlateauRule(holdout_share=1.5)), "--plateau-holdout"),
                            (dict(options=STUDIES["permute"].Options()), "Options"),
                            (dict(training=replace(config.training, lr=0)), "--lr")]:
        with pytest.raises(UserError, match=re.escape(needle)):
            config.replace(**changes)


def test_a_sweep_config_built_directly_equals_the_one_ablate_parses():
    parsed = ablate.parse_args(["--mode", "reinit", "--task", "sst", "--from-layer", "none,2,all", "--data-fractions",
                                "0.1,0.5", "--seeds", "0,1", "--trial-steps", "600", "--plateau-patience", "0",
                                *BASE])
    settings = {"task": "sst", "from_layer": (None, 2, 0), "data_fractions": (0.1, 0.5), "trial_steps": 600,
                "plateau_patience": 0, "batch_size": 8, "max_steps": 2, "eval_batch_size": 64}
    built = from_settings(STUDIES["reinit"], settings, seeds=(0, 1), workers=1, model="minilm", precision="fp32",
                          device="cpu")
    assert built == parsed
    with pytest.raises(UserError, match="no option"):
        from_settings(STUDIES["reinit"], {"task": "sst", "trials": 3})  # permute's option, not reinit's


def test_every_study_option_is_fingerprinted_unless_it_only_lists_trials_or_draws():
    for name, study in STUDIES.items():
        for f in dataclasses.fields(study.Options):
            declared = f.metadata.get("in_fingerprint", True)
            assert (f.name in fingerprinted(study.Options())) == declared, f"{name}.{f.name}"

    @dataclasses.dataclass(frozen=True)
    class Forgetful:
        layers: tuple = planned()
        examples: int = 500          # declared nothing: in the fingerprint, the safe side

    assert fingerprinted(Forgetful()) == {"examples": 500}
    config = ablate.parse_args(["--mode", "dynamics", "--task", "sst", *BASE])
    inputs = SimpleNamespace(encoder=SimpleNamespace(source=None), data_record={})
    fewer = config.replace(options=dynamics.Options(dynamics_examples=7))
    across = config.replace(options=dynamics.Options(across_tasks=True))
    assert sweep.fingerprint(fewer, inputs) != sweep.fingerprint(config, inputs)   # fingerprinted
    assert sweep.fingerprint(across, inputs) == sweep.fingerprint(config, inputs)  # planned: in the trials' labels

"""ablate.py's plateau budget, its controls (transfer's equal steps, the seed-vs-seed floor, the probe's held-out
score) and the studies added for the papers' missing experiments (head and block pools, restore, methods, dynamics
across tasks), on tiny budgets."""
import json
from types import SimpleNamespace

import pytest
import torch

import ablate
from minbert import UserError
from tasks.ablation import plateau, sweep
from tasks.ablation.statistics import floor_difference
from tasks.ablation.studies import STUDIES
from tasks.ablation.summary import summarise
from tasks.inputs import prepare, subsample_split
from tests.helpers import run_cli
from tests.helpers.lines import trial_line

SMALL = ["--batch-size", "8", "--precision", "fp32", "--eval-batch-size", "64", "--device", "cpu",
         "--workers", "1"]  # in-process: some tests patch the trainer


def _run(data_dir, out, model, *extra):
    argv = ["--data-dir", str(data_dir), "--out", str(out), "--model", str(model), *SMALL, *extra]
    code, stdout, err = run_cli(ablate.main, argv)
    assert code == 0, err
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _plan(*argv, layers=6, heads=12):
    config = ablate.parse_args([*argv, *SMALL])
    return config.study.trials(config, sweep.Shape(num_layers=layers, num_heads=heads))


# ---------------------------------------------------------------------------- the plateau budget


def test_heldout_rows_are_seeded_bounded_and_leave_one_to_train():
    rows = plateau.heldout_indices(200, 0.1, 500, seed=3)
    assert rows == plateau.heldout_indices(200, 0.1, 500, seed=3) and len(rows) == 20 == len(set(rows))
    assert rows != plateau.heldout_indices(200, 0.1, 500, seed=4)
    assert len(plateau.heldout_indices(100_000, 0.1, 500, seed=0)) == 500  # the cap
    assert len(plateau.heldout_indices(3, 0.1, 500, seed=0)) == 1 and plateau.heldout_indices(1, 0.5, 9, 0) == []
    assert len(plateau.heldout_indices(2, 0.9, 500, seed=0)) == 1  # one row is always left to train on


def test_split_heldout_removes_the_heldout_rows_from_the_trials_share(small_data_dir):
    from tasks.config import TrainConfig
    inputs = prepare(TrainConfig(data_dir=str(small_data_dir), tasks="sst,sts", device="cpu", precision="fp32",
                                 model="minilm"))
    rule = plateau.PlateauRule(holdout_share=0.25)
    split, counts = plateau.split_heldout(inputs, ("sst", "sts"), 0.5, 7, rule)
    for task in ("sst", "sts"):
        share = subsample_split(inputs.data[task]["train"], 0.5, 7)  # what the trial would train on without the rule
        train, held = split.data[task]["train"].ids, split.data[task][plateau.HELDOUT].ids
        assert not set(train) & set(held) and sorted(train + held) == sorted(share.ids)
        assert counts[task] == (len(train), len(held)) and len(held) == round(len(share) * 0.25)
        assert split.data_record[task]["train"]["heldout_rows"] == len(held)
    again, _ = plateau.split_heldout(inputs, ("sst",), 0.5, 7, rule)
    assert again.data["sst"][plateau.HELDOUT].ids == split.data["sst"][plateau.HELDOUT].ids
    assert inputs.data["sst"]["train"] is not split.data["sst"]["train"]  # the sweep's own inputs are untouched


@pytest.mark.parametrize("scores,patience,tolerance,stop", [
    ([0.5, 0.6, 0.6, 0.6, 0.9], 2, 0.0, 4),       # two evaluations without improvement after the best at step 2
    ([0.5, 0.6, 0.7, 0.8, 0.9], 2, 0.0, None),    # always improving: runs to the cap
    ([0.5, 0.504, 0.503, 0.9], 2, 0.005, 3),      # improvements below the tolerance do not count
    ([0.5, 0.4, 0.6, 0.5, 0.5, 0.5], 3, 0.0, 6),
])
def test_plateau_stops_after_patience_evaluations_without_improvement(monkeypatch, scores, patience, tolerance, stop):
    feed = iter(scores)
    monkeypatch.setattr(plateau, "evaluate", lambda *a, **k: {"sst": next(feed), "overall": 0.0})
    rule = plateau.PlateauRule(patience=patience, tolerance=tolerance)
    callback = plateau.Plateau(rule, ("sst",))
    stops, logged = [], []
    run = SimpleNamespace(state=SimpleNamespace(global_step=0), total_steps=100, model=None, inputs=None,
                          config=SimpleNamespace(eval_batch_size=8),
                          request_stop=lambda reason: stops.append((run.state.global_step, reason)),
                          log=lambda name, value: logged.append((name, run.state.global_step, value)))
    for step in range(1, len(scores) + 1):
        run.state.global_step = step
        callback.on_evaluate(run, {}, 0.0)
        if callback.stopped:
            break
    assert callback.stopped == (stop is not None)
    assert [s for s, _ in stops] == ([stop] if stop is not None else [])  # asked, never by writing total_steps
    assert all(reason.startswith("plateau: ") for _, reason in stops) and run.total_steps == 100
    assert logged == [("heldout/sst", s, score) for s, score in enumerate(scores[:stop or len(scores)], 1)]
    assert [c["score"] for c in callback.curve] == scores[:stop or len(scores)]


def test_a_trial_stops_on_its_plateau_and_records_its_learning_curves(small_data_dir, tmp_path,
                                                                     tiny_model):
    # No improvement can reach the tolerance: the plateau ends the run at its second held-out evaluation.
    [record] = _run(small_data_dir, tmp_path / "plateau", tiny_model, "--mode", "reinit", "--task", "sst",
                    "--from-layer", "2", "--trial-steps", "40", "--eval-every", "2", "--plateau-patience", "1",
                    "--plateau-tolerance", "1", "--plateau-holdout", "0.25")
    spent = record["budget"]
    assert record["steps"] == spent["trained_steps"] == 4 and spent["steps"] == 40
    assert spent["plateau"]["stopped"] and spent["plateau"]["stop_step"] == 4
    assert [c["step"] for c in spent["heldout_curve"]] == [2, 4] == [c["step"] for c in spent["dev_curve"]]
    assert spent["plateau"]["train_rows"] == {"sst": 30} and spent["plateau"]["holdout_rows"] == {"sst": 10}
    assert record["dev"] == {k: v for k, v in spent["dev_curve"][-1].items() if k != "step"}  # the last evaluation


def test_a_held_out_set_too_small_for_the_tolerance_is_warned_before_any_trial(small_data_dir, tmp_path,
                                                                                 tiny_model):
    assert plateau.coarse_holdout("sst", 26, 0.005).startswith("sst: 26 held-out rows, so one sentence is 0.038")
    assert plateau.coarse_holdout("sst", 500, 0.005) is None       # 0.002 a sentence: under the tolerance
    assert plateau.coarse_holdout("sts", 26, 0.005) is None        # a correlation: no fixed step per row
    argv = ["--data-dir", str(small_data_dir), "--model", str(tiny_model), *SMALL, "--mode", "reinit", "--task",
            "sst", "--from-layer", "none", "--trial-steps", "2", "--eval-every", "2", "--plateau-holdout", "0.25"]
    code, _, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "coarse"), "--plateau-tolerance", "0.05"])
    assert code == 0, err
    assert "warning: fraction 1: sst: 10 held-out rows, so one sentence is 0.100 of accuracy" in err
    code, _, err = run_cli(ablate.main, [*argv, "--out", str(tmp_path / "fine"), "--plateau-tolerance", "0.2"])
    assert code == 0 and "held-out rows" not in err


# ---------------------------------------------------------------------------- controls


def test_transfer_controls_train_twice_the_cap_and_pairs_record_both_stages(small_data_dir, tmp_path,
                                                                            tiny_model):
    records = {r["config"]: r for r in _run(small_data_dir, tmp_path / "transfer", tiny_model, "--mode", "transfer",
                                            "--tasks", "sst,sts", "--trial-steps", "2", "--plateau-patience", "0")}
    assert records["via=none,final=sts,steps=x2"]["steps"] == 4 == records["via=none,final=sts,steps=x2"][
        "budget"]["steps"]
    assert records["via=none,final=sts"]["steps"] == 2
    pair = records["via=sst,final=sts"]
    assert pair["info"]["total_steps"] == 4 and pair["info"]["intermediate_budget"]["trained_steps"] == 2
    assert [t.label for t in _plan("--mode", "transfer", "--tasks", "sst,sts", "--no-equal-steps")] == \
        ["via=none,final=sst", "via=none,final=sts", "via=sst,final=sts", "via=sts,final=sst"]


def test_floor_difference_is_the_change_above_seed_noise_with_seeds_as_units():
    values = {0: 1.0, 1: 1.2, 2: 1.1}
    pairs = {(0, 1): 0.3, (0, 2): 0.2, (1, 2): 0.4}
    result = floor_difference(values, pairs)
    assert result["n"] == 3 and result["mean"] == pytest.approx(1.1 - 0.3)
    assert result["ci95_low"] < result["mean"] < result["ci95_high"]
    assert floor_difference({0: 1.0, 1: 1.0}, {(0, 1): 0.5})["ci95_low"] is None  # two seeds: no interval
    assert floor_difference({5: 1.0}, {(0, 1): 0.5}) is None
    records = [trial_line("finetune", s, {"kind": "finetune", "task": None}, "dynamics", curves={"svcca": [v]})
               for s, v in values.items()]
    records += [trial_line(f"seeds={a}-{b}", a, {"kind": "seeds", "seeds": [a, b]}, "dynamics", group="seed-vs-seed",
                           curves={"svcca": [v]}) for (a, b), v in pairs.items()]
    reference = STUDIES["dynamics"].reference
    [row] = [r for r in summarise(records, lambda p: reference(None, p)) if r["config"] == "finetune"]
    assert row["reference"] == "seed-vs-seed" and row["change_mean"] == pytest.approx(0.8)


def test_probe_records_the_heldout_score_the_best_layer_is_chosen_on(small_data_dir, tmp_path,
                                                                     tiny_model):
    records = _run(small_data_dir, tmp_path / "probe", tiny_model, "--mode", "probe", "--task", "sst",
                   "--layers", "2", "--probe-penalties", "1")
    for record in records:
        held = record["info"]["holdout_score"]
        assert set(held) == {"sst", "overall"} and held["sst"] == record["info"]["holdout"]["sst"]["1"]


# ---------------------------------------------------------------------------- the papers' missing experiments


def test_head_pools_per_layer_and_per_head_index_and_every_block():
    configs = [t.label for t in _plan("--mode", "reinit", "--heads", "0:*,5:*", "--block", "*:3")]
    assert [c for c in configs if c.startswith("block=")] == ["block=0:3", "block=1:3", "block=2:3", "block=3:3"]
    assert len([c for c in configs if c.startswith("keep=")]) == 4 and {"from=0", "from=6"} <= set(configs)
    params = {t.label: t.params for t in _plan("--mode", "reinit", "--heads", "0:*,5:*", layers=6, heads=3)}
    pools = STUDIES["reinit"].pools(None, params)
    assert pools["head=0:*"][1] == ["head=0:0", "head=0:1", "head=0:2"]
    assert pools["head=*:2"] == ({"scheme": "head-index", "head": 2, "embeddings": False}, ["head=0:2", "head=5:2"])
    with pytest.raises(UserError, match=r"--block \*:7"):
        _plan("--mode", "reinit", "--block", "*:7")
    # Figs. 9-10's summary: per head index, the mean over the layers, its change paired with the unmodified model
    records = [trial_line(c, s, p, dev={"sst": 0.5 + 0.01 * s + (0.1 * p["head"] if "head" in p else 0.0)})
               for c, p in params.items() for s in (0, 1)]
    rows = summarise(records, lambda p: STUDIES["reinit"].reference(SimpleNamespace(shape=SimpleNamespace(
        num_layers=6)), p), lambda p: STUDIES["reinit"].pools(None, p))
    [row] = [r for r in rows if r["config"] == "head=*:2"]
    assert row["reference"] == "from=6" and row["change_mean"] == pytest.approx(0.2) and row["n"] == 2
    from tasks.ablation.studies import reinit
    assert reinit.heads_by_layer(rows, "dev/sst", 3, by="head") is not None


def test_restoring_layers_of_an_unchanged_model_changes_nothing(small_data_dir, tmp_path, tiny_model):
    # With the encoder frozen the fine-tuned encoder is the pretrained one: restoring any layer changes nothing.
    [record] = _run(small_data_dir, tmp_path / "restore", tiny_model, "--mode", "restore", "--task", "sst",
                    "--trial-steps", "2", "--plateau-patience", "0", "--freeze-until", "all",
                    "--restore-examples", "20")
    curves = record["curves"]
    assert set(curves) == {"restore_svcca", "restore_dev", "restore_below_svcca", "restore_below_dev"}
    assert all(len(v) == 2 for v in curves.values())
    assert max(curves["restore_svcca"] + curves["restore_below_svcca"]) < 1e-3
    assert curves["restore_dev"] == curves["restore_below_dev"] == [record["dev"]["sst"]] * 2
    # Fine-tuned hard, the restored layers' old values reach the last layer.
    [record] = _run(small_data_dir, tmp_path / "moved", tiny_model, "--mode", "restore", "--task", "sst",
                    "--trial-steps", "3", "--plateau-patience", "0", "--lr", "0.05", "--restore-examples", "20")
    assert min(record["curves"]["restore_svcca"]) > 1e-3 and record["curves"]["restore_below_svcca"][1] > 1e-3


def test_methods_change_one_option_from_the_baseline(small_data_dir, tmp_path, tiny_model,
                                                     monkeypatch):
    assert [t.label for t in _plan("--mode", "methods", "--task", "all")] == \
        ["method=baseline", "method=smart", "method=pcgrad", "method=siamese"]  # cross is the baseline's own
    with pytest.raises(UserError, match="two or more tasks"):
        _plan("--mode", "methods", "--task", "sst", "--methods", "pcgrad")
    seen = {}
    real_fit = sweep.fit

    def spy(config, inputs, outputs, **kwargs):
        seen[config.pair_mode] = len(inputs.data["sts"]["train"].encodings[0])  # 2: the sentences apart
        return real_fit(config, inputs, outputs, **kwargs)

    monkeypatch.setattr(sweep, "fit", spy)
    records = _run(small_data_dir, tmp_path / "methods", tiny_model, "--mode", "methods", "--tasks", "sst,sts",
                   "--methods", "siamese", "--trial-steps", "1", "--plateau-patience", "0")
    assert sorted(r["config"] for r in records) == ["method=baseline", "method=siamese"]
    assert seen == {"cross": 1, "siamese": 2}
    summary = (tmp_path / "methods" / "summary.csv").read_text()
    assert "methods,method=siamese,1.0,dev/overall," in summary and ",method=baseline,1," in summary


def test_dynamics_across_tasks_compares_each_tasks_model(small_data_dir, tmp_path, tiny_model):
    configs = [t.label for t in _plan("--mode", "dynamics", "--tasks", "sst,sts", "--across-tasks", "--seeds", "0,1")]
    assert {"finetune,task=sst", "finetune,task=sts", "seeds=0-1,task=sts", "tasks=sst-sts"} <= set(configs)
    assert configs.count("tasks=sst-sts") == 2 and "finetune" in configs and "seeds=0-1" in configs
    with pytest.raises(UserError, match="two or more"):
        _plan("--mode", "dynamics", "--task", "sst", "--across-tasks")
    records = {r["config"]: r for r in _run(small_data_dir, tmp_path / "dynamics", tiny_model, "--mode", "dynamics",
                                            "--tasks", "sst,sts", "--across-tasks", "--trial-steps", "1",
                                            "--plateau-patience", "0", "--dynamics-examples", "10")}
    assert set(records["finetune,task=sst"]["dev"]) == {"sst", "overall", "overall_raw"}
    curves = records["tasks=sst-sts"]["curves"]
    assert len(curves["svcca"]) == 3 and len(curves["weight_l2"]) == 2 and min(curves["weight_l2"]) > 0
    models = tmp_path / "dynamics" / "models"
    a, b = (torch.load(models / f"dynamics-finetune_task={t}-seed0-frac1.pt") for t in ("sst", "sts"))
    assert any(not torch.equal(a[k], b[k]) for k in a)

"""The three controls issue 37 declared before their code existed: tamkin-not-necessary (the best probe layer re-drawn
alone against the full model), smart-alone (SST and Quora alone with and without SMART) and the pair form of the
layer ratios' null (two perturbed copies compared, for Hao's seed-vs-seed and dataset-vs-dataset lines): each sweep
as declared, each measure's number from fabricated rows, each verdict by its rule, kept results in the real format."""
import math

import numpy as np
import pytest

import reproduce
from tasks.ablation.statistics import (
    difference_interval,
    estimates_difference,
    interval,
    pairwise_interval,
)
from tasks.reproduction import experiments, judging, kept, measures, null_baseline, plan, probes
from tasks.reproduction.findings import BY_ID
from tasks.reproduction.follow_ups import FIRST, FOLLOW_UPS
from tasks.reproduction.sweeps import listed_trials
from tasks.reproduction.verdicts import NOT_REPRODUCED, NOT_RUN, REPRODUCED, UNDERPOWERED, Estimate
from tests.helpers import run_cli
from tests.helpers.lines import trial_line

CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
LARGE, SEEDS = 0.25, range(5)
SITTING = kept.Sitting("2026-11-25 10:00 UTC", "0" * 12, "test cpu", 600.0, 0)


def _record(config, seed, params, dev=None, fraction=LARGE, **extra):
    return trial_line(config, seed, params, fraction=fraction, dev=dev, steps=200, **extra)


def _probe_records(best=3):
    """Probes of every layer: the held-out score peaks at layer `best` (mean pooling); dev would pick another."""
    return [_record(f"layer={k},pooling={p}", s, {"layer": k, "pooling": p, "control": False},
                    {"sst": 0.5 - 0.01 * k}, info={"holdout_score": {"sst": 0.4 - 0.01 * abs(k - best)
                                                                     - (0.005 if p == "cls-token" else 0)}})
            for k in range(7) for p in ("mean", "cls-token") for s in SEEDS]


def _kept_run(experiment, label=FIRST, seeds=tuple(SEEDS), sweeps=()):
    return kept.KeptRun(experiment, label, 1 if label == FIRST else 2, "cpu", "minilm", CTX.tasks, list(seeds), 6,
                        {name: [] for name in sweeps})


def _keep(folder, experiment, label, sweeps, seeds=tuple(SEEDS)):
    """Keep fabricated sweeps ({sweep label: records}) as reproduce.py does (run.json and SWEEP.jsonl)."""
    kept.store(folder, _kept_run(experiment, label, seeds, sweeps), sweeps, SITTING)


# ---------------------------------------------------------------------------- tamkin-not-necessary


def test_the_one_layer_sweep_re_draws_the_best_probe_layer_at_reinit_larges_settings(tmp_path):
    _keep(tmp_path, "probe", FIRST, {"probe": _probe_records(best=3)})
    large = experiments.EXPERIMENTS["reinit-large"]
    assert large.sweeps_for(CTX) == large.sweeps(CTX)              # the first run's sweeps are unchanged
    [spec] = large.sweeps_for(CTX, "tamkin-not-necessary", kept.load(tmp_path))
    first = dict(large.sweeps(CTX)[0].settings)
    settings = dict(spec.settings)
    assert (spec.label, spec.mode) == ("one-layer", "reinit")
    assert settings["block"] == ((2, 1),)                             # probe layer 3 is layer 2's output
    assert {k: settings[k] for k in ("task", "data_fractions")} == {k: first[k] for k in ("task", "data_fractions")}
    trials = listed_trials(spec, CTX, list(SEEDS))
    configs = {t.label for t in trials}
    assert configs == {"from=6", "block=2:1", "keep=2:1", "from=0"} and len(trials) == 4 * len(SEEDS)
    assert not FOLLOW_UPS["tamkin-not-necessary"].changes


def test_without_the_probe_runs_results_the_control_is_one_clear_line(tmp_path):
    code, _, err = run_cli(reproduce.main, ["--follow-up", "tamkin-not-necessary", "--only", "reinit-large",
                                            "--results", str(tmp_path / "results"), "--report",
                                            str(tmp_path / "report.md"), "--out", str(tmp_path / "runs")])
    assert code == 2 and "--only probe" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()                          # nothing trained
    planned = plan.lines(FOLLOW_UPS, kept.KeptRuns(), CTX)
    line = next(x for x in planned if x.startswith("tamkin-not-necessary"))
    assert "needs first:" in line and "probe" in line


def _one_layer(full, redrawn, layer=2):
    results = measures.Results()
    results.add("probe", "probe", _probe_records(best=layer + 1))
    results.add("reinit-large", "one-layer",
                [_record("from=6", s, {"scheme": "from"}, {"sst": full(s)}) for s in SEEDS]
                + [_record(f"block={layer}:1", s, {"scheme": "block"}, {"sst": redrawn(s)}) for s in SEEDS])
    return results


def test_not_necessary_is_the_full_model_minus_the_best_layer_re_drawn_paired_by_seed():
    full, redrawn = (lambda s: 0.45 + 0.01 * s), (lambda s: 0.44 + 0.01 * s + 0.002 * (s % 2))
    [row] = probes.tamkin_probe_not_necessary(_one_layer(full, redrawn), CTX)
    assert row.estimate == Estimate.of(interval([full(s) - redrawn(s) for s in SEEDS]))
    assert "only layer 2 re-drawn (probe layer 3" in row.label
    embeddings = measures.Results()
    embeddings.add("probe", "probe", _probe_records(best=0))
    [row] = probes.tamkin_probe_not_necessary(embeddings, CTX)
    assert "embeddings" in row.label and math.isnan(row.estimate.mean)


# the interval decides where it can; where it crosses the margin, the pilot's sd (0.017: needs 27 seeds) labels it
@pytest.mark.parametrize("cost, expected", [(0.0, REPRODUCED), (0.03, NOT_REPRODUCED), (0.0099, UNDERPOWERED)])
def test_not_necessary_is_an_equivalence_within_a_point(tmp_path, cost, expected):
    results = _one_layer(lambda s: 0.45 + 0.01 * s, lambda s: 0.45 + 0.01 * s - cost + 0.001 * (s % 2 - 0.4))
    _keep(tmp_path, "probe", FIRST, {"probe": results.records[("probe", "probe")]})
    _keep(tmp_path, "reinit-large", "tamkin-not-necessary",
          {"one-layer": results.records[("reinit-large", "one-layer")]})
    by_run = judging.verdicts(kept.load(tmp_path), CTX)
    assert set(by_run["tamkin-not-necessary"]) == {"tamkin-probe-not-necessary"}    # its finding, nothing else
    v = by_run["tamkin-not-necessary"]["tamkin-probe-not-necessary"]
    assert v.finding.kind == "equivalence" and v.rows[0].estimate.level == 0.90       # TOST
    assert v.outcome == expected and by_run[FIRST]["tamkin-probe-not-necessary"].outcome == NOT_RUN
    assert v.power.pilot_sd == 0.017 and v.power.needs == 27


# ---------------------------------------------------------------------------- smart-alone


def test_smart_alone_sweeps_each_task_alone_with_and_without_smart():
    methods = experiments.EXPERIMENTS["methods"]
    specs = methods.sweeps_for(CTX, "smart-alone")
    assert [s.label for s in specs] == ["sst-alone", "quora-alone"] and {s.mode for s in specs} == {"methods"}
    for spec, task in zip(specs, ("sst", "quora")):
        settings = dict(spec.settings)
        assert settings["task"] == task and settings["methods"] == ("smart",)
        assert (settings["pair_mode"], settings["task_heads"], settings["data_fractions"]) == ("siamese", "report",
                                                                                              (LARGE,))
        trials = listed_trials(spec, CTX, list(SEEDS))
        assert sorted({t.label for t in trials}) == ["method=baseline", "method=smart"] and len(trials) == 10
    assert [s.label for s in methods.sweeps_for(CTX)] == ["multitask", "sts"]    # the first run's, unchanged


def _alone(change):
    """{task: records}: SMART moves the task's dev score by change[task] (+ seed noise), the baseline by nothing."""
    return {f"{task}-alone": [_record(f"method={m}", s, {"method": m},
                                      {task: 0.5 + 0.01 * s + (change[task] + 0.002 * (s % 3 - 1) if m == "smart"
                                                               else 0.0)})
                              for m in ("baseline", "smart") for s in SEEDS] for task in ("sst", "quora")}


def test_smart_alone_is_smart_minus_without_per_task_paired_by_seed():
    results = measures.Results()
    for label, records in _alone({"sst": 0.004, "quora": -0.02}).items():
        results.add("methods", label, records)
    declared = FOLLOW_UPS["smart-alone"].declares[0]
    rows = declared.measure(results, CTX, **declared.keywords)
    assert [r.label.split(":")[0] for r in rows] == ["sst alone", "quora alone"]
    for row, change in zip(rows, (0.004, -0.02)):
        assert vars(row.estimate) == pytest.approx(vars(Estimate.of(interval([change + 0.002 * (s % 3 - 1)
                                                                               for s in SEEDS]))))
        assert "smart 200 (200-200) steps" in row.label


@pytest.mark.parametrize("change, expected", [({"sst": 0.0, "quora": 0.001}, REPRODUCED),
                                              ({"sst": 0.0, "quora": 0.05}, NOT_REPRODUCED),
                                              ({"sst": 0.0, "quora": 0.0099}, UNDERPOWERED)])
def test_smart_alone_holds_only_when_both_tasks_do(tmp_path, change, expected):
    _keep(tmp_path, "methods", "smart-alone", _alone(change))
    by_run = judging.verdicts(kept.load(tmp_path), CTX)
    assert set(by_run["smart-alone"]) == {"freeze-smart-alone"}
    v = by_run["smart-alone"]["freeze-smart-alone"]
    assert v.finding.combine == "all" and v.outcome == expected
    assert v.rows[0].verdict == REPRODUCED                      # SST holds in each case: Quora decides
    assert all(r.estimate.level == 0.90 for r in v.rows)     # each row at its own level (intersection-union)


def test_the_plan_estimates_the_controls_own_sweeps(tmp_path):
    _keep(tmp_path, "probe", FIRST, {"probe": _probe_records()})
    _keep(tmp_path, "reinit-large", FIRST, {"reinit": [_record(f"from={k}", s, {"scheme": "from"}, {"sst": 0.4})
                                                       for k in range(7) for s in SEEDS]})
    runs = kept.load(tmp_path)
    large = experiments.EXPERIMENTS["reinit-large"]
    found = plan.experiment_minutes(large, CTX, "cpu", FOLLOW_UPS["tamkin-not-necessary"], runs)
    own = 4 * len(SEEDS) * CTX.scale.expected_steps       # its one-layer sweep: four configurations, not seven
    assert found == pytest.approx(own * plan.measured("cpu", "cpu").step / 60)
    assert found < plan.experiment_minutes(large, CTX)
    line = next(x for x in plan.lines(FOLLOW_UPS, runs, CTX) if x.startswith("tamkin-not-necessary"))
    assert f"~{found:.0f} min" in line and "needs first" not in line


# ---------------------------------------------------------------------------- the null's pair form


def test_two_independent_estimates_differ_by_welch():
    rng = np.random.default_rng(1)
    a, b = rng.normal(2.0, 1.0, 6), rng.normal(1.0, 0.5, 4)
    assert estimates_difference(interval(a), interval(b)) == pytest.approx(difference_interval(a, b))
    pairs = {(i, j): float(rng.normal()) for i in range(5) for j in range(i + 1, 5)}
    found = estimates_difference(pairwise_interval(pairs), interval(b))
    jack = pairwise_interval(pairs)
    se = math.sqrt(jack["std"] ** 2 / 5 + b.var(ddof=1) / 4)
    assert found["mean"] == pytest.approx(jack["mean"] - b.mean()) and found["std"] == pytest.approx(se * math.sqrt(5))
    assert found["ci95_high"] - found["ci95_low"] > jack["ci95_high"] - jack["ci95_low"]


def _curves(top):
    layers = [0.1, 0.1, 0.2, 0.2, top, top]
    return {"weight_l2": layers, "attention_js": layers, "svcca": [0.0, *layers]}


def _pair_null(top):
    return null_baseline.Null.from_json({"relative": 0.03, "seeds": [
        {"seed": [2 * i, 2 * i + 1], "curves": _curves(top + 0.02 * i)} for i in range(4)]})


def _seed_pairs():
    return [_record(f"seeds={a}-{b}", a, {"kind": "seeds", "seeds": [a, b]}, None, group="seed-vs-seed",
                    curves=_curves(0.8 + 0.01 * (a + b) + 0.003 * a * b)) for a in SEEDS for b in SEEDS if a < b]


def _datasets():
    return [_record("tasks=sst-quora", s, {"kind": "tasks", "tasks": ["sst", "quora"]}, None,
                    curves=_curves(0.9 + 0.01 * s)) for s in SEEDS]


def test_the_consistency_lines_are_read_against_the_pair_form_null():
    null = BY_ID      # the ratio lines read against their null in the first run since issue 54
    results = measures.Results(null=null_baseline.Null(0.03, (), _pair_null(0.5)))
    results.add("dynamics", "dynamics", _seed_pairs())
    results.add("datasets", "dynamics", _datasets())
    replicates = [(0.5 + 0.02 * i) / 0.1 - 1 for i in range(4)]
    seeds = measures.against_pair_null(results, CTX, **null["hao-seeds-consistent-low"].keywords)
    fine_tuned = pairwise_interval({(a, b): (0.8 + 0.01 * (a + b) + 0.003 * a * b) / 0.1 - 1
                                    for a in SEEDS for b in SEEDS if a < b})
    assert [r.label.split(", ")[1].split(" ")[0] for r in seeds] == ["svcca", "attention_js"]
    expected = Estimate.of(estimates_difference(fine_tuned, interval(replicates)))
    assert vars(seeds[0].estimate) == pytest.approx(vars(expected))
    assert "4 pairs of random directions" in seeds[0].label
    datasets = measures.against_pair_null(results, CTX, **null["hao-datasets-consistent-low"].keywords)
    assert vars(datasets[1].estimate) == pytest.approx(vars(Estimate.of(difference_interval(
        [(0.9 + 0.01 * s) / 0.1 - 1 for s in SEEDS], replicates))))
    results.null = null_baseline.Null(0.03)                             # the single form only: pending
    [row] = measures.against_pair_null(results, CTX, **null["hao-seeds-consistent-low"].keywords)
    assert row.pending == "python -m tasks.ablation.perturbation --pairs 5" and "--pairs" in row.label


@pytest.mark.parametrize("null_top, expected", [(0.5, REPRODUCED), (1.2, NOT_REPRODUCED)])
def test_the_pair_lines_verdict_against_the_pair_null(null_top, expected):
    runs = kept.KeptRuns({FIRST: {"dynamics": kept.Kept(_kept_run("dynamics"), {"dynamics": _seed_pairs()}),
                                  "datasets": kept.Kept(_kept_run("datasets"), {"dynamics": _datasets()})}})
    by_run = judging.verdicts(runs, CTX, null_baseline.Null(0.03, (), _pair_null(null_top)))
    null = by_run[FIRST]    # the first run's lines: their null subtracted since issue 54
    for fid in ("hao-seeds-consistent-low", "hao-datasets-consistent-low"):
        assert null[fid].outcome == expected and len(null[fid].rows) == 2 and null[fid].finding.combine == "all"
        assert null[fid].finding.quote == BY_ID[fid].quote
    assert judging.verdicts(runs, CTX, None)[FIRST]["hao-seeds-consistent-low"].outcome == NOT_RUN


def test_the_pair_form_kept_beside_the_single_form_is_read_with_it(tmp_path):
    single, pairs = tmp_path / "null-baseline.json", tmp_path / null_baseline.PAIRS_PATH.name
    assert null_baseline.load(single) is None
    pairs.write_text('{"relative": 0.03, "seeds": []}')
    assert null_baseline.load(single) == null_baseline.Null(pairs=null_baseline.Null(0.03))
    single.write_text('{"relative": 0.03, "seeds": []}')
    assert null_baseline.load(single) == null_baseline.Null(0.03, (), null_baseline.Null(0.03))

"""The code two declared follow-ups needed: task-dependence-matched's measure reading the second task at its own
fraction, and the ratio lines' rows against their null (each layer ratio against the null baseline, Welch over seeds
and the null's random directions; the first run's since issue 54), on synthetic records; and the refusal of a
follow-up that re-reads a kept run."""
import math

import numpy as np
import pytest
from scipy import stats

import reproduce
from tasks.ablation.statistics import difference_interval, interval
from tasks.reproduction import experiments, follow_ups, judging, kept, measures, null_baseline
from tasks.reproduction.findings import BY_ID, hao
from tasks.reproduction.findings.null import AGAINST_NULL
from tasks.reproduction.verdicts import NOT_REPRODUCED, NOT_RUN, REPRODUCED, Estimate, judge
from tests.helpers import run_cli
from tests.helpers.lines import trial_line

CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
SMALL, LARGE, MATCHED = 0.03, 0.25, 0.0158


def _record(config, seed, fraction, params=None, dev=None, curves=None):
    return trial_line(config, seed, params, fraction=fraction, dev=dev, curves=curves)


def _reinit(task, fraction, gain_of_middle, ks=range(7)):
    """Scores 0.4 + gain_of_middle at k >= 4 (the middle third pretrained), + seed noise."""
    return [_record(f"from={k}", s, fraction, {"scheme": "from", "from": k},
                    {task: 0.4 + (gain_of_middle if k >= 4 else 0.0) + 0.002 * s + 0.001 * (s * k % 3)})
            for k in ks for s in range(5)]


def _task_dependence(second_fraction):
    results = measures.Results()
    results.add("reinit-small", "reinit", _reinit("sst", SMALL, 0.05))
    results.add("task-dependence", "reinit", _reinit("quora", second_fraction, 0.01, ks=(6, 4, 2, 0)))
    return results


@pytest.mark.parametrize("second", [SMALL, MATCHED])
def test_task_dependence_reads_the_second_task_at_the_fraction_its_trials_ran_at(second):
    # the first run trains Quora at the small fraction, task-dependence-matched at its own (SST's row count):
    # before, the measure read the small fraction for both and found no Quora trials at the matched one
    row = measures.singh_task_dependence(_task_dependence(second), CTX)[0]
    assert row.estimate.n == 5 and row.estimate.mean == pytest.approx(0.04)
    assert f"sst at {SMALL:g}" in row.label and f"quora at {second:g}" in row.label
    follow = follow_ups.FOLLOW_UPS["task-dependence-matched"]
    assert dict(follow.changes)["data_fractions"] == (MATCHED,)


def test_the_difference_interval_is_welchs_and_carries_the_references_spread():
    rng = np.random.default_rng(0)
    a, b = rng.normal(3.0, 1.0, 5), rng.normal(1.0, 0.8, 3)
    found = difference_interval(a, b)
    se = math.sqrt(a.var(ddof=1) / 5 + b.var(ddof=1) / 3)
    t = stats.ttest_ind(a, b, equal_var=False).statistic
    assert found["mean"] == pytest.approx(a.mean() - b.mean()) and found["mean"] / se == pytest.approx(t)
    assert found["ci95_high"] - found["mean"] == pytest.approx(stats.t.ppf(0.975, found["df"]) * se)
    shifted = interval(a - b.mean())
    assert found["ci95_high"] - found["ci95_low"] > shifted["ci95_high"] - shifted["ci95_low"]
    one = difference_interval(a, [1.0])          # one reference value: no spread to carry
    assert one["ci95_low"] == pytest.approx(interval(a - 1.0)["ci95_low"])


def _curves(top):
    """Per-layer curves growing to `top` in the top third (SVCCA's index 0: the embeddings)."""
    layers = [0.1, 0.1, 0.2, 0.2, top, top]
    return {"weight_l2": layers, "attention_js": layers, "svcca": [0.0, *layers]}


def _dynamics(null_top):
    results = measures.Results(null=null_baseline.Null.from_json(
        {"relative": 0.03, "seeds": [{"seed": i, "curves": _curves(null_top + 0.01 * i)} for i in range(3)]}))
    results.add("dynamics", "dynamics", [_record("finetune", s, f, {"kind": "finetune"}, None,
                                                 _curves(0.5 + 0.01 * s)) for s in range(5) for f in (SMALL, LARGE)])
    return results


def test_a_layer_ratio_is_read_against_the_null_not_zero():
    declared = {f.id: f for f in AGAINST_NULL}["hao-attention-last"]
    assert declared.measure is BY_ID["hao-attention-last"].measure     # the headline's since issue 54
    assert declared.protocol == 1 and declared.quote == BY_ID["hao-attention-last"].quote
    assert declared.sesoi == BY_ID["hao-attention-last"].sesoi and "null" in declared.sesoi_reason
    # fine-tuned top / bottom - 1 is 0.52/0.1 - 1 = 4.2 on average: far above zero, but a null that grows as much
    # with depth leaves nothing
    same = declared.measure(_dynamics(0.5), CTX, **declared.keywords)[0]
    null = [(0.5 + 0.01 * i) / 0.1 - 1 for i in range(3)]
    ratios = [(0.5 + 0.01 * s) / 0.1 - 1 for s in range(5)]
    assert same.estimate == Estimate.of(difference_interval(ratios, null))
    assert "minus the null's (3 random" in same.label
    assert same.estimate.mean == pytest.approx(0.1) and same.estimate.low < 0
    flat = declared.measure(_dynamics(0.1), CTX, **declared.keywords)[0]
    assert flat.estimate.mean == pytest.approx(np.mean(ratios) - np.mean([0.01 * i / 0.1 for i in range(3)]))
    without = measures.Results()
    without.records = _dynamics(0.5).records
    assert declared.measure(without, CTX, **declared.keywords)[0].estimate is None


def test_the_first_runs_ratio_lines_read_against_the_null_a_revision_said_as_such():
    dynamics = _dynamics(0.5)
    run = kept.KeptRun("dynamics", "first", 1, "cpu", "minilm", CTX.tasks, list(range(5)), 6, {})
    runs = kept.KeptRuns({"first": {"dynamics": kept.Kept(run, {"dynamics": dynamics.records[("dynamics",
                                                                                            "dynamics")]})}})
    first = judging.verdicts(runs, CTX, dynamics.null)["first"]
    zero = next(f for f in hao.FINDINGS if f.id == "hao-attention-last")      # as first declared: against zero
    assert judge(zero, "first", zero.measure(dynamics, CTX, **zero.keywords)).outcome == REPRODUCED
    assert first["hao-attention-last"].outcome == NOT_REPRODUCED              # against the null: depth's alone
    assert first["hao-seeds-consistent-low"].outcome == NOT_RUN               # its pair-form null is pending
    assert "hao-null-perturbation" not in follow_ups.FOLLOW_UPS
    revised = BY_ID["hao-attention-last"].revisions[-1]
    assert "null" in revised.what and "reproduced against zero" in revised.before


def test_a_follow_up_that_trains_nothing_is_refused_as_a_run(monkeypatch):
    monkeypatch.setitem(follow_ups.FOLLOW_UPS, "re-read", follow_ups.FollowUp("re-read", ("dynamics",), "a test",
                                                                              reads=follow_ups.FIRST))
    code, _, err = run_cli(reproduce.main, ["--follow-up", "re-read", "--only", "dynamics"])
    assert code == 2 and "trains nothing" in err and "--report-only" in err

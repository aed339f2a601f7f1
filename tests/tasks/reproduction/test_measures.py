"""measures.py: each effect signed to its paper's direction, and each interval over its independent unit (the
seed, the seeds and orders of a permutation, the seed pairs of a seed-vs-seed comparison)."""

import numpy as np
import pytest

from tasks.ablation.statistics import crossed_interval, interval
from tasks.reproduction import measures
from tasks.reproduction.verdicts import NOT_REPRODUCED, REPRODUCED, Estimate, decide
from tests.helpers.reproduction import CTX, LARGE, declared, measure, record, results_of


def test_reinit_measures_are_signed_to_the_papers_direction():
    def concave(k, fraction, seed):  # pretraining helps, and the upper layers help more with more data
        top = 0.45 if fraction == LARGE else 0.32
        return 0.25 + (top - 0.25) * (k / 6) ** (0.5 if fraction == LARGE else 0.2) + 0.003 * seed
    results = results_of(concave)
    scarce = measures.singh_scarce(results, CTX)[0]
    assert scarce.estimate.mean == pytest.approx(0.07) and decide(scarce.estimate, 0.02) == REPRODUCED
    tamkin = measures.tamkin_data_size(results, CTX)[0]
    assert tamkin.estimate.mean > 0.02
    flat = results_of(lambda k, f, s: 0.4 + 0.002 * s)   # pretraining does nothing
    assert decide(measures.singh_scarce(flat, CTX)[0].estimate, 0.02) == NOT_REPRODUCED
    assert len(measures.college_not_monotone(results, CTX)) == 6


def test_permutation_interval_carries_the_originals_noise_seeds_and_orders_both():
    rng = np.random.default_rng(0)
    records = [record("order=0-1-2-3-4-5", s, LARGE, {"original": True}, {"sst": 0.45 + 0.01 * s})
               for s in range(3)]
    effects = [0.02, 0.05, 0.01, 0.08, 0.03, 0.04]
    for i, effect in enumerate(effects):
        records += [record(f"order=random{i}", s, LARGE, {"random": True},
                           {"sst": 0.45 + 0.01 * s - effect + 0.002 * rng.standard_normal()})
                    for s in range(3)]
    results = measures.Results()
    results.add("permute", "permute", records)
    row = measures.tamkin_permute(results, CTX)[0]
    assert row.estimate.n == 3 and f"{len(effects)} orders x 3 seeds" in row.label
    members = [{s: r.dev["sst"] for s, r in zip(range(3), records[3 + 3 * i:6 + 3 * i])}
               for i in range(len(effects))]
    assert row.estimate == Estimate.of(crossed_interval(members, {s: 0.45 + 0.01 * s for s in range(3)}))
    per_order = interval([np.mean([0.45 + 0.01 * s - m[s] for s in range(3)]) for m in members])
    assert row.estimate.low <= per_order["ci95_low"]    # never narrower than the order as the unit


def test_dynamics_ratios_compare_thirds_and_jackknife_seed_pairs():
    growing = [0.1 * (i + 1) for i in range(6)]
    rng = np.random.default_rng(0)
    records = [record("finetune", s, LARGE, {"kind": "finetune"}, None,
                      {"weight_l2": [v + 0.01 * rng.random() for v in growing],
                        "attention_js": [v + 0.01 * rng.random() for v in growing],
                        "svcca": [0.0] + [v + 0.01 * rng.random() for v in growing]}) for s in range(5)]
    records += [record(f"seeds={a}-{b}", a, LARGE, {"kind": "seeds", "seeds": [a, b]}, None,
                       {"svcca": [0.0] + [0.3 + 0.01 * rng.random() for _ in growing]}, group="seed-vs-seed")
                for a in range(5) for b in range(a + 1, 5)]
    results = measures.Results()
    results.add("dynamics", "dynamics", records)
    small, later = declared("singh-later-layers-move", results)   # a row per fraction: "in all experiments"
    assert small.estimate is None and "0.25" in later.label
    assert later.estimate.mean == pytest.approx(0.55 / 0.15 - 1, rel=0.05)
    invariant = measures.singh_early_invariant(results, CTX)[0]
    assert invariant.estimate.mean == pytest.approx(1 - 0.15 / 0.55, rel=0.05)
    seeds = declared("hao-seeds-consistent-low", results)[0]
    assert seeds.estimate.n == 5 and decide(seeds.estimate, 0.5) == NOT_REPRODUCED   # flat: no layer pattern


def test_head_reinitialisation_takes_the_seed_as_its_unit():
    records = [record("from=6", s, LARGE, {"scheme": "from"}, {"sst": 0.45 + 0.01 * s * s}) for s in range(3)]
    for h in range(12):
        records += [record(f"head=5:{h}", s, LARGE, {"scheme": "head", "layer": 5, "head": h},
                           {"sst": 0.45 + 0.01 * s + 0.001 * h}) for s in range(3)]
    results = measures.Results()
    results.add("heads-top", "heads", records)
    row = measure("college-heads-top-help", results)[0]
    per_seed = [np.mean([0.01 * s + 0.001 * h for h in range(12)]) - 0.01 * s * s for s in range(3)]
    assert row.estimate.n == 3 and row.estimate.mean == pytest.approx(np.mean(per_seed))
    assert row.estimate.low == pytest.approx(interval(per_seed)["ci95_low"])
    bottom = measures.mean_over_heads(results, CTX, "heads-top", -1)[0].estimate
    assert bottom.mean == pytest.approx(-row.estimate.mean)
    assert bottom.low == pytest.approx(-row.estimate.high)

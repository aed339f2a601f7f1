"""The sweep's statistics against hand-computed values: paired changes, seed-vs-seed pairs, means over
configurations; and the rows and figures a summary builds from them."""
import math
from types import SimpleNamespace

import pytest

from tasks.ablation.statistics import (
    interval,
    paired_interval,
    pairwise_interval,
    pooled_interval,
    pooled_paired_interval,
)
from tasks.ablation.studies import permute, reinit
from tasks.ablation.summary import summarise
from tasks.ablation.sweep import Shape
from tests.helpers.lines import trial_line

T2, T1 = 4.302653, 12.706205  # t(0.975) with 2 and 1 degrees of freedom


def _ci(stats):
    return stats["ci95_low"], stats["ci95_high"]


def test_t_interval_of_independent_values():
    stats = interval([0.1, 0.2, 0.2])
    std = math.sqrt(((0.1 - 1 / 6) ** 2 + 2 * (0.2 - 1 / 6) ** 2) / 2)  # 0.057735
    assert stats["n"] == 3 and stats["mean"] == pytest.approx(1 / 6) and stats["std"] == pytest.approx(std)
    assert _ci(stats) == pytest.approx((1 / 6 - T2 * std / math.sqrt(3), 1 / 6 + T2 * std / math.sqrt(3)), abs=1e-6)
    assert interval([0.4])["ci95_low"] is None  # one seed: no spread


def test_paired_change_is_the_interval_of_per_seed_differences():
    values, reference = {0: 0.5, 1: 0.6, 2: 0.7, 3: 0.9}, {0: 0.4, 1: 0.4, 2: 0.5}
    change = paired_interval(values, reference)  # seed 3 has no reference: left out
    assert change["n"] == 3 and change["mean"] == pytest.approx(1 / 6)
    assert _ci(change) == pytest.approx((1 / 6 - 0.143422, 1 / 6 + 0.143422), abs=1e-6)  # differences 0.1, 0.2, 0.2
    # The seeds move both configurations together: the paired interval is much narrower than either one's own.
    own = interval([0.5, 0.6, 0.7])
    assert change["ci95_high"] - change["ci95_low"] < (own["ci95_high"] - own["ci95_low"]) / 1.5
    assert paired_interval({5: 0.1}, reference) is None


def test_seed_vs_seed_pairs_count_seeds_not_pairs():
    stats = pairwise_interval({(0, 1): 1.0, (0, 2): 2.0, (1, 2): 3.0})
    # Leaving out seed 0, 1, 2 leaves the pair means 3, 2, 1: jackknife variance 2/3 * 2 = 4/3.
    se = math.sqrt(4 / 3)
    assert stats["n"] == 3 and stats["mean"] == pytest.approx(2.0) and stats["std"] == pytest.approx(se * math.sqrt(3))
    assert _ci(stats) == pytest.approx((2 - T2 * se, 2 + T2 * se), abs=1e-5)  # 2 -/+ 4.968
    naive = interval([1.0, 2.0, 3.0])  # the three pairs as if independent: too narrow
    assert naive["ci95_high"] - naive["ci95_low"] < stats["ci95_high"] - stats["ci95_low"]
    two = pairwise_interval({(0, 1): 0.5})
    assert two["n"] == 2 and two["mean"] == 0.5 and two["ci95_low"] is None


def test_mean_over_configurations_and_its_paired_change():
    members = [{0: 0.5, 1: 0.7}, {0: 0.2, 1: 0.4}, {0: 0.9, 1: 0.9}]  # means 0.6, 0.3, 0.9
    stats = pooled_interval(members)
    assert stats["n"] == 3 and stats["mean"] == pytest.approx(0.6) and stats["std"] == pytest.approx(0.3)
    assert _ci(stats) == pytest.approx((0.6 - T2 * 0.3 / math.sqrt(3), 0.6 + T2 * 0.3 / math.sqrt(3)), abs=1e-6)
    # per seed: members' mean 0.5333 and 0.6667 against 0.6 and 0.8: changes -0.0667, -0.1333
    change = pooled_paired_interval(members, {0: 0.6, 1: 0.8})
    std = math.sqrt(2) * (0.1333333 - 0.0666667) / 2
    assert change["n"] == 2 and change["mean"] == pytest.approx(-0.1)
    assert _ci(change) == pytest.approx((-0.1 - T1 * std / math.sqrt(2), -0.1 + T1 * std / math.sqrt(2)), abs=1e-5)


def _record(mode, config, seed, params, final=None, best=None, curves=None, group=None):
    return trial_line(config, seed, params, mode, group=group, dev=final and {"sst": final},
                      dev_best=best and {"sst": best}, curves=curves)


def _head(layer, head, seed, final):
    return _record("reinit", f"head={layer}:{head}", seed,
                   {"scheme": "head", "layer": layer, "head": head, "embeddings": False}, final, final + 0.05)


def _rows(records, study, shape):
    sweep = SimpleNamespace(shape=shape)
    rows = summarise(records, lambda p: study.reference(sweep, p), lambda p: study.pools(sweep, p))
    return {(r["config"], r["metric"]): r for r in rows}


HEAD_RECORDS = [_record("reinit", "from=2", s, {"scheme": "from", "layers": [], "embeddings": False, "from": 2},
                        final, final + 0.05) for s, final in ((0, 0.6), (1, 0.8))] + \
    [_head(1, h, s, v) for h, values in enumerate(((0.5, 0.7), (0.2, 0.4), (0.9, 0.9))) for s, v in enumerate(values)]


def test_head_reinit_rows_pair_each_head_with_the_unmodified_model_and_pool_each_layer():
    rows = _rows(HEAD_RECORDS, reinit.STUDY, Shape(num_layers=2, num_heads=3))
    base = rows[("from=2", "dev/sst")]
    assert base["mean"] == pytest.approx(0.7) and base["best_mean"] == pytest.approx(0.75)
    assert base.get("reference") is None  # the reference is not compared with itself
    head = rows[("head=1:0", "dev/sst")]  # 0.5 - 0.6 and 0.7 - 0.8: the same change at both seeds
    assert head["reference"] == "from=2" and head["change_n"] == 2
    assert (head["change_mean"], head["change_ci95_low"], head["change_ci95_high"]) == pytest.approx((-0.1,) * 3)
    layer = rows[("head=1:*", "dev/sst")]  # the mean over the layer's three heads, and its change paired by seed
    assert layer["n"] == 3 and layer["mean"] == pytest.approx(0.6) and layer["best_mean"] == pytest.approx(0.65)
    assert layer["change_n"] == 2 and layer["change_mean"] == pytest.approx(-0.1)
    assert layer["params"]["scheme"] == "head-layer"


def test_seed_vs_seed_rows_are_jackknifed_over_seeds():
    records = [_record("dynamics", f"seeds={a}-{b}", a, {"kind": "seeds", "seeds": [a, b]},
                       curves={"svcca": [v]}, group="seed-vs-seed")
               for (a, b), v in (((0, 1), 1.0), ((0, 2), 2.0), ((1, 2), 3.0))]
    row = _rows(records, SimpleNamespace(reference=lambda s, p: None, pools=lambda s, p: {}), None)[
        ("seed-vs-seed", "svcca/0")]
    assert row["n"] == 3 and row["mean"] == pytest.approx(2.0)
    assert _ci(row) == pytest.approx((2 - T2 * math.sqrt(4 / 3), 2 + T2 * math.sqrt(4 / 3)), abs=1e-5)


def _order(order, seed, final, **extra):
    params = {"order": order, "original": order == [0, 1, 2], "random": order not in ([0, 1, 2], None), **extra}
    return _record("permute", "reinit=all" if order is None else permute.label(order), seed, params, final, final)


PERMUTE_RECORDS = [_order([0, 1, 2], s, v) for s, v in ((0, 0.50), (1, 0.54))] + \
    [_order(None, s, v, reinit=True) for s, v in ((0, 0.30), (1, 0.32))] + \
    [_order(o, s, v) for o, values in (([2, 1, 0], (0.40, 0.44)), ([1, 0, 2], (0.46, 0.48)),
                                        ([2, 0, 1], (0.35, 0.37))) for s, v in enumerate(values)]


def test_permutation_mean_takes_the_order_as_its_unit_and_is_paired_with_the_original_order():
    rows = _rows(PERMUTE_RECORDS, permute.STUDY, Shape(num_layers=3, num_heads=1))
    pooled = rows[("order=*", "dev/sst")]  # order means 0.42, 0.47, 0.36
    assert pooled["n"] == 3 and pooled["mean"] == pytest.approx(0.416667) and pooled["std"] == pytest.approx(0.055076,
                                                                                                              abs=1e-6)
    # per seed: (0.40 + 0.46 + 0.35) / 3 - 0.50 and (0.44 + 0.48 + 0.37) / 3 - 0.54
    assert pooled["reference"] == "order=0-1-2" and pooled["change_mean"] == pytest.approx(-0.103333, abs=1e-6)
    assert rows[("reinit=all", "dev/sst")]["change_mean"] == pytest.approx(-0.21)


def _legend(fig):
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_figures_draw_the_papers_references():
    rows = list(_rows(PERMUTE_RECORDS, permute.STUDY, Shape(num_layers=3, num_heads=1)).values())
    labels = _legend(permute.permutation_strip(PERMUTE_RECORDS, rows, "dev/sst"))
    assert {"original order", "every layer re-drawn", "mean over random orders (n = 3, 95% CI)"} <= set(labels)
    rows = list(_rows(HEAD_RECORDS, reinit.STUDY, Shape(num_layers=2, num_heads=3)).values())
    labels = _legend(reinit.heads_by_layer(rows, "dev/sst", 2))
    assert "mean over the layer's heads (95% CI, paired by seed)" in labels
    span = {"start": 1, "size": 1}
    block = [_record("reinit", label, s, {"scheme": scheme, "layers": layers, "embeddings": False, **extra}, v, v)
             for s in (0, 1) for label, scheme, layers, extra, v in (
                 ("from=2", "from", [], {"from": 2}, 0.6), ("from=0", "from", [0, 1], {"from": 0}, 0.3),
                 ("block=1:1", "block", [1], span, 0.55), ("keep=1:1", "keep", [0], span, 0.35))]
    rows = list(_rows(block, reinit.STUDY, Shape(num_layers=2, num_heads=3)).values())
    labels = _legend(reinit.reinit_blocks(rows, "dev/sst", 2))
    assert {"pretrained", "every layer re-drawn (embeddings only)", "the block re-drawn",
            "only the block pretrained"} <= set(labels)

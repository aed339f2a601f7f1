"""reproduce.py: each finding's verdict from its interval, the findings read from sweep records as ablate.py
writes them, and the report written (and resumed) end to end on a small run."""
import json

import numpy as np
import pytest

import reproduce
from conftest import run_cli
from tasks.ablation.reproduction import (
    EXPERIMENTS,
    INCONCLUSIVE,
    LARGE,
    NOT_REPRODUCED,
    REPRODUCED,
    SMALL,
    Results,
    decide,
    selected,
    thirds,
)


def _interval(low, high):
    return {"n": 3, "mean": (low + high) / 2, "std": 1.0, "ci95_low": low, "ci95_high": high}


def test_a_direction_is_reproduced_only_when_its_interval_excludes_zero_on_the_papers_side():
    assert decide(_interval(0.01, 0.05), "> 0") == REPRODUCED
    assert decide(_interval(-0.05, -0.01), "> 0") == NOT_REPRODUCED
    assert decide(_interval(-0.01, 0.05), "> 0") == INCONCLUSIVE
    assert decide(_interval(-0.05, -0.01), "< 0") == REPRODUCED
    assert decide(_interval(0.01, 0.05), "< 0") == NOT_REPRODUCED
    assert decide(None, "> 0") == INCONCLUSIVE
    assert decide({"n": 1, "mean": 0.3, "ci95_low": None, "ci95_high": None}, "> 0") == INCONCLUSIVE


def test_no_loss_is_an_equivalence_test_within_the_margin():
    assert decide(_interval(-0.01, 0.015), "|x| < margin", 0.02) == REPRODUCED
    assert decide(_interval(-0.05, -0.03), "|x| < margin", 0.02) == NOT_REPRODUCED
    assert decide(_interval(-0.03, 0.01), "|x| < margin", 0.02) == INCONCLUSIVE


def _record(config, seed, fraction, params=None, dev=None, curves=None, group=None):
    return {"config": config, "group": group or config, "seed": seed, "data_fraction": fraction,
            "params": params or {}, "dev": dev or {}, "curves": curves, "status": "ok"}


def _reinit_results(score) -> Results:
    """A tamkin-reinit sweep whose SST accuracy at k and seed s is score(k, fraction, seed)."""
    results = Results()
    records = [_record(f"from={k}", s, f, {"scheme": "from", "from": k}, {"sst": score(k, f, s)})
               for k in (6, 4, 2, 0) for f in (SMALL, LARGE) for s in (0, 1, 2)]
    results.add("tamkin-reinit", "reinit", records)
    return results


def test_reinit_findings_follow_the_measured_curve():
    # Tamkin et al.'s shape: lower layers give most of the gain, and more of it with more data.
    def concave(k, fraction, seed):
        top = 0.45 if fraction == LARGE else 0.32
        gain = {0: 0.0, 2: 0.6, 4: 0.85, 6: 1.0}[k] if fraction == LARGE else {0: 0, 2: 0.9, 4: 0.97, 6: 1.0}[k]
        return 0.25 + (top - 0.25) * gain + 0.003 * seed
    findings = EXPERIMENTS["tamkin-reinit"].findings(_reinit_results(concave), 6)
    assert [f.outcome for f in findings] == [REPRODUCED] * 5
    assert "fraction 0.03" in findings[0].claim and "fraction 0.25" in findings[2].claim
    assert "re-drawn" in findings[0].claim

    # The opposite: pretraining hurts, and the upper layers carry the gain.
    def reversed_curve(k, fraction, seed):
        return 0.45 - 0.02 * (6 - k) ** 0.5 * (1 if k else -3) + 0.001 * seed + (0.01 if fraction == SMALL else 0)
    outcomes = [f.outcome for f in EXPERIMENTS["tamkin-reinit"].findings(_reinit_results(reversed_curve), 6)]
    assert outcomes[0] == NOT_REPRODUCED and outcomes[2] == NOT_REPRODUCED


def test_dynamics_findings_compare_the_top_half_with_the_bottom_half_and_jackknife_seed_pairs():
    n = 6
    growing = [0.1 * (i + 1) for i in range(n)]
    rng = np.random.default_rng(0)
    records = [_record("finetune", s, LARGE, {"kind": "finetune"}, {"sst": 0.4},
                       {"weight_l2": [v + 0.01 * rng.random() for v in growing],
                        "attention_js": [v + 0.01 * rng.random() for v in growing],
                        "svcca": [0.0] + [v + 0.01 * rng.random() for v in growing]}) for s in (0, 1, 2)]
    flat = [0.3] * n
    records += [_record(f"seeds={a}-{b}", a, LARGE, {"kind": "seeds", "seeds": [a, b]}, None,
                        {"svcca": [0.0] + [v + 0.01 * rng.random() for v in flat]}, group="seed-vs-seed")
                for a, b in ((0, 1), (0, 2), (1, 2))]
    results = Results()
    results.add("hao-dynamics", "dynamics", records)
    findings = EXPERIMENTS["hao-dynamics"].findings(results, n)
    assert [f.outcome for f in findings[:3]] == [REPRODUCED] * 3
    assert findings[0].estimate["mean"] == pytest.approx(0.3, abs=0.01)  # layers 3..5 minus 0..2: 0.45 - 0.15
    seeds = findings[3]
    assert seeds.estimate["n"] == 3 and seeds.outcome == INCONCLUSIVE  # flat across layers: the interval holds 0


def test_probe_findings_read_the_reinit_sweep_and_experiments_bring_what_they_need():
    assert [e.name for e in selected(["tamkin-probe"])] == ["tamkin-reinit", "tamkin-probe"]
    low, _ = thirds(6)
    assert thirds(6) == (2, 4) and thirds(12) == (4, 8)
    results = _reinit_results(lambda k, f, s: 0.25 + 0.2 * min(k, 2) / 2 + 0.002 * s)  # saturates at 2 layers
    probes = [_record(f"layer={layer},pooling={p}", s, f, {"layer": layer, "pooling": p, "control": False},
                      {"sst": 0.25 + 0.1 * layer / 6 + 0.001 * s})
              for layer in range(7) for p in ("mean", "cls-token") for s in (0, 1, 2) for f in (SMALL, LARGE)]
    probes += [_record(f"layer=6,pooling={p},random", s, f, {"layer": 6, "pooling": p, "control": True},
                       {"sst": 0.25 + 0.0005 * s}) for p in ("mean", "cls-token") for s in (0, 1, 2)
               for f in (SMALL, LARGE)]
    results.add("tamkin-probe", "probe", probes)
    below, more_layers = EXPERIMENTS["tamkin-probe"].findings(results, 6)[:2]
    assert below.outcome == REPRODUCED and below.estimate["mean"] == pytest.approx(0.35 - 0.45, abs=1e-3)
    # fine-tuning reaches all its gain with 2 layers, the probe a third of it
    assert more_layers.outcome == REPRODUCED and more_layers.estimate["mean"] == pytest.approx(1 - 1 / 3, abs=0.02)


def test_reproduce_runs_its_sweeps_writes_the_report_and_resumes(small_data_dir, tmp_path):
    out = tmp_path / "reproduce"
    argv = ["--only", "freeze-your-layers", "--data-dir", str(small_data_dir), "--out", str(out), "--max-steps", "1",
            "--precision", "fp32", "--device", "cpu"]
    code, stdout, err = run_cli(reproduce.main, argv)
    assert code == 0, err
    report = (out / "report.md").read_text()
    assert "Freeze Your Layers" in report and "| paper | finding |" in report
    saved = json.loads((out / "report.json").read_text())
    findings = saved["findings"]["freeze-your-layers"]
    assert len(findings) == 2 and all(f["estimate"]["n"] == 3 for f in findings)
    assert {f["outcome"] for f in findings} <= {REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE}
    for sweep in ("all-layers", "top-layers", "heads-only"):
        lines = (out / "freeze-your-layers" / sweep / "results.jsonl").read_text().splitlines()
        assert len(lines) == 3
    # a second run finds every trial finished and trains nothing
    code, stdout, err = run_cli(reproduce.main, argv)
    assert code == 0, err
    assert stdout.count("3 already finished") == 3 and "[1/3]" not in stdout


@pytest.mark.parametrize("argv, needle", [(["--only", "tamkin"], "no such experiment"),
                                          (["--seeds", "0"], "at least 2 seeds")])
def test_bad_arguments_exit_2_with_one_line(tmp_path, argv, needle):
    code, _, err = run_cli(reproduce.main, [*argv, "--out", str(tmp_path / "r")])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1

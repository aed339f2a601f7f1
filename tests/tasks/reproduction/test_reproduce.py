"""reproduce.py: the verdict rule on constructed intervals, the declarations' quotes against the papers, the
measures' units, the kept results (a follow-up never overwrites the first run), the report rebuilt from them
without training, and a small run end to end."""
import ast
import inspect
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import reproduce
from minbert import UserError
from tasks.ablation.config import SweepConfig
from tasks.ablation.statistics import crossed_interval, interval
from tasks.ablation.studies import STUDIES
from tasks.ablation.study import Shape
from tasks.fileio import read_jsonl
from tasks.reproduction import arms, curves, follow_ups, judging, lines, measures, plan, sweeps
from tasks.reproduction import experiments as reproduction
from tasks.reproduction import kept as reproduction_runs
from tasks.reproduction import report as reproduction_report
from tasks.reproduction.findings import BY_ID, FINDINGS, PAGES, PAPERS
from tasks.reproduction.findings import hao as hao_findings
from tasks.reproduction.findings import singh as singh_findings
from tasks.reproduction.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    NOT_TESTABLE,
    REPRODUCED,
    UNDERPOWERED,
    Estimate,
    Row,
    decide,
    judge,
)
from tests.helpers import run_cli
from tests.helpers.glue import task_file

CTX = reproduction.Context(6, reproduction.SCALES["cpu"], dict(reproduction.ROLES))
SMALL, LARGE = CTX.scale.small, CTX.scale.large



def _measure(finding_id: str, results) -> list:
    """The finding's rows, by the measure and keywords it declares."""
    finding = BY_ID[finding_id]
    return finding.measure(results, CTX, **finding.keywords)


def _declared(finding_id: str, results) -> list:
    """The rows of the finding as its paper's module first declared it (before the null subtracted, issue 54)."""
    finding = next(f for m in (singh_findings, hao_findings) for f in m.FINDINGS if f.id == finding_id)
    return finding.measure(results, CTX, **finding.keywords)


def _interval(low, high, mean=None):
    return Estimate(5, (low + high) / 2 if mean is None else mean, 1.0, low, high)


def test_the_rule_gives_each_verdict_on_constructed_intervals():
    sesoi = 0.02
    assert decide(_interval(0.01, 0.05, 0.03), sesoi) == REPRODUCED            # above 0, estimate reaches SESOI
    assert decide(_interval(0.005, 0.015), sesoi) == NOT_REPRODUCED            # real but bounded below the SESOI
    assert decide(_interval(-0.05, -0.01), sesoi) == NOT_REPRODUCED            # reversed
    assert decide(_interval(-0.01, 0.01), sesoi) == NOT_REPRODUCED             # absent: all of it below the SESOI
    assert decide(_interval(-0.01, 0.05), sesoi) == INCONCLUSIVE               # holds 0 and the SESOI
    # "reaches" is the point estimate: above zero but the best estimate short of the SESOI is not enough
    assert decide(_interval(0.001, 0.03, 0.015), sesoi) == INCONCLUSIVE
    assert decide(_interval(0.001, 0.03, 0.02), sesoi) == REPRODUCED
    assert decide(Estimate(1, 0.3), sesoi) == INCONCLUSIVE
    assert decide(None, sesoi) == NOT_RUN


def test_an_equivalence_is_reproduced_inside_the_margin_and_not_outside_it():
    assert decide(_interval(-0.005, 0.008), 0.01, "equivalence") == REPRODUCED
    assert decide(_interval(0.012, 0.03), 0.01, "equivalence") == NOT_REPRODUCED
    assert decide(_interval(-0.04, -0.01), 0.01, "equivalence") == NOT_REPRODUCED
    assert decide(_interval(-0.02, 0.005), 0.01, "equivalence") == INCONCLUSIVE


def test_several_rows_combine_by_intersection_union_and_bonferroni_where_each_side_needs_it():
    any_finding = BY_ID["college-not-monotone"]
    one = Estimate(5, 0.03, 0.01, 0.0176, 0.0424)
    alone = judge(any_finding, "first", [Row("a", one)])
    assert alone.outcome == REPRODUCED
    # "some row reverses" is a union: each row at 1 - 0.05/6 (Bonferroni); the row's own interval is unchanged
    six = judge(any_finding, "first", [Row(str(i), one) for i in range(6)])
    assert six.rows[0].adjusted.low < one.low
    assert six.rows[0].estimate.low == pytest.approx(one.low, abs=1e-4)
    # "every row fails" is an intersection-union test: each row at its own 95%, no correction
    flat = Estimate(5, 0.0, 0.005, -0.0062, 0.0062)
    assert judge(any_finding, "first", [Row(str(i), flat) for i in range(6)]).outcome == NOT_REPRODUCED
    all_finding = BY_ID["freeze-cross-encoding"]
    mixed = judge(all_finding, "first", [Row("sts", Estimate(5, 0.04, 0.005, 0.03, 0.05)),
                                         Row("quora", Estimate(5, -0.01, 0.005, -0.02, 0.0))])
    assert mixed.outcome == NOT_REPRODUCED
    both = judge(all_finding, "first", [Row(t, Estimate(5, 0.03, 0.005, 0.0238, 0.0362)) for t in ("sts", "quora")])
    assert both.outcome == REPRODUCED    # every row at its own 95%: the intersection-union needs no correction
    # a part of the quote not measured yet keeps an all-rows finding from reading reproduced
    pending = judge(all_finding, "first", [*both.rows, Row("a part not run", None, pending="some-follow-up")])
    assert pending.outcome == INCONCLUSIVE and pending.rows[-1].verdict == NOT_RUN
    assert judge(BY_ID["college-wnli"], "first", []).outcome == NOT_TESTABLE


def test_an_equivalence_reads_the_90_percent_interval_tost():
    finding = BY_ID["freeze-smart-multitask"]
    estimate = Estimate(5, 0.0, 0.007, df=4)
    row = judge(finding, "first", [Row("a", estimate)]).rows[0]
    assert row.estimate.level == 0.90
    assert row.estimate.high == pytest.approx(2.131847 * 0.007 / math.sqrt(5), abs=1e-6)
    assert row.verdict == REPRODUCED   # the 95% interval (+/- 0.0087) would also fit; at sd 0.0085 only the 90%
    wider = judge(finding, "first", [Row("a", replace(estimate, std=0.0085))]).rows[0]
    assert wider.verdict == REPRODUCED and 2.776445 * 0.0085 / math.sqrt(5) > 0.01


def test_power_says_what_a_design_can_decide_and_labels_an_underpowered_line():
    from tasks.reproduction import power
    # the arithmetic: a 95% interval fits inside +/- 0.01 at n = 5 only below sd ~0.008
    assert 2.776445 * 0.008 / math.sqrt(5) < 0.01 < 2.776445 * 0.0081 / math.sqrt(5)
    tight = power.reach(0.004, 5, 0.01, "equivalence")
    assert tight.powered and power.reach(0.02, 5, 0.01, "equivalence").powered is False
    assert power.needs(0.02, 0.01, "equivalence") > 5
    direction = power.reach(0.01, 5, 0.02)
    assert direction.reproduced_from >= 0.02 and direction.not_reproduced_below > 0 and direction.powered
    assert not power.reach(0.03, 5, 0.02).powered and power.needs(0.03, 0.02) > 5
    finding = BY_ID["freeze-smart-multitask"]
    v = power.apply(judge(finding, "first", [Row("a", Estimate(5, 0.0, 0.02, df=4))]), CTX.scale)
    assert v.outcome == UNDERPOWERED and power.label(v.power).startswith("underpowered at n = 5, needs n >= ")
    # a powered design keeps its inconclusive; a decided interval keeps its verdict whatever the power
    decided = power.apply(judge(finding, "first", [Row("a", Estimate(5, 0.05, 0.02, df=4))]),
                          CTX.scale)
    assert decided.outcome == NOT_REPRODUCED


PAPERS_DIR = Path(__file__).resolve().parents[4] / "shared" / "papers"


def normalise(text: str) -> str:
    """Whitespace collapsed, so a quote matches across the paper's line breaks."""
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize("finding", FINDINGS, ids=[f.id for f in FINDINGS])
def test_every_quote_is_verbatim_in_its_paper(finding):
    path = PAPERS_DIR / finding.paper
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    assert normalise(finding.quote) in normalise(path.read_text(encoding="utf-8")), \
        f"{finding.id}: the quote is not in {finding.paper}"


def test_every_declaration_is_complete_and_wired():
    for f in FINDINGS:
        assert f.sesoi > 0 and f.sesoi_reason and f.setting and f.comparison and f.model_note, f.id
        if f.experiment is None:
            assert f.untestable, f.id
        else:
            assert f.experiment in reproduction.EXPERIMENTS and callable(f.measure), f.id
            inspect.signature(f.measure).bind(None, CTX, **f.keywords)  # its keywords fit
    papers = {f.paper for f in FINDINGS}
    assert papers == set(PAPERS) and all(sum(f.paper == p for f in FINDINGS) >= 4 for p in papers)


def _record(config, seed, fraction, params=None, dev=None, curves=None, group=None, info=None, key=None,
            mode="reinit"):
    return {"key": key or f"{config}-{seed}-{fraction}", "config": config, "group": group or config, "seed": seed,
            "data_fraction": fraction, "params": params or {}, "dev": dev or {}, "curves": curves, "info": info,
            "status": "ok", "mode": mode}


def _reinit(score, seeds=range(5)) -> list:
    return {f: [_record(f"from={k}", s, f, {"scheme": "from", "from": k}, {"sst": score(k, f, s)})
                for k in range(7) for s in seeds] for f in (SMALL, LARGE)}


def _results(score) -> measures.Results:
    results, by_fraction = measures.Results(), _reinit(score)
    results.add("reinit-small", "reinit", by_fraction[SMALL])
    results.add("reinit-large", "reinit", by_fraction[LARGE])
    return results


def test_reinit_measures_are_signed_to_the_papers_direction():
    def concave(k, fraction, seed):  # pretraining helps, and the upper layers help more with more data
        top = 0.45 if fraction == LARGE else 0.32
        return 0.25 + (top - 0.25) * (k / 6) ** (0.5 if fraction == LARGE else 0.2) + 0.003 * seed
    results = _results(concave)
    scarce = measures.singh_scarce(results, CTX)[0]
    assert scarce.estimate.mean == pytest.approx(0.07) and decide(scarce.estimate, 0.02) == REPRODUCED
    tamkin = measures.tamkin_data_size(results, CTX)[0]
    assert tamkin.estimate.mean > 0.02
    flat = _results(lambda k, f, s: 0.4 + 0.002 * s)   # pretraining does nothing
    assert decide(measures.singh_scarce(flat, CTX)[0].estimate, 0.02) == NOT_REPRODUCED
    assert len(measures.college_not_monotone(results, CTX)) == 6


def test_permutation_interval_carries_the_originals_noise_seeds_and_orders_both():
    rng = np.random.default_rng(0)
    records = [_record("order=0-1-2-3-4-5", s, LARGE, {"original": True}, {"sst": 0.45 + 0.01 * s})
               for s in range(3)]
    effects = [0.02, 0.05, 0.01, 0.08, 0.03, 0.04]
    for i, effect in enumerate(effects):
        records += [_record(f"order=random{i}", s, LARGE, {"random": True},
                            {"sst": 0.45 + 0.01 * s - effect + 0.002 * rng.standard_normal()}) for s in range(3)]
    results = measures.Results()
    results.add("permute", "permute", records)
    row = measures.tamkin_permute(results, CTX)[0]
    assert row.estimate.n == 3 and f"{len(effects)} orders x 3 seeds" in row.label
    members = [{s: r["dev"]["sst"] for s, r in zip(range(3), records[3 + 3 * i:6 + 3 * i])}
               for i in range(len(effects))]
    assert row.estimate == Estimate.of(crossed_interval(members, {s: 0.45 + 0.01 * s for s in range(3)}))
    per_order = interval([np.mean([0.45 + 0.01 * s - m[s] for s in range(3)]) for m in members])
    assert row.estimate.low <= per_order["ci95_low"]    # never narrower than the order as the unit


def test_the_probe_layer_is_chosen_on_held_out_training_data_not_dev():
    records = []
    for layer in range(7):
        for s in range(5):
            dev = 0.4 if layer == 5 else 0.3        # dev would pick layer 5
            held = 0.5 if layer == 3 else 0.35      # the held-out training share picks layer 3
            info = {"penalty": {"sst": 1.0}, "holdout_score": {"sst": held}}   # at the penalty chosen on it
            records.append(_record(f"layer={layer},pooling=mean", s, LARGE, {"layer": layer}, {"sst": dev},
                                   info=info))
    results = measures.Results()
    results.add("probe", "probe", records)
    assert measures.best_probe(results, CTX, LARGE) == (3, "mean")


def test_dynamics_ratios_compare_thirds_and_jackknife_seed_pairs():
    growing = [0.1 * (i + 1) for i in range(6)]
    rng = np.random.default_rng(0)
    records = [_record("finetune", s, LARGE, {"kind": "finetune"}, None,
                       {"weight_l2": [v + 0.01 * rng.random() for v in growing],
                        "attention_js": [v + 0.01 * rng.random() for v in growing],
                        "svcca": [0.0] + [v + 0.01 * rng.random() for v in growing]}) for s in range(5)]
    records += [_record(f"seeds={a}-{b}", a, LARGE, {"kind": "seeds", "seeds": [a, b]}, None,
                        {"svcca": [0.0] + [0.3 + 0.01 * rng.random() for _ in growing]}, group="seed-vs-seed")
                for a in range(5) for b in range(a + 1, 5)]
    results = measures.Results()
    results.add("dynamics", "dynamics", records)
    small, later = _declared("singh-later-layers-move", results)   # a row per fraction: "in all experiments"
    assert small.estimate is None and "0.25" in later.label
    assert later.estimate.mean == pytest.approx(0.55 / 0.15 - 1, rel=0.05)
    invariant = measures.singh_early_invariant(results, CTX)[0]
    assert invariant.estimate.mean == pytest.approx(1 - 0.15 / 0.55, rel=0.05)
    seeds = _declared("hao-seeds-consistent-low", results)[0]
    assert seeds.estimate.n == 5 and decide(seeds.estimate, 0.5) == NOT_REPRODUCED   # flat: no layer pattern


def _run(experiment, label, seeds, **fields):
    return reproduction_runs.KeptRun(experiment, label, 1, "cpu", "minilm", dict(reproduction.ROLES), list(seeds), 6,
                                     {"reinit": ["--x"]}, **fields)


def _sitting(**fields):
    return reproduction_runs.Sitting(**{"date": "2026-11-29 10:00 UTC", "commit": "abc", "machine": "test CPU",
                                        "wall_time_s": 60.0, "trials": 0, **fields})


def test_a_follow_up_never_overwrites_the_first_run(tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    weak = _reinit(lambda k, f, s: 0.40 + 0.002 * k + 0.01 * (s % 2), seeds=range(3))     # first: small effect
    reproduction_runs.store(results_dir, _run("reinit-small", "first", range(3)), {"reinit": weak[SMALL]}, _sitting())
    reproduction_runs.store(results_dir, _run("reinit-large", "first", range(3)), {"reinit": weak[LARGE]}, _sitting())
    strong = _reinit(lambda k, f, s: 0.30 + 0.02 * k + 0.001 * s)
    # more seeds under the first run's label: refused, whatever the records say
    with pytest.raises(UserError, match="follow-up"):
        reproduction_runs.store(results_dir, _run("reinit-small", "first", range(5)), {"reinit": strong[SMALL]},
                                _sitting())
    # the same protocol resumed: a kept trial is never replaced, only missing ones are added
    changed = [dict(r, dev={"sst": 0.99}) for r in weak[SMALL]]
    reproduction_runs.store(results_dir, _run("reinit-small", "first", range(3)), {"reinit": changed}, _sitting())
    kept = read_jsonl(results_dir / "reinit-small" / "first" / "reinit.jsonl")
    assert all(r["dev"]["sst"] < 0.99 for r in kept)
    # a declared follow-up has its own folder; the report shows both verdicts
    follow = follow_ups.FollowUp("five-seeds", ("reinit-small",), "test: five seeds")
    monkeypatch.setitem(follow_ups.FOLLOW_UPS, "five-seeds", follow)
    reproduction_runs.store(results_dir, _run("reinit-small", "five-seeds", range(5)), {"reinit": strong[SMALL]},
                            _sitting())
    by_run = judging.verdicts(reproduction_runs.load(results_dir), CTX)
    first, second = by_run["first"]["singh-scarce"], by_run["five-seeds"]["singh-scarce"]
    assert first.outcome == NOT_REPRODUCED and second.outcome == REPRODUCED
    report = reproduction_report.write(results_dir, tmp_path / "report.md", CTX).read_text()
    line = _finding_rows(tmp_path, "singh-scarce")
    assert len(line) == 2 and "first (declared, headline, protocol 1)" in line[0]
    assert "five-seeds (sensitivity, not counted, protocol 2)" in line[1]
    assert "**not reproduced**" in line[0] and "**reproduced**" in line[1]
    front = next(x for x in report.splitlines() if x.startswith("| [singh-scarce]"))   # the headline: the first's
    assert front.split(" | ")[2].startswith("**not reproduced**") and "unlike the first run**: holds" in front


def _finding_rows(folder, finding_id: str) -> list:
    """A finding's run rows on its paper's page."""
    page = (folder / f"{PAGES[BY_ID[finding_id].paper]}.md").read_text()
    section = page.split(f'<a id="{finding_id}"></a>')[1].split("\n## ")[0]
    return [x for x in section.splitlines() if x.startswith("| ") and not x.startswith(("| run |", "|---"))]


def test_report_only_rebuilds_the_report_from_kept_results_without_training(tmp_path, monkeypatch):
    results_dir, report = tmp_path / "results", tmp_path / "report.md"
    rows = _reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)
    for name, fraction in (("reinit-small", SMALL), ("reinit-large", LARGE)):
        reproduction_runs.store(results_dir, _run(name, "first", range(5)), {"reinit": rows[fraction]}, _sitting())
    monkeypatch.setattr(reproduce, "run_experiment", lambda *a: pytest.fail("--report-only trained"))
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--report-only loaded the model"))
    code, out, err = run_cli(reproduce.main, ["--report-only", "--results", str(results_dir), "--report", str(report)])
    assert code == 0, err
    text = report.read_text()
    for f in FINDINGS:
        assert f"| [{f.id}]" in text
    scarce = next(x for x in text.splitlines() if x.startswith("| [singh-scarce]"))
    assert "**reproduced**" in scarce and "+0.180" in scarce
    assert "**not run yet**" in _finding_rows(tmp_path, "tamkin-permute")[0]
    assert "**not testable here**" in _finding_rows(tmp_path, "college-wnli")[0]
    runs = (tmp_path / "runs.md").read_text()
    assert "1.0 min wall" in runs


def test_the_plan_shows_what_a_kept_run_took_beside_its_estimate(tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    rows = [dict(r, device="cpu") for r in _reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)[SMALL]]
    reproduction_runs.store(results_dir, _run("reinit-small", "first", range(5)), {"reinit": rows[:20]}, _sitting())
    reproduction_runs.store(results_dir, _run("reinit-small", "first", range(5)), {"reinit": rows},
                            _sitting(wall_time_s=30.0))   # a second sitting adds its time
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--plan loaded the model"))
    code, out, err = run_cli(reproduce.main, ["--plan", "--results", str(results_dir)])
    assert code == 0, err
    lines = {x.split(":")[0]: x for x in out.splitlines()}
    assert "first run took 1.5 min on cpu" in lines["reinit-small"]
    assert "took" not in lines["reinit-large"] and "--only reinit-large" in lines["reinit-large"]


def test_reproduce_runs_its_sweeps_keeps_their_results_and_resumes(small_data_dir, tmp_path):
    results_dir = tmp_path / "results"
    argv = ["--only", "pairs", "--data-dir", str(small_data_dir), "--out", str(tmp_path / "runs"), "--max-steps", "1",
            "--seeds", "2", "--results", str(results_dir), "--report", str(tmp_path / "report.md"),
            "--precision", "fp32", "--device", "cpu"]
    code, stdout, err = run_cli(reproduce.main, argv)
    assert code == 0, err
    run = json.loads((results_dir / "pairs" / "first" / "run.json").read_text())
    assert run["seeds"] == [0, 1] and run["scale"] == "cpu" and run["model"] == "minilm"
    assert len(run["sittings"]) == 1 and run["sittings"][0]["trials"] == 8
    assert run["schema"] == reproduction_runs.SCHEMA
    for sweep in ("sts-cross", "sts-siamese", "quora-cross", "quora-siamese"):
        assert len(read_jsonl(results_dir / "pairs" / "first" / f"{sweep}.jsonl")) == 2
    assert "| [freeze-cross-encoding]" in (tmp_path / "report.md").read_text()
    code, stdout, err = run_cli(reproduce.main, argv)   # a second sitting finds every trial finished
    assert code == 0, err
    run = json.loads((results_dir / "pairs" / "first" / "run.json").read_text())
    assert [s["trials"] for s in run["sittings"]] == [8]   # a sitting that added nothing is not kept


def test_shards_of_a_run_each_keep_their_trials_and_the_run_its_device_and_weights(small_data_dir, tmp_path):
    results_dir = tmp_path / "results"
    argv = ["--only", "pairs", "--data-dir", str(small_data_dir), "--out", str(tmp_path / "runs"), "--max-steps", "1",
            "--seeds", "3", "--results", str(results_dir), "--report", str(tmp_path / "report.md"),
            "--precision", "fp32", "--device", "cpu"]
    for shard in ("1/2", "2/2"):
        code, stdout, err = run_cli(reproduce.main, [*argv, "--shard", shard])
        assert code == 0, err
        if shard == "1/2":   # --gather keeps what the folders hold and trains nothing: here, shard 1's trials
            gathered = [*argv[:argv.index("--results")], "--results", str(tmp_path / "gathered"), "--report",
                        str(tmp_path / "gathered.md"), "--precision", "fp32", "--device", "cpu", "--gather"]
            code, stdout, err = run_cli(reproduce.main, gathered)
            assert code == 0, err
            run = reproduction_runs.read_run(tmp_path / "gathered" / "pairs" / "first" / "run.json")
            assert 0 < run.sittings[0].trials < 12 and "nothing trained" in stdout
            assert "**Unfinished**" in (tmp_path / "gathered.md").read_text()
    run = reproduction_runs.read_run(results_dir / "pairs" / "first" / "run.json")
    first, second = run.sittings
    assert 0 < first.trials < 12 and first.trials + second.trials == 12   # 3 seeds x 4
    assert run.device == "cpu" and run.weights == sweeps.weights_of("minilm") and len(run.weights) == 12
    assert "trained on cpu from weights " + run.weights in (tmp_path / "runs.md").read_text()


def _kept_pair_run(tmp_path, device="cpu", weights="a" * 12):
    """A kept run of five trials trained on `device` from `weights`, and its sweep file."""
    rows = [dict(r, device=f"{device}:0" if device == "cuda" else device)
            for r in _reinit(lambda k, f, s: 0.25 + 0.01 * s)[SMALL][:5]]
    reproduction_runs.store(tmp_path, _run("reinit-small", "first", range(5), weights=weights), {"reinit": rows},
                            _sitting())
    return tmp_path / "reinit-small" / "first" / "reinit.jsonl", rows


def test_a_kept_run_refuses_trials_from_other_weights_or_another_kind_of_device(tmp_path):
    """Arms paired by seed differ only by the arm: a run's trials all train on one kind of device, from one set
    of weights; a refused sitting writes nothing, and the check also comes before anything trains."""
    sweep_file, rows = _kept_pair_run(tmp_path)
    before = sweep_file.read_bytes()
    fresh = [dict(r, key=r["key"] + "-new") for r in rows]
    with pytest.raises(UserError, match="other weights"):
        reproduction_runs.store(tmp_path, _run("reinit-small", "first", range(5), weights="0" * 12),
                                {"reinit": fresh}, _sitting())
    with pytest.raises(UserError, match="trained on cpu, these on cuda"):
        reproduction_runs.store(tmp_path, _run("reinit-small", "first", range(5), weights="a" * 12),
                                {"reinit": [dict(r, device="cuda:0") for r in fresh]}, _sitting())
    assert sweep_file.read_bytes() == before
    with pytest.raises(UserError, match="other weights"):
        reproduction_runs.refuse_mixing(tmp_path, "reinit-small", "first", "0" * 12, "cpu")
    with pytest.raises(UserError, match="trained on cpu, these on cuda"):
        reproduction_runs.refuse_mixing(tmp_path, "reinit-small", "first", "a" * 12, "cuda")
    reproduction_runs.refuse_mixing(tmp_path, "reinit-small", "first", "a" * 12, "")   # --gather trains nothing
    stranger = [dict(r, fingerprint="f" * 16, key=r["key"] + "-x") for r in rows]   # other training options
    reproduction_runs.store(tmp_path / "other", _run("reinit-small", "first", range(5)),
                            {"reinit": [dict(rows[0], fingerprint="e" * 16)]}, _sitting())
    with pytest.raises(UserError, match="fingerprint"):
        reproduction_runs.store(tmp_path / "other", _run("reinit-small", "first", range(5)), {"reinit": stranger},
                                _sitting())
    reproduction_runs.store(tmp_path, _run("reinit-small", "first", range(5), weights="a" * 12), {"reinit": fresh},
                            _sitting())
    run = reproduction_runs.read_run(tmp_path / "reinit-small" / "first" / "run.json")
    assert [s.trials for s in run.sittings] == [5, 5] and (run.device, run.weights) == ("cpu", "a" * 12)
    unrecorded = tmp_path / "unrecorded"      # a run kept before weights were recorded never claims a later one's
    reproduction_runs.store(unrecorded, _run("reinit-small", "first", range(5)), {"reinit": rows[:2]}, _sitting())
    reproduction_runs.store(unrecorded, _run("reinit-small", "first", range(5), weights="b" * 12), {"reinit": rows},
                            _sitting())
    assert reproduction_runs.read_run(unrecorded / "reinit-small" / "first" / "run.json").weights == ""


def test_a_kept_run_is_one_typed_record_read_back_as_written_and_an_old_one_is_refused(tmp_path):
    _kept_pair_run(tmp_path, device="cuda")
    path = tmp_path / "reinit-small" / "first" / "run.json"
    run = reproduction_runs.read_run(path)
    assert run == _run("reinit-small", "first", range(5), weights="a" * 12, device="cuda",
                       sittings=[_sitting(trials=5)])
    reproduction_runs.write_run(path, run)
    assert reproduction_runs.read_run(path) == run
    old = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("schema", "device", "weights")}
    path.write_text(json.dumps(old))
    with pytest.raises(UserError, match=r"run.json: a kept run of schema 1, this code reads schema 4"):
        reproduction_runs.load(tmp_path)
    code, _, err = run_cli(reproduce.main, ["--report-only", "--results", str(tmp_path), "--report",
                                            str(tmp_path / "r.md")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err


def test_a_run_kept_unfinished_says_so_on_its_experiment_and_its_lines(tmp_path):
    rows = _reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)
    cut = [r for r in rows[SMALL] if not (r["group"] == "from=3" and r["seed"] >= 3)]   # one arm lacks seeds 3, 4
    reproduction_runs.store(tmp_path / "results", _run("reinit-small", "first", range(5)), {"reinit": cut},
                            _sitting())
    meta, sweeps = reproduction_runs.load(tmp_path / "results")["first"]["reinit-small"]
    assert curves.unfinished(meta, {**sweeps, "other": []})[-1] == "other: no trials"   # a sweep never started
    reproduction_runs.store(tmp_path / "results", _run("reinit-large", "first", range(5)), {"reinit": rows[LARGE]},
                            _sitting())
    reproduction_report.write(tmp_path / "results", tmp_path / "report.md", CTX)
    assert "**Unfinished**: reinit from=3: seeds [0, 1, 2] of 5" in (tmp_path / "runs.md").read_text()
    scarce = _finding_rows(tmp_path, "singh-scarce")[0]
    assert "its run is unfinished" in scarce      # singh-scarce reads reinit-small
    data = json.loads((tmp_path / "report.json").read_text())
    assert {e["finding"]: e["unfinished_run"] for e in data["lines"]}["singh-scarce"] is True


def test_a_run_says_where_its_trials_trained_even_when_another_machine_kept_them(tmp_path):
    rows = _reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)[SMALL]
    gpu = [dict(r, device="cuda:0") for r in rows]     # trained on a device, gathered and kept on a CPU
    reproduction_runs.store(tmp_path / "results", _run("reinit-small", "first", range(5)), {"reinit": gpu},
                            _sitting(wall_time_s=5.0))
    run, _ = reproduction_runs.load(tmp_path / "results")["first"]["reinit-small"]
    assert run.device == "cuda" and run.sittings[0].machine == "test CPU"
    text = reproduction_report.write(tmp_path / "results", tmp_path / "report.md", CTX).with_name("runs.md").read_text()
    assert "trained on cuda, 0.1 min wall" in text


@pytest.mark.parametrize("argv, needle", [(["--only", "tamkin"], "no such experiment"),
                                          (["--seeds", "3"], "follow-up"),
                                          (["--max-steps", "1"], "--results"),
                                          (["--follow-up", "nope"], "not declared"),
                                          (["--tasks", "third=x"], "no role")])
def test_bad_arguments_exit_2_with_one_line(tmp_path, argv, needle):
    code, _, err = run_cli(reproduce.main, [*argv, "--out", str(tmp_path / "r")])
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_every_experiment_that_fine_tunes_has_an_estimate_on_each_measured_device():
    for e in reproduction.EXPERIMENTS.values():
        for device in ("cpu", "cuda"):
            assert plan.experiment_minutes(e, CTX, device) > 0 or e.name == "probe", e.name
    assert plan.experiment_minutes(reproduction.EXPERIMENTS["probe"], CTX) == 0       # probes train no steps
    paper = reproduction.Context(12, reproduction.SCALES["paper"], dict(reproduction.ROLES))
    assert plan.experiment_minutes(reproduction.EXPERIMENTS["reinit-small"], paper) is None   # no measured rate


def _config(spec, scale, follow=None, seeds=(0, 1), setting=None):
    """The SweepConfig a sweep of the reproduction runs: built directly, no command line in between."""
    settings = sweeps.protocol(spec, scale, follow)
    return sweeps.sweep_config(spec.mode, settings, setting or sweeps.Setting("minilm"), seeds, "unused")


@pytest.mark.parametrize("scale", list(reproduction.SCALES))
def test_every_experiments_sweeps_build_a_sweep_config_and_list_their_trials(scale):
    ctx = reproduction.Context(6, reproduction.SCALES[scale], dict(reproduction.ROLES))
    for e in reproduction.EXPERIMENTS.values():
        seeds = reproduction.seeds_of(e, ctx.scale)
        for spec in e.sweeps(ctx):
            config = _config(spec, ctx.scale, seeds=seeds)
            assert isinstance(config, SweepConfig) and config.mode == spec.mode
            trials = config.study.trials(config, Shape(num_layers=6, num_heads=12))
            assert trials, f"{e.name}/{spec.label}: no trials"
            assert {t.seed for t in trials} <= set(seeds) and list(config.seeds) == seeds, f"{e.name}/{spec.label}"
            assert config.plateau.patience == (3 if scale == "cpu" else 0), f"{e.name}/{spec.label}"


def test_the_kept_runs_protocols_are_the_ones_the_declarations_write():
    """run.json records each sweep as ablate.py's flags; the typed declarations write the same, so a later sitting
    of a kept run is the same protocol (kept.store refuses another)."""
    runs = reproduction_runs.load(Path(__file__).resolve().parents[3] / reproduce.RESULTS)
    checked = 0
    for label, by_experiment in runs.items():
        follow = follow_ups.FOLLOW_UPS.get(label)
        for name, (meta, _) in by_experiment.items():
            ctx = reproduction.Context(meta.layers, reproduction.SCALES[meta.scale], meta.tasks)
            for spec in reproduction.EXPERIMENTS[name].sweeps_for(ctx, label, runs):  # a control's own, where it has
                written = sweeps.as_arguments(spec.mode, sweeps.protocol(spec, ctx.scale, follow))
                assert written == meta.sweeps[spec.label], f"{name}/{label}/{spec.label}"
                checked += 1
    assert checked >= 20


def test_every_declared_follow_up_names_real_experiments_and_its_options_reach_their_sweeps():
    for follow in follow_ups.FOLLOW_UPS.values():
        assert follow.label != follow_ups.FIRST and follow.reason and follow.protocol > 1
        for name in follow.experiments:
            e = reproduction.EXPERIMENTS[name]
            for spec in e.sweeps(CTX):
                config = _config(spec, CTX.scale, follow, reproduction.seeds_of(e, CTX.scale))
                assert config.study.trials(config, Shape(num_layers=6, num_heads=12)), f"{follow.label}/{name}"
    cap = follow_ups.FOLLOW_UPS["cap-small-data"]
    spec = reproduction.EXPERIMENTS["reinit-small"].sweeps(CTX)[0]
    assert _config(spec, CTX.scale, cap).plateau.patience == 0  # the follow-up's setting wins over the scale's


def test_a_cost_estimate_is_trials_x_steps_x_the_measured_seconds_a_step():
    """Seeds come from the experiment (or its scale) alone: the estimate lists the trials at those seeds; a
    follow-up's cap or epochs set its steps, a transfer trial trains two stages."""
    rate = plan.seconds_per_step()[("cpu", "cpu")]
    e = reproduction.EXPERIMENTS["reinit-small"]
    trials = len(reproduction.seeds_of(e, CTX.scale)) * (CTX.n + 1)
    assert plan.experiment_minutes(e, CTX) == pytest.approx(trials * CTX.scale.expected_steps * rate / 60)
    three = reproduction.EXPERIMENTS["heads-top"]      # seeds=3: 3 x (12 heads + the unmodified model)
    assert plan.experiment_minutes(three, CTX, "cuda") == pytest.approx(
        3 * 13 * CTX.scale.expected_steps * plan.seconds_per_step()[("cpu", "cuda")] / 60)
    cap = follow_ups.FOLLOW_UPS["cap-small-data"]            # the plateau off: every trial trains the cap, 600
    assert plan.experiment_minutes(e, CTX, "cpu", cap, {}) == pytest.approx(trials * 600 * rate / 60)
    more = follow_ups.CONFIRMATORY                            # its own seeds per experiment: 14 here
    assert plan.experiment_minutes(e, CTX, "cpu", more, {}) == pytest.approx(
        len(more.seeds_for(e.name)) * (CTX.n + 1) * 350 * rate / 60) and len(more.seeds_for(e.name)) == 14
    epochs = follow_ups.FOLLOW_UPS["equal-epochs"]            # 3 epochs of SST at 0.03
    assert plan.experiment_minutes(e, CTX, "cpu", epochs, {}) == pytest.approx(
        trials * 3 * plan.STEPS_PER_EPOCH_AT_QUARTER * SMALL / 0.25 * rate / 60)
    transfer = reproduction.EXPERIMENTS["transfer"]
    listed = sweeps.listed_trials(transfer.sweeps(CTX)[0], CTX, range(5))
    two = sum(2 if t.params.get("via") or t.params.get("steps") == 2 else 1 for t in listed)
    assert plan.experiment_minutes(transfer, CTX) == pytest.approx(two * 350 * rate / 60) and two > len(listed)


def test_smart_and_surgery_are_methods_sweeps_paired_by_seed_with_one_baseline():
    specs = {s.label: s for s in reproduction.EXPERIMENTS["methods"].sweeps(CTX)}
    configs = {}
    for label, spec in specs.items():
        config = _config(spec, CTX.scale)
        assert config.training.pair_mode == "siamese" and config.training.task_heads == "report"
        configs[label] = sorted({t.label for t in STUDIES["methods"].trials(config, Shape(6, 12))})
    assert configs == {"multitask": ["method=baseline", "method=dominant", "method=smart"],
                       "sts": ["method=baseline", "method=smart"]}
    records = []
    for s in range(5):
        records += [_record("method=baseline", s, LARGE, {"method": "baseline"}, {"sts": 0.80, "overall": 0.60}),
                    _record("method=smart", s, LARGE, {"method": "smart"}, {"sts": 0.83, "overall": 0.605}),
                    _record("method=dominant", s, LARGE, {"method": "dominant"}, {"sts": 0.8, "overall": 0.58})]
    results = measures.Results()
    results.add("methods", "multitask", records)
    results.add("methods", "sts", [r for r in records if r["config"] != "method=dominant"])
    assert _measure("freeze-smart-sts", results)[0].estimate.mean == pytest.approx(0.03)
    assert _measure("freeze-smart-multitask", results)[0].estimate.mean == pytest.approx(0.005)
    assert _measure("freeze-surgery-no-effect", results)[0].estimate.mean == pytest.approx(-0.02)


def test_transfer_is_compared_with_direct_fine_tuning_at_twice_the_cap_and_says_the_steps_trained():
    records = []
    for s in range(5):
        records += [_record("via=none,final=sts", s, SMALL, {"via": None}, {"sts": 0.70}),
                    _record("via=none,final=sts,steps=x2", s, SMALL, {"via": None, "steps": 2}, {"sts": 0.78}),
                    _record("via=quora,final=sts", s, SMALL, {"via": "quora"}, {"sts": 0.80 + 0.001 * s})]
    results = measures.Results()
    results.add("transfer", "transfer", records)
    row = next(r for r in arms.college_transfer(results, CTX) if r.label.startswith("quora then sts"))
    assert "twice the cap" in row.label and row.estimate.mean == pytest.approx(0.022)
    stopped = [{**r, "steps": 200, "info": {"total_steps": 480}} if r["config"].startswith("via=quora") else
               {**r, "steps": 280} for r in records]
    results.add("transfer", "transfer", stopped)    # a plateau stops each arm: the label says what each trained
    row = next(r for r in arms.college_transfer(results, CTX) if r.label.startswith("quora then sts"))
    assert "transfer arm 480 (480-480) steps in all" in row.label and "280 (280-280) steps" in row.label


def test_tasks_model_and_task_file_reach_every_sweep(glue_dir):
    roles = reproduce.parse_roles("primary=cola,second=mrpc")
    assert roles["primary"] == "cola" and roles["second"] == "mrpc" and roles["final"] == "sts"
    assert reproduce.parse_roles("sst2,qnli")["second"] == "qnli"
    path = str(task_file(glue_dir[0]))
    args = reproduce.build_parser().parse_args(["--model", "bert-base-uncased", "--task-file", path,
                                                "--data-dir", str(glue_dir[0])])
    ctx = reproduction.Context(12, reproduction.SCALES["paper"], roles, model=args.model, task_file=path)
    spec = reproduction.EXPERIMENTS["reinit-large"].sweeps(ctx)[0]
    config = _config(spec, ctx.scale, setting=reproduce.setting_of(args))
    assert config.training.tasks == "cola" and config.training.model == "bert-base-uncased"
    assert config.training.task_file == path and config.training.lr == 2e-5 and config.trial_steps == 0
    assert config.options.from_layer == (None, *range(11, 0, -1), 0) and config.fractions == (1.0,)
    assert "--lr 2e-5" in " ".join(sweeps.as_arguments(spec.mode, sweeps.protocol(spec, ctx.scale, None)))


def test_head_reinitialisation_takes_the_seed_as_its_unit():
    records = [_record("from=6", s, LARGE, {"scheme": "from"}, {"sst": 0.45 + 0.01 * s * s}) for s in range(3)]
    for h in range(12):
        records += [_record(f"head=5:{h}", s, LARGE, {"scheme": "head", "layer": 5, "head": h},
                            {"sst": 0.45 + 0.01 * s + 0.001 * h}) for s in range(3)]
    results = measures.Results()
    results.add("heads-top", "heads", records)
    row = _measure("college-heads-top-help", results)[0]
    per_seed = [np.mean([0.01 * s + 0.001 * h for h in range(12)]) - 0.01 * s * s for s in range(3)]
    assert row.estimate.n == 3 and row.estimate.mean == pytest.approx(np.mean(per_seed))
    assert row.estimate.low == pytest.approx(interval(per_seed)["ci95_low"])
    bottom = measures.mean_over_heads(results, CTX, "heads-top", -1)[0].estimate
    assert bottom.mean == pytest.approx(-row.estimate.mean)
    assert bottom.low == pytest.approx(-row.estimate.high)


def _trial(group, rows, curve, fraction=0.03, metric="sst"):
    plateau = {"holdout_rows": {metric: rows}, "tolerance": 0.005, "metric": metric, "stopped": True}
    return {"mode": "reinit", "group": group, "config": group, "seed": 0, "data_fraction": fraction, "params": {},
            "steps": curve[-1][0],
            "budget": {"heldout_curve": [{"step": s, "score": v} for s, v in curve], "plateau": plateau}}


def test_the_budget_shows_learning_curves_and_flags_a_held_out_set_too_small_to_decide_a_plateau(tmp_path):
    curve = [(40, 0.30), (80, 0.42), (120, 0.38), (160, 0.42)]
    small = {"reinit": [_trial("from=0", 26, curve), _trial("from=6", 26, curve)]}
    large = {"reinit": [_trial("from=0", 400, curve, fraction=0.25)]}
    pearson = {"sts": [_trial("from=6", 26, curve, metric="sts")]}   # a correlation moves by no one sentence
    line = curves.budget_line(small)
    assert "Warning: sst: 26 held-out rows, so one sentence is 0.038 of accuracy" in line
    assert "Warning" not in curves.budget_line(large)
    assert "Warning" not in curves.budget_line(pearson)
    links = curves.learning_curve_link(tmp_path, "reinit-small", "first", small)
    assert links == ["![reinit-small (first): learning curves on held-out training rows]"
                     "(figures/reinit-small-first-learning-curves.png)"]
    assert (tmp_path / "figures" / "reinit-small-first-learning-curves.png").read_bytes()[:4] == b"\x89PNG"
    no_curves = {"reinit": [dict(_trial("from=0", 26, curve), budget={})]}
    assert curves.learning_curve_link(tmp_path, "x", "first", no_curves) == []


def test_a_probe_experiments_budget_says_probes_not_steps():
    probes = {"probe": [{**_record("layer=0,pooling=mean", s, 0.03, info={"converged": s == 0}, mode="probe"),
                         "steps": 0} for s in range(2)]}
    line = curves.budget_line(probes)
    assert "linear probes on frozen layers, 1 of 2 converged" in line and "steps trained" not in line


def test_reproduce_imports_no_script_and_passes_no_command_line_to_the_sweeps():
    tree = ast.parse((Path(__file__).resolve().parents[3] / "reproduce.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    scripts = {p.stem for p in Path(__file__).resolve().parents[3].glob("*.py")}
    assert not imported & scripts, imported & scripts
    assert "parse_args" not in inspect.getsource(sweeps)   # SweepConfigs are built, not parsed


def test_a_follow_ups_line_never_mixes_its_protocol_with_the_first_runs_arms():
    first = _reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)
    capped = _reinit(lambda k, f, s: 0.30 + 0.01 * k + (0.02 if f == SMALL else 0.0) + 0.002 * s)
    meta = _run("reinit-small", "first", range(5))
    runs = {"first": {"reinit-small": (meta, {"reinit": first[SMALL]}),
                      "reinit-large": (meta, {"reinit": first[LARGE]})},
            "lr-2e-5": {"reinit-large": (meta, {"reinit": capped[LARGE]})},           # reinit-small not run yet
            "cap-small-data": {"reinit-small": (meta, {"reinit": capped[SMALL]})},
            "cap-large-data": {"reinit-large": (meta, {"reinit": capped[LARGE]})}}
    by_run = judging.verdicts(runs, CTX)
    two = [f.id for f in FINDINGS if f.experiment == "reinit-large" and f.id in by_run["first"]
           and {e for e, _ in by_run["first"][f.id].reads} == {"reinit-small", "reinit-large"}]
    assert "tamkin-data-size" in two and "college-downstream-smaller-drop" in by_run["lr-2e-5"]   # reinit-large alone
    assert not set(two) & set(by_run["lr-2e-5"])              # a line reading reinit-small at 1e-4 waits for its run
    # cap-large-data pairs its capped 0.25 arms with cap-small-data's capped 0.03 arms, as its reason declares
    assert follow_ups.FOLLOW_UPS["cap-large-data"].over == ("cap-small-data",)
    line = by_run["cap-large-data"]["tamkin-data-size"]
    assert dict(line.reads) == {"reinit-large": "cap-large-data", "reinit-small": "cap-small-data"}
    capped_line = lines.disclosure(runs, line, "cap-large-data")
    assert "reinit-small (cap-small-data run)" in capped_line
    assert "reinit-small (first run)" in lines.disclosure(runs, by_run["first"]["tamkin-data-size"], "first")   # both
    assert "trained apart" not in capped_line
    # arms from runs trained on other devices or weights (a device's capped 0.03 arms): the line says so
    device = _run("reinit-small", "cap-small-data", range(5), device="cuda", weights="1ca95c81930f")
    runs["cap-small-data"]["reinit-small"] = (device, {"reinit": capped[SMALL]})
    runs["cap-large-data"]["reinit-large"] = (_run("reinit-large", "cap-large-data", range(5), device="cpu"),
                                              {"reinit": capped[LARGE]})
    again = judging.verdicts(runs, CTX)["cap-large-data"]["tamkin-data-size"]
    assert lines.disclosure(runs, again, "cap-large-data").endswith(
        "; its arms trained apart: reinit-large on cpu; reinit-small on cuda, from weights 1ca95c81930f")

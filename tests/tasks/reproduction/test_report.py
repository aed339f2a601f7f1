"""The reproduction report: regenerated from the kept results it is the committed one (report.json, the front
page, the paper pages and the README's counts: a change to the statistics, the declarations or the kept runs
that moves a verdict shows here as a diff of the committed report); and the report's rules on synthetic lines:
Holm over a family, the p-value that inverts a line's interval, "fragile" near the decision line, follow-ups never
in the headline counts, the null baseline's floored ratio; and every control declared with its minutes in --plan.
Each results folder holds one model and gets its own report: the embedded model's, and mini-20M's beside it."""
import json
import math
import shutil
from pathlib import Path

import pytest

import reproduce
from tasks.ablation.statistics import interval
from tasks.reproduction import curves, experiments, follow_ups, front, kept, lines, null_baseline, power, report
from tasks.reproduction.findings import BY_ID, FINDINGS, PAGES
from tasks.reproduction.judging import counts_line, counts_of
from tasks.reproduction.verdicts import (
    NOT_REPRODUCED,
    REPRODUCED,
    UNDERPOWERED,
    Finding,
    Row,
    judge,
)
from tests.helpers import run_cli
from tests.helpers.reproduction import LARGE, SMALL, finding_rows, kept_run, reinit, sitting

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "reproduction" / "results"
OTHER = ROOT / "docs" / "reproduction" / "mini-20M"     # another model's results folder and report
CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
NR = NOT_REPRODUCED


def _regenerated(committed: Path, out: Path, ctx, readme=None) -> dict:
    """The report regenerated into `out` from `committed`'s kept results: report.json and every page as committed."""
    shutil.copytree(committed / "figures", out / "figures")    # the sweeps' plots the runs page links
    report.write(committed / "results", out / "report.md", ctx, readme)
    fresh, kept_json = (json.loads(p.read_text()) for p in (out / "report.json", committed / "report.json"))
    assert fresh == kept_json
    for page in ("report.md", "runs.md", *(f"{name}.md" for name in PAGES.values())):
        assert (out / page).read_text() == (committed / page).read_text(), page
    front_page = (out / "report.md").read_text().splitlines()
    # 100 lines of 440 (from 90 of 400, issue 54): the page now says what SESOI, rows and revisions mean and which
    # lines await their confirmatory run, in the prose and the cells a reader needs them in
    assert len(front_page) <= 100 and all(len(x) <= 440 for x in front_page if x.startswith("|"))
    assert {entry["finding"] for entry in fresh["lines"]} == {f.id for f in FINDINGS}
    assert (out / report.FOREST).stat().st_size > 10_000
    return fresh


def test_the_report_regenerated_from_the_kept_results_is_the_committed_one(tmp_path):
    if not RESULTS.exists():
        pytest.skip("no kept results")
    committed = ROOT / "docs" / "reproduction"
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{report.README_START}\nstale\n{report.README_END}\n")
    (tmp_path / OTHER.name).mkdir()       # the other model's report the front page links
    shutil.copyfile(OTHER / "report.json", tmp_path / OTHER.name / "report.json")
    fresh = _regenerated(committed, tmp_path, CTX, readme)
    block = readme.read_text().split(report.README_START)[1].split(report.README_END)[0]
    assert block in (ROOT / "README.md").read_text()
    assert block.strip() == counts_line(fresh["counts_headline"])     # the embedded model's alone
    assert f"[{OTHER.name}]({OTHER.name}/report.md)" in (tmp_path / "report.md").read_text()


def test_the_other_models_report_regenerated_from_its_own_kept_results_is_the_committed_one(tmp_path):
    if not (OTHER / "results").exists():
        pytest.skip("no kept results of another model")
    runs = kept.load(OTHER / "results")
    (layers,) = kept.depths(runs)
    model = kept.identity_of(runs)        # its heads as its kept runs record them, as --report-only reads them
    ctx = experiments.Context(layers, experiments.SCALES["cpu"], dict(experiments.ROLES), model=model.name,
                              heads=model.heads)
    fresh = _regenerated(OTHER, tmp_path, ctx)
    assert fresh["model"] != CTX.model and fresh["pilot"] and "masked-token accuracy" in fresh["credentials"]


def _finding(fid="x", sesoi=0.01, kind="direction", combine="single"):
    return Finding(fid, "paper.txt", "q", "s", "c", "m", sesoi, "why", "t", "note", experiment="e", kind=kind,
                   combine=combine)


def _line(values, fid="x", sesoi=0.01, kind="direction", run="first"):
    return judge(_finding(fid, sesoi, kind), run, [Row("row", interval(values))])


def test_a_lines_p_value_inverts_its_interval():
    v = _line([0.02, 0.03, 0.01, 0.04, 0.025])
    p = front.p_value(v)
    assert 0 < p < 0.025 and v.outcome == REPRODUCED
    assert v.rows[0].estimate.at(1 - 2 * p).low == pytest.approx(0, abs=1e-12)   # the bound at 0
    tost = _line([0.001, -0.002, 0.003, 0.0, 0.001], kind="equivalence")
    inside = front.p_value(tost)
    assert inside < 0.05 and tost.outcome == REPRODUCED
    assert tost.rows[0].estimate.at(1 - 2 * inside).high == pytest.approx(0.01)   # the nearer margin


def test_holm_adjusts_a_family_and_keeps_only_what_survives():
    alone = _line([0.02, 0.004, 0.025, 0.002, 0.02], "weak")      # p 0.019: reproduced alone
    strong = _line([0.05, 0.051, 0.049, 0.052, 0.05], "strong")
    null = _line([0.0, 0.01, -0.01, 0.005, -0.004], "null")
    family = {"weak": alone, "strong": strong, "null": null}
    assert alone.outcome == REPRODUCED and front.holm({"weak": alone})["weak"][2] == REPRODUCED
    adjusted = front.holm(family)
    ps = sorted((front.p_value(v), fid) for fid, v in family.items())
    expected, running = {}, 0.0
    for i, (p, fid) in enumerate(ps):
        running = max(running, (3 - i) * p)
        expected[fid] = min(1.0, running)
    assert {fid: x[1] for fid, x in adjusted.items()} == pytest.approx(expected)
    assert adjusted["strong"][2] == REPRODUCED and adjusted["weak"][2] == "not after Holm"
    assert adjusted["null"][2] == null.outcome          # Holm only ever withdraws a "reproduced"
    assert "at most 0.08 false" in front.multiplicity(family, "m")    # 3 lines x 0.025


def test_a_bound_near_its_decision_line_is_fragile():
    near = _line([0.02, 0.004, 0.025, 0.002, 0.02])          # reproduced, its lower bound just above 0
    far = _line([0.05, 0.051, 0.049, 0.052, 0.05])
    assert near.outcome == REPRODUCED and 0 < near.rows[0].estimate.low <= front.FRAGILE * 0.01
    assert front.fragile(near) and not front.fragile(far)
    below = _line([0.007, 0.009, 0.008, 0.0085, 0.0075])     # not reproduced, the upper bound just under the SESOI
    assert below.outcome == NOT_REPRODUCED and front.fragile(below)
    assert not front.fragile(_line([-0.05, -0.051, -0.049, -0.052, -0.05]))


def _on(device: str) -> kept.KeptRun:
    return kept.KeptRun("e", "first", 1, "cpu", "minilm", {}, [0], 6, {}, device=device)


def test_follow_ups_are_never_counted_and_a_disagreement_is_said():
    first = _line([0.0, 0.02, -0.02, 0.01, -0.01], "x")
    later = _line([0.05, 0.051, 0.049, 0.052, 0.05], "x", run="lr-2e-5")
    by_run = {"first": {"x": first}, "lr-2e-5": {"x": later}}
    assert first.outcome != REPRODUCED and counts_of(by_run["first"])[REPRODUCED] == 0
    assert "0 reproduced" in front.multiplicity(by_run["first"], "m")
    said = front.sensitivity("x", by_run, kept.KeptRuns(), first)
    assert said == ["**unlike the first run**: holds with lr 2e-5"]
    first.reads = (("e", "first"),)
    later.reads = (("e", "lr-2e-5"),)
    runs = kept.KeptRuns({"first": {"e": kept.Kept(_on("cpu"), {"s": [{"device": "cpu"}]})},
                          "lr-2e-5": {"e": kept.Kept(_on("cuda"), {"s": [{"device": "cuda:0"}]})}})
    assert front.sensitivity("x", by_run, runs, first) == [
        "**unlike the first run**: holds with lr 2e-5 and the device changed together (cpu to cuda)"]


def test_a_confirmatory_headline_lists_the_first_run_as_its_pilot_and_never_itself():
    first = _line([0.0, 0.02, -0.02, 0.01, -0.01], "x")
    confirmatory = _line([0.05, 0.051, 0.049, 0.052, 0.05], "x", run="confirmatory")
    later = _line([0.05, 0.051, 0.049, 0.052, 0.05], "x", run="lr-2e-5")
    by_run = {"first": {"x": first}, "confirmatory": {"x": confirmatory}, "lr-2e-5": {"x": later}}
    assert front.sensitivity("x", by_run, kept.KeptRuns(), confirmatory) == [
        "**unlike the confirmatory run**: undecided with the first run (the pilot)", "holds with lr 2e-5"]


def test_the_null_baselines_ratio_floors_a_near_zero_denominator():
    curve = [3e-5, 4e-4, 6e-4]     # the bottom third's JS near zero
    assert null_baseline.ratio(curve, "top", "bottom", 0, 3) == pytest.approx(1 / null_baseline.FLOOR - 1)
    assert null_baseline.ratio([0.5, 1.0, 1.5], "top", "bottom", 0, 3) == pytest.approx(2.0)   # read as measured
    assert math.isfinite(null_baseline.ratio([0.0, 0.0, 1e-3], "top", "bottom", 0, 3))


def test_an_equivalences_power_cell_says_its_rule():
    v = _line([0.002, -0.02, 0.015, -0.01, 0.005], kind="equivalence")
    v.power = power.Power(5, 0.017, False, reproduced_within=-0.01, not_reproduced_beyond=0.033, needs=27)
    cell = power.describe(v.power, 0.01, "equivalence")
    assert "reproduced when the 90% interval lies within -/+ 0.01" in cell and "no effect is called" not in cell
    assert UNDERPOWERED not in cell


def test_report_only_rewrites_the_readme_block_and_report_json(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nstale counts\n{report.README_END}\nrest\n")
    counts = {"reproduced": 1, "not reproduced": 2}
    assert report.update_readme(readme, counts)
    assert readme.read_text() == (f"intro\n{report.README_START}\n3 findings, headline: 1 reproduced, 2 not "
                                  f"reproduced.\n{report.README_END}\nrest\n")
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not report.update_readme(plain, counts) and plain.read_text() == "no markers\n"


def test_the_plan_lists_every_control_with_its_minutes(monkeypatch):
    if not RESULTS.exists():
        pytest.skip("no kept results")
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--plan loaded the model"))
    code, out, err = run_cli(reproduce.main, ["--plan"])
    assert code == 0, err
    controls = ("cap-small-data", "cap-multitask", "cap-large-data", "transfer-siamese", "equal-epochs", "lr-2e-5",
                "freeze-paper-schedule", "task-dependence-matched", "tamkin-not-necessary", "smart-alone")
    for label in controls:  # pending with its minutes, or run everywhere it applies and shown as a kept run
        line = next((x for x in out.splitlines() if x.startswith(f"- {label} (declared, pending")), None)
        if line is None:
            assert f"; {label} run took " in out, label
            continue
        assert " min" in line and f"--follow-up {label}" in line and "needs first" not in line
    confirm = next((x for x in out.splitlines() if x.startswith("- confirmatory (declared, pending")), None)
    if confirm is not None:     # pending until its last experiment is kept whole, then listed as run
        assert " min in all" in confirm and "probe" in confirm.partition("ran already: ")[2]
    else:
        assert "; confirmatory run took " in out
    kept_runs = kept.load(RESULTS)
    for label, follow in follow_ups.FOLLOW_UPS.items():   # an experiment kept whole is never listed as pending
        line = next((x for x in out.splitlines() if x.startswith(f"- {label} (declared, pending")), "")
        for name in follow.experiments:
            whole = name in kept_runs.get(label, {}) and not curves.unfinished(*kept_runs[label][name])
            assert not (whole and f" {name} ~" in line.split("ran already")[0]), (label, name)


def test_an_undecided_line_names_the_row_that_left_it_undecided():
    from tasks.reproduction.verdicts import INCONCLUSIVE, Estimate, Row, Verdict
    finding = BY_ID["college-intermediate-task"]       # any pair reproduces it
    rows = [Row("quora then sts", Estimate(5, -0.013, low=-0.018, high=-0.008), NR),
            Row("sts then quora", Estimate(5, 0.003, low=-0.012, high=0.017), INCONCLUSIVE)]
    verdict = Verdict(finding, "transfer-siamese", rows, UNDERPOWERED, power.reach(0.025, 5, finding.sesoi))
    sentence = lines.decides(verdict)
    assert sentence.startswith("Underpowered: row 'sts then quora'") and "quora then sts" not in sentence
    decided = Verdict(finding, "transfer-siamese", [rows[0], Row("sts then quora", rows[1].estimate, NR)], NR)
    assert lines.decides(decided).startswith("Not reproduced: row 'quora then sts'")


def test_report_only_rebuilds_the_report_from_kept_results_without_training(tmp_path, monkeypatch):
    results_dir, report = tmp_path / "results", tmp_path / "report.md"
    rows = reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)
    for name, fraction in (("reinit-small", SMALL), ("reinit-large", LARGE)):
        kept.store(results_dir, kept_run(name, "first", range(5)), {"reinit": rows[fraction]}, sitting())
    monkeypatch.setattr(reproduce, "run_experiment", lambda *a: pytest.fail("--report-only trained"))
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--report-only loaded the model"))
    code, out, err = run_cli(reproduce.main, ["--report-only", "--results", str(results_dir), "--report",
                                              str(report)])
    assert code == 0, err
    text = report.read_text()
    for f in FINDINGS:
        assert f"| [{f.id}]" in text
    scarce = next(x for x in text.splitlines() if x.startswith("| [singh-scarce]"))
    assert "**reproduced**" in scarce and "+0.180" in scarce
    assert "**not run yet**" in finding_rows(tmp_path, "tamkin-permute")[0]
    assert "**not testable here**" in finding_rows(tmp_path, "college-wnli")[0]
    runs = (tmp_path / "runs.md").read_text()
    assert "1.0 min wall" in runs

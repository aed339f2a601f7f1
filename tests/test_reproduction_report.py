"""The reproduction report as issue 37 left it: the kept results' verdicts (pinned: a change to the statistics or
the declarations that moves one shows here), every part of a quote a row or a declared pending line, labels that
state the steps each arm trained, report.json beside report.md, the README's counts generated from it, and every
control declared with its minutes in --plan."""
import json
from pathlib import Path

import pytest

import reproduce
from conftest import run_cli
from tasks.reproduction import compare, experiments, follow_ups, kept, models, null_baseline, report
from tasks.reproduction.findings import BY_ID, FINDINGS
from tasks.reproduction.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED, UNDERPOWERED

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "reproduction" / "results"
CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
R, NR, U, NT = REPRODUCED, NOT_REPRODUCED, UNDERPOWERED, NOT_TESTABLE

FIRST_RUN = {  # issue 37's statistics on the kept first runs (its note has the before/after of each change)
    "tamkin-data-size": U, "tamkin-probe-not-sufficient": U, "tamkin-probe-not-necessary": NOT_RUN,
    "tamkin-probe-align": U, "tamkin-permute": R, "tamkin-blocks-sst": U, "singh-scarce": R, "singh-data-size": U,
    "singh-task-dependence": NR, "singh-later-layers-move": NR, "singh-early-invariant": NR,
    "singh-more-data-moves-more": NR, "singh-abstract-supervised": NR, "singh-probe-peak": U,
    "singh-probe-needs-more": U, "singh-cola-linear": NT, "hao-attention-last": R, "hao-svcca-intermediate-last": R,
    "hao-restore-low": NR, "hao-seeds-consistent-low": R, "hao-datasets-consistent-low": R,
    "hao-datasets-domains": NT, "college-intermediate-task": R, "college-downstream-smaller-drop": R,
    "college-not-monotone": U, "college-not-constant": U, "college-heads-top-help": U, "college-heads-bottom-hurt": U,
    "college-heads-4-9": NT, "college-wnli": NT, "freeze-improves-sts": NR, "freeze-marginal-sst-quora": U,
    "freeze-surgery-no-effect": NR, "freeze-smart-sts": NR, "freeze-smart-multitask": U,
    "freeze-cross-encoding": NR, "freeze-smart-alone": NOT_RUN}


CONTROLS = {  # the kept follow-ups' verdicts (lines they decide; resuming an unfinished one moves its pins, visibly)
    "cap-large-data": {"tamkin-data-size": NR, "singh-data-size": U, "singh-abstract-supervised": NR,
                       "college-downstream-smaller-drop": R, "college-not-monotone": U, "college-not-constant": U},
    "cap-multitask": {"freeze-surgery-no-effect": INCONCLUSIVE, "freeze-smart-sts": NR, "freeze-smart-multitask": R},
    "cap-small-data": {"singh-scarce": R, "singh-task-dependence": NR, "singh-later-layers-move": NR,
                       "singh-early-invariant": NR, "singh-more-data-moves-more": NR, "hao-attention-last": R,
                       "hao-svcca-intermediate-last": R, "hao-seeds-consistent-low": R, "college-intermediate-task": R},
    "equal-epochs": {"tamkin-data-size": R, "singh-scarce": R, "singh-data-size": NR, "singh-later-layers-move": NR,
                     "singh-early-invariant": NR, "singh-more-data-moves-more": R, "singh-abstract-supervised": NR,
                     "hao-attention-last": R, "hao-svcca-intermediate-last": R, "hao-seeds-consistent-low": R,
                     "college-downstream-smaller-drop": R, "college-not-monotone": U, "college-not-constant": R},
    "freeze-paper-schedule": {"freeze-improves-sts": NR, "freeze-marginal-sst-quora": U},
    "lr-2e-5": {"tamkin-data-size": U, "tamkin-permute": R, "tamkin-blocks-sst": R, "singh-scarce": R,
                "singh-data-size": NR, "singh-later-layers-move": R, "singh-early-invariant": NR,
                "singh-more-data-moves-more": NR, "singh-abstract-supervised": U, "hao-attention-last": R,
                "hao-svcca-intermediate-last": R, "hao-restore-low": NR, "hao-seeds-consistent-low": R,
                "college-intermediate-task": R, "college-downstream-smaller-drop": R, "college-not-monotone": U,
                "college-not-constant": U, "college-heads-top-help": U, "college-heads-bottom-hurt": U},
    "smart-alone": {"freeze-smart-alone": U},
    "tamkin-not-necessary": {"tamkin-probe-not-necessary": R},
    "task-dependence-matched": {"singh-task-dependence": NR},
    "transfer-siamese": {"college-intermediate-task": U},
}

SECOND_MODEL = {  # the MLM rung's kept runs, each line at its own pilot's power (docs/reproduction/README.md)
    "mini-20M-68e79841": {
        "first": {"tamkin-data-size": U, "tamkin-probe-not-sufficient": NR, "tamkin-probe-align": U,
                  "tamkin-permute": U, "tamkin-blocks-sst": U, "singh-scarce": NR, "singh-data-size": NR,
                  "singh-task-dependence": NR, "singh-later-layers-move": NR, "singh-early-invariant": NR,
                  "singh-more-data-moves-more": NR, "singh-abstract-supervised": NR, "singh-probe-peak": U,
                  "singh-probe-needs-more": U, "hao-attention-last": R, "hao-svcca-intermediate-last": R,
                  "hao-restore-low": NR, "hao-seeds-consistent-low": R, "hao-datasets-consistent-low": R,
                  "college-intermediate-task": NR, "college-downstream-smaller-drop": U, "college-not-monotone": U,
                  "college-not-constant": U, "college-heads-top-help": U, "college-heads-bottom-hurt": U,
                  "freeze-improves-sts": NR, "freeze-marginal-sst-quora": U, "freeze-surgery-no-effect": U,
                  "freeze-smart-sts": NR, "freeze-smart-multitask": U, "freeze-cross-encoding": NR},
        "hao-null-perturbation": {"singh-later-layers-move": NR, "hao-attention-last": NR,
                                  "hao-svcca-intermediate-last": R, "hao-seeds-consistent-low": NR,
                                  "hao-datasets-consistent-low": NR},
    },
}


@pytest.fixture(scope="module")
def kept_verdicts():
    if not RESULTS.exists():
        pytest.skip("no kept results")
    return report.verdicts(kept.load(RESULTS), CTX, null_baseline.load(RESULTS / report.NULL_FILE))


def test_the_kept_first_runs_give_the_pinned_verdicts(kept_verdicts):
    assert {fid: v.outcome for fid, v in kept_verdicts["first"].items()} == FIRST_RUN


def test_the_kept_controls_give_the_pinned_verdicts(kept_verdicts):
    found = {label: {fid: v.outcome for fid, v in by_finding.items() if v.outcome != NOT_RUN}
             for label, by_finding in kept_verdicts.items() if label in follow_ups.FOLLOW_UPS
             and not follow_ups.FOLLOW_UPS[label].reads}
    assert found == CONTROLS


def test_the_second_models_kept_runs_give_the_pinned_verdicts():
    if not (RESULTS / models.MODELS_DIR).exists():
        pytest.skip("no second model kept")
    found = {column.model.slug: {label: {fid: v.outcome for fid, v in by_finding.items()
                                         if v.outcome not in (NOT_RUN, NOT_TESTABLE)}
                                 for label, by_finding in column.by_run.items()}
             for column in compare.others(RESULTS, CTX, report.NULL_FILE)}
    assert found == SECOND_MODEL


def test_every_part_of_a_quote_is_a_row_or_a_declared_line(kept_verdicts):
    first = kept_verdicts["first"]
    later = [r.label for r in first["singh-later-layers-move"].rows]
    assert len(later) == 2 and "0.03" in later[0] and "0.25" in later[1]          # "in all experiments"
    assert first["singh-later-layers-move"].rows[0].verdict == REPRODUCED         # 0.03 holds, 0.25 fails
    assert [r.label.split(", ")[-1] for r in first["hao-seeds-consistent-low"].rows] == ["svcca", "attention_js"]
    assert len(first["hao-datasets-consistent-low"].rows) == 2
    for fid, follow in (("tamkin-probe-not-necessary", "tamkin-not-necessary"), ("freeze-smart-alone", "smart-alone")):
        assert first[fid].rows[0].pending == follow and follow in follow_ups.FOLLOW_UPS
        assert [f.id for f in follow_ups.FOLLOW_UPS[follow].declares] == [fid]   # its own measure, once it runs
    assert BY_ID["hao-datasets-domains"].untestable and BY_ID["college-not-constant"].measure
    abstract = first["singh-abstract-supervised"].rows[0].estimate
    assert abstract["mean"] == pytest.approx(-0.026, abs=5e-4)


def test_the_layer_ratios_against_the_null_baseline(kept_verdicts):
    if not (RESULTS / report.NULL_FILE).exists():
        pytest.skip("no kept null baseline")
    null = kept_verdicts["hao-null-perturbation"]
    pairs = REPRODUCED if (RESULTS / null_baseline.PAIRS_PATH.name).exists() else NOT_RUN   # the pair form's lines
    assert {fid: v.outcome for fid, v in null.items()} == {
        "hao-attention-last": REPRODUCED, "hao-svcca-intermediate-last": REPRODUCED,
        "singh-later-layers-move": NR, "hao-seeds-consistent-low": pairs, "hao-datasets-consistent-low": pairs}
    first = kept_verdicts["first"]["hao-attention-last"].rows[0].estimate
    against = null["hao-attention-last"].rows[0].estimate
    kept_null = null_baseline.load(RESULTS / report.NULL_FILE)["ratios"]["hao-attention-last"]["mean"]
    assert against["mean"] == pytest.approx(first["mean"] - kept_null)
    assert against["ci95_high"] - against["ci95_low"] > first["ci95_high"] - first["ci95_low"]   # the null's spread
    assert [r.verdict for r in null["singh-later-layers-move"].rows] == [REPRODUCED, NR]   # 0.03 holds, 0.25 not
    if pairs == REPRODUCED:   # both rows, SVCCA and JS, each minus the pair form's own spread
        assert [r.verdict for r in null["hao-seeds-consistent-low"].rows] == [REPRODUCED, REPRODUCED]


def test_labels_state_the_steps_each_arm_trained(kept_verdicts):
    transfer = kept_verdicts["first"]["college-intermediate-task"].rows[0].label
    assert "same total steps" not in transfer and "transfer arm 472 (400-560) steps in all" in transfer
    assert "same total steps" not in BY_ID["college-intermediate-task"].tested     # a cap, not the steps trained
    assert "direct arm (steps=x2) 272 (200-400) steps" in transfer
    explained = report.explain(kept.load(RESULTS), {"first": {"singh-more-data-moves-more":
                                                              kept_verdicts["first"]["singh-more-data-moves-more"]}})
    disclosed, sentence = explained["first"]["singh-more-data-moves-more"]
    assert "lr 1e-4" in disclosed and "bf16" in disclosed
    assert "at 0.03: 192 (160-240) steps" in disclosed and "at 0.25: 320 (280-360) steps" in disclosed
    assert sentence.startswith("Not reproduced: the 95% interval")


def test_the_readme_counts_are_the_reports():
    data = json.loads((ROOT / "docs" / "reproduction" / "report.json").read_text())
    line = report.counts_line(data["counts_first_run"])
    readme = (ROOT / "README.md").read_text()
    block = readme.split(report.README_START, 1)[1].split(report.README_END, 1)[0].strip().splitlines()
    assert block[0] == line     # the first model's; then a line per other model with kept results
    others = data["models"][1:]
    assert block[1:] == [f"Model `{m['slug']}`: {report.counts_line(m['counts_first_run'])}" for m in others]
    assert line in (ROOT / "docs" / "reproduction" / "report.md").read_text()
    assert {entry["finding"] for entry in data["lines"]} == {f.id for f in FINDINGS}
    keys = {"finding", "paper", "quote", "tested", "run", "effect", "interval", "n", "sesoi", "power", "verdict",
            "decides", "disclosure"}
    assert all(keys <= set(entry) for entry in data["lines"])


def test_report_only_rewrites_the_readme_block_and_report_json(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nstale counts\n{report.README_END}\nrest\n")
    counts = {"reproduced": 1, "not reproduced": 2}
    assert report.update_readme(readme, counts)
    assert readme.read_text() == (f"intro\n{report.README_START}\n3 findings, first run: 1 reproduced, 2 not "
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
    null = next(x for x in out.splitlines() if x.startswith("- hao-null-perturbation (declared, no training"))
    assert null.endswith("python reproduce.py --report-only")   # it re-reads the kept first run
    kept_runs = kept.load(RESULTS)
    for label, follow in follow_ups.FOLLOW_UPS.items():   # an experiment kept whole is never listed as pending
        line = next((x for x in out.splitlines() if x.startswith(f"- {label} (declared, pending")), "")
        for name in follow.experiments:
            whole = name in kept_runs.get(label, {}) and not report.unfinished(*kept_runs[label][name])
            assert not (whole and f" {name} ~" in line.split("ran already")[0]), (label, name)


def test_the_null_baseline_moves_every_layer_by_the_same_share_of_its_norm(pretrained, tokenizer):
    from tasks.ablation.studies.dynamics import compare_encoders
    from tasks.reproduction import null_baseline
    moved = null_baseline.perturb(pretrained, 0.03, seed=0)
    before, after = dict(pretrained.named_parameters()), dict(moved.named_parameters())
    for name, p in before.items():
        shift = float((after[name] - p).detach().norm())
        if name.startswith("encoder.layer."):
            assert shift == pytest.approx(0.03 * float(p.detach().norm()), rel=1e-4), name
        else:
            assert shift == 0.0, name            # the embeddings stay
    batch = tokenizer.collate(tokenizer.encode(["a short sentence .", "the film is long , slow and dull"]))
    curves = compare_encoders(pretrained, moved, [batch])
    norms = [float(pretrained.encoder.layer[i].output.dense.weight.detach().norm()) for i in range(6)]
    # the output dense weight's L2 is 0.03 of its norm, so the L2 ratio of an equal relative change is the norm ratio
    assert curves["weight_l2"] == pytest.approx([0.03 * x for x in norms], rel=1e-4)
    ratios = null_baseline.ratios(curves, 6)
    assert ratios["singh-later-layers-move"] == pytest.approx((norms[4] + norms[5]) / (norms[0] + norms[1]) - 1,
                                                              rel=1e-3)
    assert set(ratios) == {fid for fid, *_ in null_baseline.RATIOS} and all(fid in BY_ID for fid in ratios)


def test_an_undecided_line_names_the_row_that_left_it_undecided():
    from tasks.reproduction import lines, power
    from tasks.reproduction.verdicts import INCONCLUSIVE, Row, Verdict
    finding = BY_ID["college-intermediate-task"]       # any pair reproduces it
    rows = [Row("quora then sts", {"mean": -0.013, "ci95_low": -0.018, "ci95_high": -0.008, "n": 5}, NR),
            Row("sts then quora", {"mean": 0.003, "ci95_low": -0.012, "ci95_high": 0.017, "n": 5}, INCONCLUSIVE)]
    verdict = Verdict(finding, "transfer-siamese", rows, U, power.reach(0.025, 5, finding.sesoi))
    sentence = lines.decides(verdict)
    assert sentence.startswith("Underpowered: row 'sts then quora'") and "quora then sts" not in sentence
    decided = Verdict(finding, "transfer-siamese", [rows[0], Row("sts then quora", rows[1].estimate, NR)], NR)
    assert lines.decides(decided).startswith("Not reproduced: row 'quora then sts'")

"""Issue 54: each line's rule dated against git, the confirmatory run's registration (fresh seeds, n by the power
rule, minutes by the plan) and the code path that makes its verdict the headline once its kept results exist."""
import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tasks.reproduction import experiments, judging, kept, plan, report
from tasks.reproduction.findings import BY_ID, FINDINGS, history
from tasks.reproduction.follow_ups import CONFIRMATORY, FIRST, PLANNED_MINUTES
from tasks.reproduction.record import Line
from tasks.reproduction.verdicts import NOT_RUN, judge
from tests.helpers.lines import trial_line
from tests.helpers.reproduction import kept_run, sitting

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "reproduction" / "results"
CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))


def _commit_date(commit: str):
    """The commit's date, "YYYY-MM-DD HH:MM" UTC, or None where this checkout has no history of it."""
    done = subprocess.run(["git", "-C", str(ROOT), "show", "-s", "--format=%cd", "--date=format-local:%Y-%m-%d %H:%M",
                           commit], capture_output=True, text=True, env={"TZ": "UTC", "PATH": "/usr/bin:/bin"})
    return done.stdout.strip() if done.returncode == 0 else None


def test_every_dated_change_to_a_rule_is_its_commits_date():
    dated = [r for f in FINDINGS for r in (f.declared, *f.revisions) if r and r.commit]
    found = {r.commit: _commit_date(r.commit) for r in dated}
    if not any(found.values()):
        pytest.skip("no git history here (a CI clone has it)")
    assert {r.commit: r.date for r in dated} == found
    for f in FINDINGS:   # oldest first, none before the line's declaration
        dates = [f.declared.date] + [r.date for r in f.revisions]
        assert dates == sorted(dates), f.id
    assert history.TODAY[0] == max(r.date for r in dated)    # the latest change: the ratio lines' (issue 54)


def test_a_rule_changed_after_its_data_reads_revised_with_what_it_read_before():
    f = BY_ID["tamkin-permute"]
    text, revised = report.history(f, ("2026-11-25 23:33", "2026-11-25 23:33"))
    assert revised and text.startswith("revised after its data: 2026-11-26 10:39 (0de79d3)")
    assert "before: reproduced, +0.046 [+0.038, +0.054]" in text
    assert report.history(f, ("2026-11-27 00:00", "2026-11-27 00:00")) == ("declared before its data", False)
    added = BY_ID["college-not-constant"]     # declared after the run it reads
    assert report.history(added, ("2026-11-25 23:16", "2026-11-25 23:16"))[0].startswith("declared after its data")


def test_a_lines_data_begin_with_its_first_trial_not_the_sitting_that_kept_it():
    """A sitting keeps an experiment's trials when it finishes: the first trial can end hours before."""
    trials = [trial_line("from=0", s, finished_at=end, wall_time_s=60.0)
              for s, end in ((0, "2026-11-25T08:00:00Z"), (1, "2026-11-25T09:30:00Z"))]
    run = replace(kept_run("reinit-small", FIRST, range(2)), sittings=[sitting(date="2026-11-25 10:00 UTC")])
    runs = kept.KeptRuns({FIRST: {"reinit-small": kept.Kept(run, {"reinit": trials})}})
    line = replace(judge(BY_ID["singh-scarce"], FIRST, []), reads=(("reinit-small", FIRST),))
    assert report.data_dates(runs, line) == ("2026-11-25 08:00", "2026-11-25 10:00")


def test_hao_used_bert_large_as_the_front_page_says():
    path = ROOT.parent / "shared" / "papers" / BY_ID["hao-attention-last"].paper
    if not path.exists():
        pytest.skip("the papers' text is not beside this checkout")
    assert report.HAO_LARGE in path.read_text(encoding="utf-8")


def _waiting(m, fid: str) -> str:
    """What a registered line its run does not head yet reads: unfinished where the run kept some trials."""
    kept_some = any(x.finding == fid and x.run == CONFIRMATORY.label for x in m.lines)
    return f"confirmatory run registered 2026-11-28, {'unfinished' if kept_some else 'not yet run'}"


def assert_registered_lines_read_as_such(m) -> None:
    """The registered lines are those the power figures list, each revised after its data or underpowered;
    each reads as registered, not yet run, until the confirmatory run judges it: then the confirmatory run's
    line is its headline and the first run's its pilot."""
    wanted = [x for x in report.confirmatory_lines(m) if x.startswith("- ")]   # generated from the power figures
    listed = {x[2:].split(" ")[0] for x in wanted if x.endswith("; registered")}
    judged = {x.finding for x in m.lines if x.run == CONFIRMATORY.label and x.headline}
    assert listed | judged == set(CONFIRMATORY.findings) and not listed & judged
    assert not any(x.startswith("- singh-probe-needs-more") for x in wanted)   # undecidable at this scale
    for fid in CONFIRMATORY.findings:    # each registered line was revised after its data or is underpowered
        line = next(x for x in m.lines if x.finding == fid and x.run == FIRST)
        assert line.revised_after_data or line.verdict == "underpowered", fid
        if fid in judged:
            assert line.role == "pilot" and not line.registered, fid
        else:
            assert line.registered == _waiting(m, fid) and line.headline


def test_the_confirmatory_runs_seeds_are_fresh_and_its_n_is_the_power_rules():
    if not RESULTS.exists():
        pytest.skip("no kept results")
    kept = [json.loads(path.read_text()) for path in ROOT.glob("docs/reproduction/**/run.json")]
    used = {s for run in kept if run["run"] != CONFIRMATORY.label for s in run["seeds"]}   # its own sittings
    mine = {s for _, seeds in CONFIRMATORY.seeds_by for s in seeds}
    assert mine and not mine & used
    m = report.judged(RESULTS, CTX)
    for e, seeds in CONFIRMATORY.seeds_by:
        lines = [fid for fid in CONFIRMATORY.findings if BY_ID[fid].experiment == e
                 or e in experiments.EXPERIMENTS[BY_ID[fid].experiment].needs]
        needed = [m.first[fid].power.needs for fid in lines]
        assert len(seeds) == max(needed + [len(experiments.seeds_of(experiments.EXPERIMENTS[e], CTX.scale))]), e
    minutes = sum(plan.experiment_minutes(experiments.EXPERIMENTS[e], CTX, "cpu", CONFIRMATORY)
                  for e in CONFIRMATORY.experiments)
    # the registration's plan (steps alone) stays its history; the planner times probes and comparisons now
    assert PLANNED_MINUTES == 421 < round(minutes) <= 8 * 60
    assert_registered_lines_read_as_such(m)
    # a line the registered run judged and left undecided asks for a run of its own, not for that one again
    asked = report.confirmatory_lines(m)
    left = {x[2:].split(" ")[0] for x in asked if "; the registered run left it undecided" in x}
    judged = judging.decided(m.by_run, CONFIRMATORY.label).items()
    assert left == {fid for fid, v in judged if v.outcome == "underpowered" and m.headline[fid] is v}


def _with_a_synthetic_confirmatory_run(folder: Path) -> dict:
    """The kept dynamics first run in `folder` and a copy kept as the confirmatory run; its run.json."""
    if not (RESULTS / "dynamics" / "first").exists():
        pytest.skip("no kept results")
    shutil.copytree(RESULTS / "dynamics" / "first", folder / "dynamics" / "first")
    shutil.copytree(RESULTS / "dynamics" / "first", folder / "dynamics" / "confirmatory")
    run = json.loads((folder / "dynamics" / "confirmatory" / "run.json").read_text())
    (folder / "dynamics" / "confirmatory" / "run.json").write_text(json.dumps({**run, "run": "confirmatory"}))
    for name in ("null-baseline.json", "null-baseline-pairs.json"):
        shutil.copyfile(RESULTS / name, folder / name)
    return run


def test_a_kept_confirmatory_run_becomes_the_headline_and_the_first_its_pilot(tmp_path):
    _with_a_synthetic_confirmatory_run(tmp_path)
    m = report.judged(tmp_path, CTX)
    assert set(kept.load(tmp_path)) == {FIRST, "confirmatory"}
    decided = judging.decided(m.by_run, "confirmatory")
    assert {"singh-later-layers-move", "hao-svcca-intermediate-last"} <= set(decided) <= set(CONFIRMATORY.findings)
    for fid in decided:
        assert m.headline[fid] is m.by_run["confirmatory"][fid]
        roles = {x.run: x for x in m.lines if x.finding == fid}
        assert roles["confirmatory"].headline and roles[FIRST].role == "pilot" and not roles[FIRST].registered
    waiting = next(x for x in m.lines if x.finding == "freeze-cross-encoding" and x.run == FIRST)
    assert waiting.headline and waiting.verdict == NOT_RUN and waiting.registered   # its pairs run is not kept
    assert judging.counts_of(m.headline) == m.counts
    line = next(x for x in m.lines if x.finding == "singh-later-layers-move" and x.headline)
    assert Line.from_json(json.loads(json.dumps(line.to_json()))) == line


def test_an_unfinished_confirmatory_run_heads_no_line_until_its_last_seed_is_in(tmp_path):
    run = _with_a_synthetic_confirmatory_run(tmp_path)
    trials = tmp_path / "dynamics" / "confirmatory" / "dynamics.jsonl"
    lines = trials.read_text().splitlines()   # a run cut short: its last seed's trials never finished
    trials.write_text("".join(x + "\n" for x in lines if json.loads(x)["seed"] != max(run["seeds"])))
    m = report.judged(tmp_path, CTX)
    assert ("confirmatory", "dynamics") in m.cut
    fid = "singh-later-layers-move"
    assert m.by_run["confirmatory"][fid].outcome != NOT_RUN        # judged on its seeds so far, shown beside
    assert m.headline[fid] is m.by_run[FIRST][fid]                 # but the headline stays the first run's
    first = next(x for x in m.lines if x.finding == fid and x.run == FIRST)
    assert first.headline
    assert first.registered == f"confirmatory run registered {CONFIRMATORY.registered}, unfinished"
    assert not next(x for x in m.lines if x.finding == fid and x.run == "confirmatory").headline
    assert not any("confirmatory" in cell for cell in m.cells[fid])   # nor a front-page cell before its end


def test_a_lines_needed_n_counts_its_rows_and_their_correction():
    from tasks.reproduction import power
    one = power.needs(0.029, 0.01)                       # college-not-monotone's sd, one row: about 69
    six_any = power.needs(0.029, 0.01, "direction", 6, "any")     # every row must fail: 0.8 ** (1/6) each
    six_all = power.needs(0.029, 0.01, "direction", 6, "all")     # one row fails it, at 1 - 0.025 / 6
    assert 60 <= one <= 75 and 110 <= six_any <= 130 and one < six_all < six_any
    assert power.reach(0.029, 10, 0.01, "direction", 1, "any") == power.reach(0.029, 10, 0.01)
    assert power.needs(1.35, 0.1) > 1_000                # past the old 200: said with its figure, not "> 200"
    far = replace(power.reach(1.35, 5, 0.1), needs=1723, day=1259)
    assert power.label(far) == "undecidable at this scale (needs n of about 1,700)"
    assert power.label(replace(far, day=5000)) == "underpowered at n = 5, needs n >= 1,723"

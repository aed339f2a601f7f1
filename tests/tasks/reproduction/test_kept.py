"""kept.py: the kept runs (a follow-up never overwrites the first run, a run refuses trials from other
weights, devices, options or precisions, run.json one typed record read back as written) and where their
trials trained."""
import json
from dataclasses import replace

import pytest

import reproduce
from minbert import UserError
from tasks.ablation.line import SCHEMA
from tasks.fileio import read_jsonl
from tasks.reproduction import follow_ups, judging, sweeps
from tasks.reproduction import kept as reproduction_runs
from tasks.reproduction import report as reproduction_report
from tasks.reproduction.verdicts import NOT_REPRODUCED, REPRODUCED
from tests.helpers import run_cli
from tests.helpers.reproduction import CTX, LARGE, SMALL, finding_rows, kept_run, reinit, sitting


def test_a_follow_up_never_overwrites_the_first_run(tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    weak = reinit(lambda k, f, s: 0.40 + 0.002 * k + 0.01 * (s % 2), seeds=range(3))     # first: small effect
    reproduction_runs.store(results_dir, kept_run("reinit-small", "first", range(3)), {"reinit": weak[SMALL]},
                            sitting())
    reproduction_runs.store(results_dir, kept_run("reinit-large", "first", range(3)), {"reinit": weak[LARGE]},
                            sitting())
    strong = reinit(lambda k, f, s: 0.30 + 0.02 * k + 0.001 * s)
    # more seeds under the first run's label: refused, whatever the records say
    with pytest.raises(UserError, match="follow-up"):
        reproduction_runs.store(results_dir, kept_run("reinit-small", "first", range(5)),
                                {"reinit": strong[SMALL]},
                                sitting())
    # the same protocol resumed: a kept trial is never replaced, only missing ones are added
    changed = [replace(r, dev={"sst": 0.99}) for r in weak[SMALL]]
    reproduction_runs.store(results_dir, kept_run("reinit-small", "first", range(3)), {"reinit": changed},
                            sitting())
    kept = read_jsonl(results_dir / "reinit-small" / "first" / "reinit.jsonl")
    assert all(r["dev"]["sst"] < 0.99 for r in kept)
    # a declared follow-up has its own folder; the report shows both verdicts
    follow = follow_ups.FollowUp("five-seeds", ("reinit-small",), "test: five seeds")
    monkeypatch.setitem(follow_ups.FOLLOW_UPS, "five-seeds", follow)
    reproduction_runs.store(results_dir, kept_run("reinit-small", "five-seeds", range(5)),
                            {"reinit": strong[SMALL]},
                            sitting())
    by_run = judging.verdicts(reproduction_runs.load(results_dir), CTX)
    first, second = by_run["first"]["singh-scarce"], by_run["five-seeds"]["singh-scarce"]
    assert first.outcome == NOT_REPRODUCED and second.outcome == REPRODUCED
    report = reproduction_report.write(results_dir, tmp_path / "report.md", CTX).read_text()
    line = finding_rows(tmp_path, "singh-scarce")
    assert len(line) == 2 and "first (declared, headline, protocol 1)" in line[0]
    assert "five-seeds (sensitivity, not counted, protocol 2)" in line[1]
    assert "**not reproduced**" in line[0] and "**reproduced**" in line[1]
    # the headline: the first's
    front = next(x for x in report.splitlines() if x.startswith("| [singh-scarce]"))
    assert front.split(" | ")[2].startswith("**not reproduced**") and "unlike the first run**: holds" in front


def _kept_pair_run(tmp_path, device="cpu", weights="a" * 12):
    """A kept run of five trials trained on `device` from `weights`, and its sweep file."""
    rows = [replace(r, device=f"{device}:0" if device == "cuda" else device)
            for r in reinit(lambda k, f, s: 0.25 + 0.01 * s)[SMALL][:5]]
    reproduction_runs.store(tmp_path, kept_run("reinit-small", "first", range(5), weights=weights),
                            {"reinit": rows},
                            sitting())
    return tmp_path / "reinit-small" / "first" / "reinit.jsonl", rows


def test_a_kept_run_refuses_trials_from_other_weights_or_another_kind_of_device(tmp_path):
    """Arms paired by seed differ only by the arm: a run's trials all train on one kind of device, from one
    set of weights; a refused sitting writes nothing, and the check also comes before anything trains."""
    sweep_file, rows = _kept_pair_run(tmp_path)
    before = sweep_file.read_bytes()
    fresh = [replace(r, key=r.key + "-new") for r in rows]
    with pytest.raises(UserError, match="other weights"):
        reproduction_runs.store(tmp_path, kept_run("reinit-small", "first", range(5), weights="0" * 12),
                                {"reinit": fresh}, sitting())
    with pytest.raises(UserError, match="trained on cpu, these on cuda"):
        reproduction_runs.store(tmp_path, kept_run("reinit-small", "first", range(5), weights="a" * 12),
                                {"reinit": [replace(r, device="cuda:0") for r in fresh]}, sitting())
    assert sweep_file.read_bytes() == before
    with pytest.raises(UserError, match="other weights"):
        reproduction_runs.refuse_mixing(tmp_path, "reinit-small", "first", "0" * 12, "cpu")
    with pytest.raises(UserError, match="trained on cpu, these on cuda"):
        reproduction_runs.refuse_mixing(tmp_path, "reinit-small", "first", "a" * 12, "cuda")
    # --gather trains nothing
    reproduction_runs.refuse_mixing(tmp_path, "reinit-small", "first", "a" * 12, "")
    stranger = [replace(r, fingerprint="f" * 16, key=r.key + "-x") for r in rows]   # other training options
    reproduction_runs.store(tmp_path / "other", kept_run("reinit-small", "first", range(5)),
                            {"reinit": [replace(rows[0], fingerprint="e" * 16)]}, sitting())
    with pytest.raises(UserError, match="fingerprint"):
        reproduction_runs.store(tmp_path / "other", kept_run("reinit-small", "first", range(5)),
                                {"reinit": stranger},
                                sitting())
    reproduction_runs.store(tmp_path, kept_run("reinit-small", "first", range(5), weights="a" * 12),
                            {"reinit": fresh},
                            sitting())
    run = reproduction_runs.read_run(tmp_path / "reinit-small" / "first" / "run.json")
    assert [s.trials for s in run.sittings] == [5, 5] and (run.device, run.weights) == ("cpu", "a" * 12)
    # a run kept before weights were recorded never claims a later one's
    unrecorded = tmp_path / "unrecorded"
    reproduction_runs.store(unrecorded, kept_run("reinit-small", "first", range(5)), {"reinit": rows[:2]},
                            sitting())
    reproduction_runs.store(unrecorded, kept_run("reinit-small", "first", range(5), weights="b" * 12),
                            {"reinit": rows},
                            sitting())
    assert reproduction_runs.read_run(unrecorded / "reinit-small" / "first" / "run.json").weights == ""


def test_a_kept_run_refuses_trials_in_another_precision_across_its_sweeps(tmp_path):
    """bf16's rounding against fp32's would read as the arm's effect: a run's trials, over all its sweeps
    (pairs compares a cross-encoded sweep with a siamese one), train in one precision; a refused sitting
    writes nothing."""
    run = kept_run("reinit-small", "first", range(5))
    rows = [replace(r, precision="fp32") for r in reinit(lambda k, f, s: 0.25 + 0.01 * s)[SMALL][:5]]
    reproduction_runs.store(tmp_path, run, {"reinit": rows}, sitting())
    sweep_file = tmp_path / "reinit-small" / "first" / "reinit.jsonl"
    before = sweep_file.read_bytes()
    fresh = [replace(r, key=r.key + "-new", precision="bf16") for r in rows]
    with pytest.raises(UserError, match=r"would mix bf16 and fp32 \(kept: fp32; these: bf16\)"):
        reproduction_runs.store(tmp_path, run, {"reinit": fresh}, sitting())
    with pytest.raises(UserError, match=r"would mix bf16 and fp32 \(kept: fp32; these: bf16\)"):
        reproduction_runs.store(tmp_path, run, {"reinit": rows, "siamese": fresh}, sitting())
    assert sweep_file.read_bytes() == before and not (sweep_file.parent / "siamese.jsonl").exists()
    with pytest.raises(UserError, match=r"kept: none; these: bf16, fp32"):
        reproduction_runs.store(tmp_path / "mixed", run, {"reinit": rows[:2] + fresh[2:]}, sitting())
    same = [replace(r, precision="fp32") for r in fresh]
    reproduction_runs.store(tmp_path, run, {"reinit": same}, sitting())
    assert len(read_jsonl(sweep_file)) == 10


def test_an_experiments_precision_so_far_is_its_kept_and_finished_trials(tmp_path):
    """What a sweep begun beside its experiment's other sweeps follows (sweeps.trained_in): the kept run's
    precision and that of the trials finished in its sweeps' folders, failed ones aside."""
    rows = [replace(r, precision="fp32") for r in reinit(lambda k, f, s: 0.25 + 0.01 * s)[SMALL][:3]]
    run = kept_run("pairs", "first", range(3))
    reproduction_runs.store(tmp_path / "results", run, {"a": rows}, sitting())
    found = reproduction_runs.load(tmp_path / "results").kept("first", "pairs")
    outs = [tmp_path / "out" / "b", tmp_path / "out" / "c"]          # c: not begun
    outs[0].mkdir(parents=True)
    failed = replace(rows[0], key="x", status="failed", precision="bf16")
    (outs[0] / "results.jsonl").write_text(json.dumps(failed.to_json()) + "\n")
    assert sweeps.trained_in(found, outs) == {"fp32"} and sweeps.trained_in(None, outs) == frozenset()
    (outs[0] / "results.jsonl").write_text(json.dumps(replace(failed, status="ok").to_json()) + "\n")
    # mixed: the sweep follows neither, and keeping refuses the run
    assert sweeps.trained_in(found, outs) == {"bf16", "fp32"}


def test_a_kept_run_is_one_typed_record_read_back_as_written_and_an_old_one_is_refused(tmp_path):
    _kept_pair_run(tmp_path, device="cuda")
    path = tmp_path / "reinit-small" / "first" / "run.json"
    run = reproduction_runs.read_run(path)
    assert run == kept_run("reinit-small", "first", range(5), weights="a" * 12, device="cuda",
                       sittings=[sitting(trials=5)])
    reproduction_runs.write_run(path, run)
    assert reproduction_runs.read_run(path) == run
    old = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("schema", "device", "weights")}
    path.write_text(json.dumps(old))
    with pytest.raises(UserError, match=r"run.json: a kept run of schema 1, this code reads schema 4"):
        reproduction_runs.load(tmp_path)
    code, _, err = run_cli(reproduce.main, ["--report-only", "--results", str(tmp_path), "--report",
                                            str(tmp_path / "r.md")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err


def test_a_run_says_where_its_trials_trained_even_when_another_machine_kept_them(tmp_path):
    rows = reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)[SMALL]
    gpu = [replace(r, device="cuda:0") for r in rows]     # trained on a device, gathered and kept on a CPU
    reproduction_runs.store(tmp_path / "results", kept_run("reinit-small", "first", range(5)),
                            {"reinit": gpu},
                            sitting(wall_time_s=5.0))
    run, _ = reproduction_runs.load(tmp_path / "results")["first"]["reinit-small"]
    assert run.device == "cuda" and run.sittings[0].machine == "test CPU"
    text = reproduction_report.write(tmp_path / "results", tmp_path / "report.md",
                                     CTX).with_name("runs.md").read_text()
    assert "trained on cuda, 0.1 min wall" in text


def test_a_sitting_adds_its_trials_below_the_kept_lines_left_as_written(tmp_path):
    """Lines kept in an older schema stay byte for byte; the new ones follow in the current schema, and a
    malformed kept line is one error naming its file and line."""
    rows = reinit(lambda k, f, s: 0.40 + 0.01 * k + 0.001 * s, seeds=range(3))[SMALL]
    reproduction_runs.store(tmp_path, kept_run("reinit-small", "first", range(3)), {"reinit": rows[:4]},
                            sitting())
    path = tmp_path / "reinit-small" / "first" / "reinit.jsonl"
    schema_1 = "".join(json.dumps({k: v for k,
                                   v in r.to_json().items() if k != "schema"}) + "\n" for r in rows[:4])
    path.write_text(schema_1)
    reproduction_runs.store(tmp_path, kept_run("reinit-small", "first", range(3)), {"reinit": rows},
                            sitting())
    text = path.read_text()
    assert text.startswith(schema_1) and [json.loads(x).get("schema") for x in text.splitlines()] == \
        [None] * 4 + [SCHEMA] * (len(rows) - 4)
    [(_, sweeps)] = reproduction_runs.load(tmp_path)["first"].values()
    assert sweeps["reinit"] == rows
    path.write_text(schema_1.replace('"config"', '"configuration"', 1))   # line 1 names no configuration
    code, _, err = run_cli(reproduce.main, ["--report-only", "--results", str(tmp_path), "--report",
                                            str(tmp_path / "r.md")])
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{path}: line 1: not a trial line" in err

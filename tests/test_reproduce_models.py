"""reproduce.py with a second model: its runs kept apart (RESULTS/models/SLUG, run.json with the model's path and
hash, a folder that refuses another model), its verdict beside the first model's on every line of report.md and in
report.json, a disagreement marked, its power from its own pilot only, the first model's lines unchanged by it, and
one real run of a tiny pretrained model end to end."""
import dataclasses
import json
import shutil
import zlib
from pathlib import Path

import pytest

import pretrain
import reproduce
from conftest import run_cli
from minbert import UserError
from tasks.fileio import read_jsonl
from tasks.reproduction import compare, experiments, judging, kept, models, pilot, report
from tasks.reproduction.findings import FINDINGS

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "docs" / "reproduction" / "results"
CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
SLUG = "mini-20M-0123abcd"
IDENTITY = {"slug": SLUG, "path": "/runs/mini-20M/model", "hash": "0123abcd" + "0" * 56}
EXPERIMENTS = ("reinit-small", "reinit-large")


def _seed_only(record) -> float:
    """A score set by the seed, with a little noise from the trial's key (no effect of re-drawing any layer)."""
    return 0.40 + 0.01 * record["seed"] + 0.002 * (zlib.crc32(record["key"].encode()) % 5)


def _copy_run(source: Path, target: Path, flatten=False, identity=None) -> None:
    """A kept run folder copied as it is (the first model's), or with every trial's score made the seed's alone
    (pretraining does nothing: singh-scarce not reproduced) and the run.json naming the second model."""
    target.mkdir(parents=True)
    for path in source.glob("*.jsonl"):
        records = read_jsonl(path)
        if flatten:
            records = [{**r, "dev": {**r["dev"], "sst": _seed_only(r)}} for r in records]
        (target / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))
    meta = json.loads((source / "run.json").read_text())
    if identity:
        meta.update(model=identity["path"], model_identity=identity)
    (target / "run.json").write_text(json.dumps(meta))


@pytest.fixture()
def two_models(tmp_path):
    """The kept reinit runs of the first model at the root, and a second model's (the same trials' shape, other
    scores) in models/SLUG."""
    if not all((KEPT / e / "first" / "run.json").exists() for e in EXPERIMENTS):
        pytest.skip("no kept reinit runs")
    root = tmp_path / "results"
    for e in EXPERIMENTS:
        _copy_run(KEPT / e / "first", root / e / "first")
        _copy_run(KEPT / e / "first", root / models.MODELS_DIR / SLUG / e / "first", flatten=True, identity=IDENTITY)
    return root


def _rows(text: str, model: str = "") -> list:
    return [x for x in text.splitlines() if x.startswith("| ") and f"| {model} |" in x]


def test_the_report_shows_both_models_and_marks_where_they_disagree(two_models, tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--report-only loaded a model"))
    code, out, err = run_cli(reproduce.main, ["--report-only", "--results", str(two_models),
                                              "--report", str(tmp_path / "report.md")])
    assert code == 0, err
    text = (tmp_path / "report.md").read_text()
    assert f"Beside it: model **{SLUG}**" in text
    assert f"| minilm, first run: verdict, effect [95% CI] | {SLUG}, " in text
    scarce = next(x for x in text.splitlines() if x.startswith("| [singh-scarce](singh.md#singh-scarce) |"))
    assert scarce.split(" | ")[2].startswith("**reproduced**") and scarce.split(" | ")[3].startswith("**not reproduced")
    page = (tmp_path / "singh.md").read_text()
    assert _rows(page, SLUG) and _rows(page, "minilm") and "| first (declared, protocol 1) | minilm | cpu |" in page
    runs = (tmp_path / "runs.md").read_text()
    assert f"results/models/{SLUG}/reinit-small/first/" in runs
    data = json.loads((tmp_path / "report.json").read_text())
    line = next(x for x in data["lines"] if x["finding"] == "singh-scarce" and x["run"] == "first")
    assert line["verdict"] == "reproduced" and [m["slug"] for m in line["models"]] == [None, SLUG]
    first, second = line["models"]
    assert first["verdict"] == "reproduced" and first["models_disagree"] and first["headline"]
    assert second["verdict"] == "not reproduced" and second["models_disagree"] and second["n"] == 5
    assert second["power"]["not_computed"].startswith("power not yet computed for this model")
    assert [m["slug"] for m in data["models"]] == [None, SLUG] and data["models"][1]["identity"] == IDENTITY


def test_the_first_models_lines_are_unchanged_by_a_second(two_models, tmp_path):
    alone = tmp_path / "alone"
    shutil.copytree(two_models, alone, ignore=shutil.ignore_patterns(models.MODELS_DIR))
    report.write(alone, tmp_path / "one" / "report.md", CTX)
    report.write(two_models, tmp_path / "both" / "report.md", CTX)
    for name in ("tamkin", "singh", "hao", "college", "freeze"):
        one, both = ((tmp_path / x / f"{name}.md").read_text() for x in ("one", "both"))
        assert _rows(one, "minilm") == _rows(both, "minilm") and not _rows(one, SLUG)
    one, both = (json.loads((tmp_path / x / "report.json").read_text())["lines"] for x in ("one", "both"))
    assert [{k: v for k, v in x.items() if k != "models"} for x in one] == \
        [{k: v for k, v in x.items() if k != "models"} for x in both]
    assert all(len(x["models"]) == 1 for x in one)


def test_a_second_models_power_comes_from_its_own_pilot_only(two_models):
    second = models.others(two_models)[0]
    assert second.slug == SLUG and models.pilot(second, two_models) is None
    (two_models / models.MODELS_DIR / SLUG / models.PILOT_FILE).write_text(
        json.dumps({"sd": {"reinit at 0.03": 0.004}, "source": "a test"}))
    column = compare.column(second, two_models, CTX, report.NULL_FILE)
    assert column.has_pilot
    power = column.by_run["first"]["singh-scarce"].power
    assert power["pilot_sd"] == pytest.approx(0.004)          # its own, not the first model's 0.005
    data_size = column.by_run["first"]["singh-data-size"].power  # needs "reinit at 0.25" too: not in its pilot
    assert data_size["pilot_sd"] is None


def test_the_readme_block_gives_a_line_per_model(two_models, tmp_path):
    columns = compare.others(two_models, CTX, report.NULL_FILE)
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{report.README_START}\nold\n{report.README_END}\n")
    report.update_readme(readme, {"reproduced": 1}, compare.readme_lines(columns))
    block = readme.read_text().split(report.README_START)[1].split(report.README_END)[0].strip().splitlines()
    assert block[0] == "1 findings, first run: 1 reproduced." and block[1].startswith(f"Model `{SLUG}`: 37 findings")


def test_one_folder_refuses_a_second_models_trials(tmp_path):
    run = kept.KeptRun("pairs", "first", 1, "cpu", "a/model", {}, [0], 6, {}, model_identity=IDENTITY)
    sitting = kept.sitting("c", {"minbert_commit": "x"}, 1.0)
    kept.store(tmp_path, run, {"sts": [{"key": "k"}]}, sitting)
    kept.store(tmp_path, dataclasses.replace(run, model=str(tmp_path / "same")), {"sts": []}, sitting)   # one hash
    other = dataclasses.replace(run, model_identity={**IDENTITY, "hash": "f" * 64})
    with pytest.raises(UserError, match="keeps the runs of model a/model .hash 0123abcd0000., not a/model "
                                        ".hash ffffffffffff.: one folder keeps one model's runs"):
        kept.store(tmp_path, other, {"sts": []}, sitting)
    with pytest.raises(UserError, match="one folder keeps one model's runs"):
        kept.store(tmp_path, dataclasses.replace(run, model_identity=None, model="minilm"), {"sts": []}, sitting)


def test_a_tiny_pretrained_model_runs_an_experiment_into_its_own_folder(small_data_dir, tmp_path):
    (tmp_path / "corpus.txt").write_text("\n\n".join("the cat sat on the mat .\na dog ran to the big house ."
                                                     for _ in range(40)) + "\n")
    code, _, err = run_cli(pretrain.main, ["--init-config", "tiny", "--corpus", str(tmp_path / "corpus.txt"),
                                           "--max-length", "32", "--batch-size", "8", "--max-steps", "2",
                                           "--device", "cpu", "--precision", "fp32", "--held-out", "0.1",
                                           "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "tiny")])
    assert code == 0, err
    model = str(tmp_path / "tiny" / "model")
    results, report_md = tmp_path / "results", tmp_path / "report.md"
    argv = ["--model", model, "--only", "pairs", "--data-dir", str(small_data_dir), "--out", str(tmp_path / "runs"),
            "--max-steps", "1", "--seeds", "1", "--workers", "1", "--results", str(results), "--report",
            str(report_md), "--precision", "fp32", "--device", "cpu"]
    code, out, err = run_cli(reproduce.main, argv)
    assert code == 0, err
    identity = models.identify(model)
    assert identity["slug"].startswith("tiny-") and len(identity["slug"]) == len("tiny-") + 8
    run = json.loads((results / models.MODELS_DIR / identity["slug"] / "pairs" / "first" / "run.json").read_text())
    assert run["model_identity"] == identity and run["layers"] == 2 and run["model"] == model
    assert not (results / "pairs").exists() and (tmp_path / "runs" / models.MODELS_DIR / identity["slug"]).is_dir()
    text = report_md.read_text()
    assert f"| {identity['slug']}, first run |" in text and "power not yet computed" in text
    code, out, err = run_cli(reproduce.main, ["--plan", "--model", model, "--results", str(results)])
    assert code == 0, err
    lines = {x.split(":")[0]: x for x in out.splitlines()}
    assert lines["pairs"].startswith("pairs: kept") and lines["reinit-small"].startswith("reinit-small: pending, ~")
    assert f"--model {model} --only reinit-small" in lines["reinit-small"]
    meta_path = results / models.MODELS_DIR / identity["slug"] / "pairs" / "first" / "run.json"
    meta_path.write_text(json.dumps({**run, "model_identity": {**identity, "hash": "f" * 64}}))
    code, _, err = run_cli(reproduce.main, argv)     # a folder holding another model's run: refused, nothing run
    assert code == 2 and len(err.strip().splitlines()) == 1 and "hash ffffffffffff" in err


def test_a_run_only_the_second_model_has_shows_in_its_comparison_rows(two_models):
    folder = two_models / models.MODELS_DIR / SLUG / "reinit-small"
    shutil.copytree(folder / "first", folder / "cap-small-data")
    meta = json.loads((folder / "cap-small-data" / "run.json").read_text())
    (folder / "cap-small-data" / "run.json").write_text(json.dumps({**meta, "run": "cap-small-data"}))
    report.write(two_models, two_models.parent / "report.md", CTX)
    text = (two_models.parent / "singh.md").read_text()
    assert f"| cap-small-data (sensitivity, protocol 2) | {SLUG} |" in text
    assert "| cap-small-data (sensitivity, protocol 2) | minilm |" not in text     # the first model has no such run


def test_a_pilot_run_writes_the_second_models_pilot_json_that_its_power_then_reads(two_models, tmp_path, monkeypatch):
    """pilot.py: each key's sd is the largest per-unit sd among the rows of the findings declaring that key alone,
    from the pilot run's own trials; the report's power then reads it."""
    pilot_root = tmp_path / "pilot"
    shutil.copytree(two_models / models.MODELS_DIR, pilot_root / models.MODELS_DIR)
    monkeypatch.setattr(models, "identify", lambda model: IDENTITY)
    monkeypatch.setattr(models, "config_of", lambda model: {"num_hidden_layers": 6, "num_attention_heads": 12})
    code, out, err = run_cli(pilot.main, ["--model", IDENTITY["path"], "--pilot-results", str(pilot_root),
                                          "--results", str(two_models)])
    assert code == 0, err
    written = json.loads((two_models / models.MODELS_DIR / SLUG / models.PILOT_FILE).read_text())
    runs = kept.load(pilot_root / models.MODELS_DIR / SLUG)
    scarce = judging.verdicts(runs, CTX, None, None)["first"]["singh-scarce"]
    assert written["sd"]["reinit at 0.03"] == pytest.approx(max(r.estimate["std"] for r in scarce.rows))
    alone = {f.id for f in FINDINGS if tuple(f.pilot) == ("reinit at 0.25",)}   # the findings declaring it alone
    assert {r["finding"] for r in written["rows"]["reinit at 0.25"]} <= alone
    assert "permute" not in written["sd"]          # the pilot ran no permute: no sd, none borrowed
    raw = two_models / models.MODELS_DIR / SLUG / pilot.RAW_DIR
    assert kept.load(raw) == runs                  # its raw trials kept beside it, not read as a kept run:
    assert set(kept.load(two_models / models.MODELS_DIR / SLUG)) == {"first"}
    assert {run.experiment for run, _ in kept.load(two_models / models.MODELS_DIR / SLUG)["first"].values()
            } == set(EXPERIMENTS)
    column = compare.column(models.others(two_models)[0], two_models, CTX, report.NULL_FILE)
    assert column.by_run["first"]["singh-scarce"].power["pilot_sd"] == pytest.approx(written["sd"]["reinit at 0.03"])


def test_a_pilot_without_a_kept_run_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(models, "identify", lambda model: IDENTITY)
    code, out, err = run_cli(pilot.main, ["--model", IDENTITY["path"], "--pilot-results", str(tmp_path / "none"),
                                          "--results", str(tmp_path / "results")])
    assert code == 2 and "--pilot-results" in err and "no kept run" in err and len(err.strip().splitlines()) == 1

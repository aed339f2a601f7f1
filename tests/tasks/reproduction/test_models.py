"""reproduce.py with another model than the embedded one: one model per results folder and per report (the model
read from the folder's kept runs, a folder refusing another model's runs), its power from its own pilot only
(its pilot run in RESULTS/pilot-run; no pilot, no power), what was measured of its pretraining on its front page,
the embedded model's report linking it, the model named by what it is (never a path; a rebuilt checkpoint with
other weights refused), and one real run of a tiny pretrained model end to end."""
import json
import shutil
import zlib
from pathlib import Path

import pytest

import pretrain
import reproduce
from minbert import UserError
from tasks.fileio import read_jsonl
from tasks.reproduction import experiments, judging, kept, power, report
from tests.helpers import run_cli
from tests.helpers.lines import trial_line

ROOT = Path(__file__).resolve().parents[3]
KEPT = ROOT / "docs" / "reproduction" / "results"
MODEL = "mini-20M"
MINI = ROOT / "docs" / "reproduction" / "mini-20M"
WEIGHTS = "0a263eb60b67"      # the ladder's mini-20M rung, whose pretraining docs/pretraining-results/ records
CTX = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES), model=MODEL)
EXPERIMENTS = ("reinit-small", "reinit-large")


def _seed_only(record) -> float:
    """A score set by the seed, with a little noise from the trial's key (no effect of re-drawing any layer)."""
    return 0.40 + 0.01 * record["seed"] + 0.002 * (zlib.crc32(record["key"].encode()) % 5)


def _copy_run(source: Path, target: Path, model=MODEL, weights=WEIGHTS) -> None:
    """A kept run folder of the embedded model copied with every trial's score made the seed's alone (pretraining
    does nothing: singh-scarce not reproduced) and its run.json naming `model` and `weights`."""
    target.mkdir(parents=True)
    for path in source.glob("*.jsonl"):
        records = [{**r, "dev": {**r["dev"], "sst": _seed_only(r)}} for r in read_jsonl(path)]
        (target / path.name).write_text("".join(json.dumps(r) + "\n" for r in records))
    meta = json.loads((source / "run.json").read_text())
    (target / "run.json").write_text(json.dumps({**meta, "model": model, "weights": weights}))


@pytest.fixture()
def other_model(tmp_path):
    """Another model's kept reinit runs, alone in their results folder."""
    if not all((KEPT / e / "first" / "run.json").exists() for e in EXPERIMENTS):
        pytest.skip("no kept reinit runs")
    root = tmp_path / "other" / "results"
    for e in EXPERIMENTS:
        _copy_run(KEPT / e / "first", root / e / "first")
    return root


def _report_only(results: Path, report_md: Path, *extra) -> tuple:
    return run_cli(reproduce.main, ["--report-only", "--results", str(results), "--report", str(report_md), *extra])


def test_report_only_reads_the_model_from_the_folder_and_says_what_was_measured_of_it(other_model, monkeypatch):
    monkeypatch.setattr(reproduce, "layers_of", lambda model: pytest.fail("--report-only loaded a model"))
    code, out, err = run_cli(reproduce.main, ["--report-only", "--results", str(other_model)])   # no --model
    assert code == 0, err
    folder = other_model.parent                         # the report goes beside its results folder
    text = (folder / "report.md").read_text()
    assert f"Model **{MODEL}** (6 layers" in text
    flat = " ".join(text.split())
    assert "What was measured of it: masked-LM pretraining on the course's text by pretrain.py (not BERT), " \
           "held-out masked-token accuracy 0.347" in flat and "`docs/pretraining-results/" in flat
    assert f"| `{MODEL}` headline: verdict, effect [CI] | SESOI | after Holm ({MODEL}) | follow-ups: " \
           "sensitivity |" in text
    scarce = next(x for x in text.splitlines() if x.startswith("| [singh-scarce](singh.md#singh-scarce) |"))
    assert scarce.split(" | ")[2].startswith("**not reproduced")
    data = json.loads((folder / "report.json").read_text())
    assert data["model"] == MODEL and data["weights"] == WEIGHTS and "0.347" in data["credentials"]
    assert "models" not in data and all("models" not in line for line in data["lines"])
    assert f"`{MODEL}`, 6 layers: masked-LM pretraining" in (folder / "runs.md").read_text()


def test_a_model_without_a_pilot_of_its_own_gets_no_power(other_model, tmp_path):
    report.write(other_model, tmp_path / "report.md", CTX)
    data = json.loads((tmp_path / "report.json").read_text())
    assert not data["pilot"]
    firsts = [x for x in data["lines"] if x["run"] == "first" and x["experiment"] in EXPERIMENTS]
    assert firsts and all(x["power"]["not_computed"].startswith(power.NOT_COMPUTED) for x in firsts)
    assert all(x["verdict"] != "underpowered" for x in firsts)      # undecided stays inconclusive: no sd borrowed
    assert f"{power.NOT_COMPUTED}: it has no pilot of its own" in " ".join((tmp_path / "report.md").read_text().split())


def test_a_folders_pilot_run_gives_its_power_and_the_embedded_model_keeps_its_own(other_model):
    """judging.pilot_of: each key's sd is the largest per-unit sd among the first-run rows of the findings declaring
    that key alone, in the folder's pilot run; the embedded model's is PILOT_SD; no pilot run, no sd borrowed."""
    assert judging.pilot_of(other_model, MODEL) is None
    assert judging.pilot_of(other_model.parent / "empty", power.PILOT_MODEL) == power.PILOT_SD
    shutil.copytree(other_model / "reinit-small", other_model / power.PILOT_DIR / "reinit-small")
    sds = judging.pilot_of(other_model, MODEL)
    scarce = judging.verdicts(kept.load(other_model / power.PILOT_DIR), CTX, None, None)["first"]["singh-scarce"]
    assert set(sds) == {"reinit at 0.03"}          # the pilot ran reinit-small only: no other key, none borrowed
    assert sds["reinit at 0.03"] >= max(r.estimate.std for r in scarce.rows) > 0
    assert {run.experiment for run, _ in kept.load(other_model)["first"].values()} == set(EXPERIMENTS)
    found = report.judged(other_model, CTX).by_run["first"]
    assert found["singh-scarce"].power.pilot_sd == pytest.approx(sds["reinit at 0.03"])   # its own, not 0.005
    assert found["singh-data-size"].power.pilot_sd is None     # needs "reinit at 0.25" too: not in its pilot


def test_a_folder_refuses_another_models_runs(other_model, tmp_path):
    run = kept.KeptRun("pairs", "first", 1, "cpu", "a/model", {}, [0], 6, {}, weights="a" * 12)
    sitting = kept.Sitting("2026-11-25 10:00 UTC", "x", "c", 1.0, 0)
    kept.store(tmp_path, run, {"sts": [trial_line("k", 0, mode="pairs", key="k")]}, sitting)
    kept.store(tmp_path, kept.KeptRun("pairs", "first", 1, "cpu", str(tmp_path / "same"), {}, [0], 6, {},
                                      weights="a" * 12), {"sts": []}, sitting)     # one model, its path written apart
    with pytest.raises(UserError, match="with a/model .weights aaaaaaaaaaaa., not scale cpu with minilm "
                                        ".weights bbbbbbbbbbbb.: one folder keeps one model's runs"):
        kept.store(tmp_path, kept.KeptRun("pairs", "first", 1, "cpu", "minilm", {}, [0], 6, {}, weights="b" * 12),
                   {"sts": []}, sitting)
    code, _, err = _report_only(other_model, tmp_path / "r.md", "--model", "minilm")
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"with {MODEL} (weights {WEIGHTS})" in err


def test_the_embedded_models_report_links_another_models_report_beside_it(other_model, tmp_path):
    code, _, err = _report_only(other_model, other_model.parent / "report.md")
    assert code == 0, err
    embedded = tmp_path / "embedded"
    for e in EXPERIMENTS:
        shutil.copytree(KEPT / e / "first", embedded / "results" / e / "first")
    shutil.copytree(other_model.parent, embedded / "mini")
    code, _, err = _report_only(embedded / "results", embedded / "report.md")
    assert code == 0, err
    text = " ".join((embedded / "report.md").read_text().split())
    assert f"Another model, in a report of its own: [mini](mini/report.md) (`{MODEL}`, 6 layers; masked-LM" in text
    assert "37 findings, headline: 0 reproduced" in text
    assert "What was measured of it" not in text      # the embedded model is described in the departures instead
    assert "all-MiniLM-L6-v2" in (embedded / "runs.md").read_text()


def assert_named_by_what_it_is(tmp_path, model: str, results, report_md) -> kept.KeptRun:
    """The tiny model's kept run and report name it by recipe, weights and masked accuracy, by no path."""
    run = kept.read_run(results / "pairs" / "first" / "run.json")
    assert (run.model, run.layers, run.weights, run.heads) == ("tiny", 2, reproduce.weights_of(model), 2)
    assert run.recipe == "python pretrain.py --init-config tiny --corpus corpus.txt --held-out 0.1 --out RUN"
    held_out = json.loads((tmp_path / "tiny" / "model" / "pretraining.json").read_text())["held_out"]
    assert run.masked_accuracy == held_out["masked_accuracy"]
    text = " ".join(report_md.read_text().split())
    assert "Model **tiny** (2 layers" in text and "power not yet computed" in text
    assert f"What it is: tiny (weights {run.weights}; made by `{run.recipe}`; held-out masked-token accuracy " \
           f"{run.masked_accuracy:.3f}); a checkpoint rebuilt from a recipe is another model" in text
    assert "no pretraining record of its weights" in text
    written = [p.read_text() for p in (results / "pairs" / "first" / "run.json", report_md, tmp_path / "report.json")]
    assert not any(str(tmp_path) in x for x in written)       # the model by no path of this machine
    return run


def test_a_tiny_pretrained_model_runs_an_experiment_into_its_own_folder(small_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["/x/pretrain.py", "--init-config", "tiny", "--corpus", "/x/corpus.txt",
                                     "--held-out", "0.1", "--out", "/x/tiny"])    # what config.json records as run
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
    run = assert_named_by_what_it_is(tmp_path, model, results, report_md)
    code, out, err = run_cli(reproduce.main, ["--plan", "--results", str(results)])   # the folder's model, no path
    assert code == 0, err
    lines = {x.split(":")[0]: x for x in out.splitlines()}
    assert "first run took" in lines["pairs"] and f"--results {results} --scale cpu --model CHECKPOINT " in \
        lines["reinit-small"]
    code, _, err = run_cli(reproduce.main, argv[2:])   # training it needs its checkpoint
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pass --model CHECKPOINT" in err
    code, _, err = run_cli(reproduce.main, [*argv[:1], "minilm", *argv[2:]])   # another model into its folder
    assert code == 2 and len(err.strip().splitlines()) == 1 and "with minilm" in err
    code, _, err = run_cli(pretrain.main, ["--init-config", "tiny", "--corpus", str(tmp_path / "corpus.txt"),
                                           "--max-length", "32", "--batch-size", "8", "--max-steps", "2",
                                           "--device", "cpu", "--precision", "fp32", "--held-out", "0.1", "--seed",
                                           "1", "--cache-dir", str(tmp_path / "cache"), "--out",
                                           str(tmp_path / "rebuilt" / "tiny")])
    assert code == 0, err        # the same name, other weights: a rebuilt checkpoint is another model
    code, _, err = run_cli(reproduce.main, [*argv[:1], str(tmp_path / "rebuilt" / "tiny" / "model"), *argv[2:]])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "a checkpoint rebuilt from a recipe is another model" in err
    assert f"trained tiny from weights {run.weights}, this checkpoint's are " in err


def test_a_schema_3_run_naming_a_path_still_loads_as_its_models_name(tmp_path):
    """A kept run of schema 3 (saved as committed: mini-20M's permute run, its model the folder it was loaded from)
    reads as schema 4, its model named; what it did not record stays unrecorded."""
    folder = tmp_path / "permute" / "first"
    folder.mkdir(parents=True)
    shutil.copyfile(ROOT / "tests" / "data" / "kept-run-schema-3.json", folder / "run.json")
    old = json.loads((folder / "run.json").read_text())
    assert old["schema"] == 3 and old["model"].startswith("/")
    run = kept.read_run(folder / "run.json")
    assert (run.schema, run.model, run.weights, run.recipe, run.masked_accuracy, run.heads) == (
        kept.SCHEMA, "mini-20M", old["weights"], "", None, 0)
    assert (run.experiment, run.seeds, run.sweeps, len(run.sittings)) == ("permute", [0, 1, 2], old["sweeps"], 1)
    assert [kept.name_from_path(x) for x in ("minilm", "org/bert", "/w/ladder/m/model", "/w/ladder/m/model-at-0")] \
        == ["minilm", "org/bert", "m", "model-at-0"]
    code, _, err = run_cli(reproduce.main, ["--plan", "--results", str(tmp_path)])   # no heads recorded, no folder
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "do not record mini-20M's attention heads" in err and "pass --model CHECKPOINT" in err


def test_mini_20M_is_named_by_what_it_is_and_plans_from_its_kept_runs():
    """Every kept page, report.json, run.json and null file names no folder of any machine; the kept runs record
    its recipe, weights, masked accuracy and heads, so --plan needs no checkpoint."""
    found = [f"{p}: {line}" for p in (ROOT / "docs" / "reproduction").rglob("*") if p.suffix in (".md", ".json")
             for line in p.read_text(encoding="utf-8").splitlines() if any(x in line for x in ("/work/", "/home/",
                                                                                               "/tmp/"))]
    assert not found
    identity = kept.identity_of(kept.load(MINI / "results"))
    assert (identity.name, identity.weights, identity.heads, round(identity.masked_accuracy, 3)) == (
        MODEL, WEIGHTS, 4, 0.347)
    assert identity.recipe.startswith("python pretrain.py --init-config mini ") and identity.recipe.endswith(
        "--seed 0 --out RUN")
    code, out, err = run_cli(reproduce.main, ["--plan", "--results", str(MINI / "results")])
    assert code == 0, err
    assert "--results docs/reproduction/mini-20M/results --scale cpu --model CHECKPOINT --only heads-top" in out

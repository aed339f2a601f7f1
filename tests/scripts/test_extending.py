"""The worked examples of docs/extending.md, each run here as the page shows it.

- a task added as a `TaskConfig` (SICK relatedness, the course's file layout) trains a few steps;
- a layer study (`truncate`: keep the bottom K layers) registered in `STUDIES` runs through ablate.py's real
  sweep and writes its results, summary and figure;
- a paper's finding declared with an existing measure (`arms`) gets its verdict from kept results;
- a learning-rate schedule (cosine) added to `SCHEDULES` drives a training run.

(The fourth head kind is tests/tasks/test_head_kinds.py's "ordinal".) Each example is registered for one test only
(monkeypatch), on the tiny 2-layer model and the course's files cut to 40 rows: seconds each.
"""
import json
import math
import shutil
from dataclasses import dataclass
from typing import Optional

import pytest

import ablate
import minbert
import train_multitask
from minbert import UserError
from tasks import registry
from tasks.ablation import arguments
from tasks.ablation.drawing import PRETTY, errorbar, fractions_of, legend, new_figure
from tasks.ablation.studies import STUDIES
from tasks.ablation.study import Shape, Study, grid, planned
from tasks.registry import TaskConfig
from tasks.reproduction import arms, experiments, findings, judging, kept, plan, report, sweeps
from tasks.reproduction.verdicts import NOT_REPRODUCED, REPRODUCED, Finding
from tasks.schedules import SCHEDULES, Schedule
from tests.helpers import run_cli
from tests.helpers.lines import trial_line

FAST = ["--device", "cpu", "--batch-size", "8", "--eval-batch-size", "64", "--precision", "fp32", "--max-steps", "2"]


# ---------------------------------------------------------------------------- (a) a task

SICK = TaskConfig(
    name="sick", files={"train": "sick-train.csv", "dev": "sick-dev.csv", "test": "sick-test-student.csv"},
    text_columns=("sentence_A", "sentence_B"), label_column="relatedness", head_kind="regress",
    num_classes=None, metric="pearson", label_range=(1.0, 5.0),
    prediction_header="Predicted_Relatedness", prediction_format="float32",
    outputs={"multitask": "sick-{split}-output.csv"}, max_length=64,
    description="SICK sentence relatedness, 1..5 (an example)")


def write_sick(folder, rows=24):
    """The course's layout: tab-separated, a header with an unnamed index column, then id and the columns."""
    words = "a man woman dog is are playing running cooking guitar in the park kitchen".split()
    for split in ("train", "dev", "test-student"):
        lines = ["\tid\tsentence_A\tsentence_B" + ("" if split == "test-student" else "\trelatedness")]
        for i in range(rows):
            a = " ".join(words[(i + j) % len(words)] for j in range(5))
            b = " ".join(words[(2 * i + j) % len(words)] for j in range(5))
            label = "" if split == "test-student" else f"\t{1 + (i % 9) / 2:.1f}"
            lines.append(f"{i}\ts{split[:2]}{i}\t{a} .\t{b} .{label}")
        (folder / f"sick-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_task_added_to_the_registry_trains(small_data_dir, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, SICK.name, SICK)
    data = tmp_path / "data"
    shutil.copytree(small_data_dir, data)
    write_sick(data)
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, ["--data-dir", str(data), "--model", str(tiny_model), "--tasks",
                                                  "sst,sick", "--out", str(out), *FAST])
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert -1 <= metrics["best"]["sick"] <= 1 and "overall" in metrics["best"]
    config = json.loads((out / "config.json").read_text())
    assert config["data"]["sick"]["dev"]["n_used"] == 24
    lines = (out / "predictions" / "sick-dev-output.csv").read_text().splitlines()
    assert lines[0] == "id \t Predicted_Relatedness " and len(lines) == 25   # the course's format
    assert all(1.0 <= float(line.split(" , ")[1]) <= 5.0 for line in lines[1:])
    assert (out / "predictions" / "sick-test-output.csv").exists()


# ---------------------------------------------------------------------------- (c) a layer study
# What tasks/ablation/studies/truncate.py would hold (there with relative imports: ..study, ..drawing, ...).


def add_arguments(group):
    group.add_argument("--keep", type=arguments.int_list, default=None, metavar="K,...",
                       help="keep layers 0..K-1 and drop the rest, for each K (default: every K from N-1 to 1)")


@dataclass(frozen=True)
class Options:
    keep: Optional[tuple] = planned()   # only chooses the trials: each trial's label says its K


def trials(config, shape: Shape) -> list:
    """The whole model (keep=N, the reference), then each K."""
    n = shape.num_layers
    keep = config.options.keep or tuple(range(n - 1, 0, -1))
    if any(k > n for k in keep):
        raise UserError(f"--keep {max(keep)}: the model has {n} layers")
    configs = [(f"keep={k}", {"keep": k}) for k in (n, *keep)]
    return grid("truncate", configs, config.seeds, config.fractions)


def run(sweep, trial) -> dict:
    encoder = minbert.truncate_layers(sweep.pretrained_copy(), trial.params["keep"])
    return sweep.fit(trial, encoder)


def reference(sweep, params) -> Optional[str]:
    """Every K is compared with the whole model at the same seeds."""
    whole = sweep.shape.num_layers
    return None if params["keep"] == whole else f"keep={whole}"


def truncate_curve(rows, metric: str):
    rows = [r for r in rows if r["metric"] == metric]
    if not rows:
        return None
    fig = new_figure(figsize=(5, 4))
    ax = fig.subplots()
    for i, fraction in enumerate(fractions_of(rows)):
        errorbar(ax, [r for r in rows if r["data_fraction"] == fraction], lambda r: r["params"]["keep"],
                 color=f"C{i}", marker="o", label=f"data fraction {fraction:g}")
    ax.set_xlabel("layers kept")
    ax.set_ylabel(PRETTY.get(metric, metric))
    legend(ax)
    return fig


def figures(sweep, records, rows, metric) -> dict:
    return {"truncate": truncate_curve(rows, metric)}


STUDY = Study(name="truncate", Options=Options, summary="keep the bottom K layers, drop the rest",
              title="truncate (layers 0..K-1 kept, the rest dropped, then fine-tuned)",
              add_arguments=add_arguments, trials=trials, run=run, figures=figures, reference=reference)


def test_a_new_layer_study_runs_through_the_sweep(small_data_dir, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setitem(STUDIES, "truncate", STUDY)   # in the library: its name in NAMES (studies/__init__.py)
    out = tmp_path / "truncate"
    argv = ["--mode", "truncate", "--task", "sst", "--keep", "1", "--seeds", "0,1", "--data-dir",
            str(small_data_dir), "--model", str(tiny_model), "--workers", "1", "--out", str(out), *FAST]
    code, stdout, err = run_cli(ablate.main, argv)
    assert code == 0, err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["config"], r["seed"]) for r in records) == [("keep=1", 0), ("keep=1", 1), ("keep=2", 0),
                                                                 ("keep=2", 1)]
    assert all(r["status"] == "ok" and r["steps"] == 2 for r in records)
    summary = (out / "summary.csv").read_text()
    assert "truncate,keep=1,1.0,dev/sst,2," in summary and ",keep=2,2," in summary  # paired with the whole model
    assert (out / "plots" / "truncate.png").read_bytes().startswith(b"\x89PNG")
    code, _, err = run_cli(ablate.main, [*argv[:5], "3", *argv[6:]])
    assert code == 2 and "--keep 3: the model has 2 layers" in err   # before any trial
    code, _, err = run_cli(ablate.main, ["--mode", "reinit", "--keep", "1", *argv[6:]])
    assert code == 2 and "--keep applies to --mode truncate only" in err


def truncate_sweeps(ctx):
    """What experiments.py would declare for it: one sweep, keeping two thirds and one third of the layers."""
    return [experiments.sweep("truncate", "truncate", task=ctx.tasks["primary"], keep=(ctx.high, ctx.low),
                              data_fractions=(ctx.scale.large,))]


def test_a_new_study_becomes_an_experiment_of_the_reproduction(monkeypatch):
    monkeypatch.setitem(STUDIES, "truncate", STUDY)
    experiment = experiments.Experiment("truncate", "the bottom two thirds or third kept, against the whole model",
                                        truncate_sweeps, figures=(("truncate", "truncate"),))
    monkeypatch.setitem(experiments.EXPERIMENTS, experiment.name, experiment)
    ctx = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
    spec = truncate_sweeps(ctx)[0]
    assert sweeps.as_arguments(spec.mode, spec.settings) == ["--task", "sst", "--keep", "4,2", "--data-fractions",
                                                              "0.25"]
    trial = ctx.scale.expected_steps * plan.measured("cpu", "cpu").step
    assert plan.experiment_minutes(experiment, ctx) == pytest.approx(5 * 3 * trial / 60)  # 5 seeds x 3 K


# ---------------------------------------------------------------------------- (d) a paper's finding
# What tasks/reproduction/findings/example.py would hold, and its entries in findings/__init__.py.

PAPER = "005_example.txt"   # its text in ../shared/papers/
TITLE = "An example paper (illustration)"
EXAMPLE = Finding(
    "example-top-third-suffices", PAPER, "training only the top layers is as good as training all of them.",
    "BERT-base, SST-2, 3 epochs", "the top layers trained against every layer trained", "SST dev accuracy", 0.01,
    "one point of accuracy: the smallest difference a leaderboard shows",
    "SST: top third trained minus every layer trained, paired by seed, within -/+ 0.01",
    "Carried in kind.", experiment="freeze", measure=arms.arms,
    keywords=dict(experiment="freeze", a="top", b="all", roles=("primary",), what="top third minus all"),
    kind="equivalence")


def _trials(config, scores):
    return [trial_line(config, seed, fraction=0.25, key=f"{config}-{seed}", dev={"sst": score})
            for seed, score in enumerate(scores)]


def _keep(results_dir, top, every):
    run = kept.KeptRun("freeze", "first", 1, "cpu", "minilm", dict(experiments.ROLES), [0, 1, 2, 3, 4], 6, {})
    kept.store(results_dir, run, {"sst-top": _trials("from=6", top), "sst-all": _trials("from=6", every)},
               kept.Sitting("2026-11-25 10:00 UTC", "abc", "test CPU", 60.0, 0))


def test_a_new_finding_gets_its_verdict_from_kept_results(tmp_path, monkeypatch):
    for module in (report, judging):   # in the library: its entry in findings/__init__.py
        monkeypatch.setattr(module, "FINDINGS", [*findings.FINDINGS, EXAMPLE])
    monkeypatch.setitem(findings.PAPERS, PAPER, TITLE)
    monkeypatch.setitem(findings.PAGES, PAPER, "example")
    ctx = experiments.Context(6, experiments.SCALES["cpu"], dict(experiments.ROLES))
    every = [0.40, 0.42, 0.41, 0.43, 0.40]
    _keep(tmp_path / "close", [s + 0.001 * (-1) ** i for i, s in enumerate(every)], every)
    verdict = judging.verdicts(kept.load(tmp_path / "close"), ctx)["first"][EXAMPLE.id]
    assert verdict.outcome == REPRODUCED and verdict.rows[0].label == "sst: top third minus all"
    _keep(tmp_path / "far", [s - 0.05 + 0.001 * i for i, s in enumerate(every)], every)
    assert judging.verdicts(kept.load(tmp_path / "far"), ctx)["first"][EXAMPLE.id].outcome == NOT_REPRODUCED
    text = report.write(tmp_path / "close", tmp_path / "report.md", ctx).read_text()
    line = next(x for x in text.splitlines() if x.startswith(f"| [{EXAMPLE.id}](example.md#{EXAMPLE.id}) |"))
    assert "**reproduced**" in line
    page = (tmp_path / "example.md").read_text()
    assert page.startswith(f"# {TITLE}") and f'<a id="{EXAMPLE.id}">' in page


# ---------------------------------------------------------------------------- (e) a learning-rate schedule


def cosine(total_steps: int, warmup: float):
    warm = max(1, int(total_steps * warmup))

    def f(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total_steps - warm))))
    return f


def test_a_new_schedule_drives_a_training_run(small_data_dir, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setitem(SCHEDULES, "cosine", Schedule("cosine", "warm-up then half a cosine to 0", cosine))
    out = tmp_path / "run"
    code, _, err = run_cli(train_multitask.main, ["--data-dir", str(small_data_dir), "--model", str(tiny_model),
                                                  "--tasks", "sst", "--lr-schedule", "cosine", "--out", str(out),
                                                  *FAST])
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["arguments"]["lr_schedule"] == "cosine"
    assert [round(cosine(11, 0.1)(s), 3) for s in (0, 1, 6, 11)] == [1.0, 1.0, 0.5, 0.0]

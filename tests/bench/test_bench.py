"""The benchmarks (bench/) on a tiny model and small course files (seconds): one way in, each one's plumbing."""
import json
import sys
from pathlib import Path

import pytest

from bench import e2e, trainer
from bench.common import run_worker
from tests.helpers import run_cli


def test_e2e_reads_readme_command_1_as_set_up_then_the_training_command():
    setup, options = e2e.readme_command()
    assert setup.startswith("python3 -m venv .venv") and "pip install" in setup and not setup.endswith("&&")
    assert options == []  # command 1 trains on the defaults


def test_e2e_times_the_parts_of_a_run(tiny_model, small_data_dir, tmp_path):
    out = tmp_path / "e2e.json"
    code, printed, err = run_cli(e2e.main, ["--no-setup", "--data-dir", str(small_data_dir), "--keep", str(tmp_path),
                                            "--json", str(out), "--", "--model", str(tiny_model),
                                            "--precision", "fp32", "--batch-size", "8", "--max-steps", "3",
                                            "--device", "cpu"])
    assert code == 0, err
    r = json.loads(out.read_text())
    assert r["steps"] == 3 and r["train_s"] > 0 and r["eval_s"] > 0 and r["finish_s"] > 0
    assert r["total_s"] >= r["start_s"] + r["train_s"] + r["eval_s"] + r["finish_s"]
    assert "training" in printed and "best dev" in printed
    assert (tmp_path / "run" / "predictions" / "sst-dev-output.csv").exists()


def test_profile_lists_the_steps_operators_by_kind(tiny_model, small_data_dir, tmp_path):
    out = tmp_path / "profile.json"
    code, printed, err = run_cli(trainer.main, ["--model", str(tiny_model), "--data-dir", str(small_data_dir),
                                                "--steps", "2", "--warmup", "1", "--top", "5", "--json", str(out),
                                                "--", "--batch-size", "4", "--device", "cpu"])
    assert code == 0, err
    figures = json.loads(out.read_text())
    assert figures["kinds"]["matmul"] > 0 and abs(sum(figures["kinds"].values()) - 1) < 1e-6
    assert len(figures["top"]) == 5 and "self CPU time by kind" in printed


def test_python_m_bench_lists_every_benchmark_and_refuses_an_unknown_one():
    from bench.__main__ import BENCHMARKS, main
    code, printed, _ = run_cli(main, ["--help"])
    assert code == 0 and all(f"  {name} " in printed for name in ("throughput", "trainer", "pretrain", "gpu", "part1",
                                                                  "e2e"))
    assert set(BENCHMARKS) == {"throughput", "trainer", "pretrain", "gpu", "gpu-kit", "part1", "e2e"}
    code, _, err = run_cli(main, ["compile"])
    assert code == 2 and "no benchmark 'compile'" in err


def test_each_benchmark_module_run_as_a_script_is_python_m_bench_name():
    """`python -m bench.gpu_kit` (as the developers' guide writes it) once ran nothing and exited 0: every
    module of a benchmark or worker hands its script run to `python -m bench NAME`."""
    import subprocess

    from bench.__main__ import BENCHMARKS, WORKERS
    repo = Path(__file__).resolve().parents[2]
    for name, (module, _) in {**BENCHMARKS, **WORKERS}.items():
        source = (repo / (module.replace(".", "/") + ".py")).read_text()
        assert f'run_as_bench("{module}")' in source.split('if __name__ == "__main__":')[-1], module
    done = subprocess.run([sys.executable, "-m", "bench.gpu_kit", "--help"], cwd=repo, capture_output=True,
                          text=True, check=True)
    assert done.stdout.startswith("usage: python -m bench gpu-kit")


def test_worker_report_reaches_the_parent_and_a_failed_worker_is_one_line():
    said = "from bench.common import report_result; print('noise'); report_result({'a': [1, 2]})"
    repo = Path(__file__).resolve().parents[2]
    assert run_worker([sys.executable, "-c", said], "the worker", cwd=repo) == {"a": [1, 2]}
    with pytest.raises(SystemExit, match=r"bench: the worker failed \(exit 3\): boom"):
        run_worker([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], "the worker")
    with pytest.raises(SystemExit, match=r"bench: the worker failed \(exit 0\)"):  # exited without reporting
        run_worker([sys.executable, "-c", "print('nothing')"], "the worker")


def test_gpu_bench_dry_run_plans_every_stage_within_600_s_and_runs_them_on_the_cpu(small_data_dir, tmp_path,
                                                                                     monkeypatch):
    """bench gpu --dry-run: the plan (every stage, the graphs stage its own seconds, 600 s in all), then each
    stage but the tests' plumbing on the CPU with a tiny bert-base shape: the graphed variants (the eager step on
    padded widths here) against the eager step and transformers', profiled, the trainer's windows of steps, the
    comparison; typed rows in the JSON and the markdown."""
    from bench import gpu
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the tiny model's folder
    assert sum(gpu.PLAN_S.values()) <= 600 and gpu.PLAN_S["graphs"] >= 150 and set(gpu.PLAN_S) == set(gpu.STAGES)
    out = tmp_path / "bench"
    code, printed, err = run_cli(gpu.main, ["--dry-run", "--stages", "graphs,trainer,compare", "--data-dir",
                                            str(small_data_dir), "--out", str(out)])
    assert code == 0, err
    assert "the plan: graphs 245 s, trainer 100 s, compare 65 s = 410 s" in printed
    result = json.loads((out / "bench-gpu.json").read_text())
    graphs = {r["setting"]: r for r in result["graphs"]}
    assert set(graphs) == {"eager", "graphed", "cudagraphs", "transformers"}, result["graphs"]
    assert all(r["kind"] == "GraphedStep" and r["ms_per_step"] > 0 and r["skips"] == 0 for r in graphs.values())
    assert all(r["ops"] >= r["compute_ops"] > 0 and r["kernels"] is None for r in graphs.values())  # no CUDA
    assert graphs["graphed"]["default_shapes"] >= graphs["graphed"]["shapes"] >= 1
    assert "dry run" in graphs["graphed"]["graphs"] and graphs["eager"]["default_shapes"] is None
    (run,) = result["trainer"]
    assert run["kind"] == "TrainerSteps" and run["precision"] == "fp32" and run["steps"] == 6
    assert run["timed_steps"] == 2 and run["steps_per_s"] > 0 and run["syncs_per_step"] > 0
    assert set(run["dev"]) >= {"sst", "quora", "sts"} and run["scaler_skipped"] is None
    (row,) = result["compare"]
    assert row["kind"] == "Compared" and row["train_ratio"] > 0 and row["eval_ratio"] > 0
    assert row["implementation"] == "fast"  # on a CPU: fast
    summary = (out / "bench-gpu.md").read_text()
    assert "| tiny | default | fp32 |" in summary and summary in printed
    assert "| tiny | graphed | fp32 |" in summary and "| tiny | - | fp32 | trainer's path: fast |" in summary
    assert "RESULT" in (out / "trainer-tiny-default.log").read_text()  # the worker's own output, kept


def test_a_worker_cut_at_its_seconds_is_a_failed_row(tmp_path):
    from bench.gpu import worker_rows
    rows = worker_rows([sys.executable, "-c", "import time; time.sleep(5)"], 1, tmp_path / "w.log", model="m")
    assert [(type(r).__name__, r.model) for r in rows] == [("Failed", "m")] and "cut at its 1 s" in rows[0].error


def test_the_comparison_times_the_encoder_the_trainer_would_run_on_the_device(tiny_model, small_data_dir):
    """On CUDA the trainer runs the reference; the comparison's minBERT is that one, and the fast path only when
    asked, said in its rows (the models are built on the CPU: no GPU needed to check the choice)."""
    import torch

    import minbert
    from bench.common import trainer_run
    from bench.gpu import compare_options, parse_args, run_options
    from bench.gpu_compare import FAST_PATH, compared_encoders

    def trainer_config(args, folder, precision):
        return trainer_run(run_options(args, folder, *compare_options(args, precision)), build=False)[0]
    for device in ("cuda", "cpu"):
        config = trainer_config(parse_args(["--dry-run", "--data-dir", str(small_data_dir)]), str(tiny_model), "fp32")
        encoders = compared_encoders(config, torch.device(device))
        assert encoders["minbert"].config.implementation == minbert.resolve_implementation("auto", device)
        assert type(encoders["transformers"].model).__name__ == "BertModel"
    asked = parse_args(["--dry-run", "--fast-path", "--data-dir", str(small_data_dir)])
    fast = compared_encoders(trainer_config(asked, str(tiny_model), "fp32"), torch.device("cuda"))["minbert"]
    assert fast.config.implementation == "fast" and "not the trainer's" in FAST_PATH


def test_the_profiles_operator_count_grows_with_depth(small_data_dir, tmp_path):
    """bench trainer --count-ops: the aten operators of one training step, more for a deeper model."""
    from bench.common import bert_base_shaped
    from bench.trainer import count_ops
    counts = {}
    for layers in (1, 2):
        folder = bert_base_shaped(tmp_path, num_hidden_layers=layers, hidden_size=32, num_attention_heads=2,
                                        intermediate_size=64)
        counts[layers] = count_ops(str(folder), "reference", "fp32", data_dir=str(small_data_dir), batch_size=4)
    assert 0 < counts[1]["compute_ops"] < counts[2]["compute_ops"] and counts[1]["ops"] < counts[2]["ops"]
    assert counts[2]["compute_ops"] < counts[2]["ops"] and counts[2]["leaf_ops"] < counts[2]["ops"]


def test_gpu_bench_without_a_gpu_is_one_line_exit_2(monkeypatch):
    import torch

    from bench import gpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = run_cli(gpu.main, [])
    assert code == 2 and err.count("\n") == 1 and "no CUDA GPU here" in err
    with pytest.raises(SystemExit):
        gpu.parse_args(["--plan", "graphs=soon"])
    assert gpu.parse_args(["--plan", "tests=90"]).plan == {**gpu.PLAN_S, "tests": 90.0}


def test_gpu_bench_reads_pytests_summary():
    from bench.gpu import pytest_summary
    out = "....F.s\nFAILED tests/test_gpu.py::test_x - assert 0\n2 failed, 26 passed, 1 skipped in 93.41s (0:01:33)\n"
    summary = pytest_summary(out)
    assert summary.counts == {"failed": 2, "passed": 26, "skipped": 1} and summary.pytest_s == 93.41
    assert summary.failures == ["FAILED tests/test_gpu.py::test_x - assert 0"]
    assert pytest_summary("").counts == {}
    cut = "tests/test_gpu.py::test_a PASSED [ 3%]\ntests/test_gpu.py::test_b[fp16] FAILED [ 6%]\ntests/t"
    assert pytest_summary(cut).counts == {"passed": 1, "failed": 1}  # stopped before its summary
    assert pytest_summary("== slowest 6 durations ==\n12.50s call     tests/test_gpu.py::test_a\n").slowest == \
        ["12.50s call     tests/test_gpu.py::test_a"]


def test_gpu_bench_counts_cudas_sync_warnings_and_the_profilers_sync_calls(monkeypatch):
    """The CUDA side of bench.gpu_trainer's counter, CUDA's calls stood in for: what it counts and what it leaves."""
    import warnings
    from types import SimpleNamespace

    import torch

    from bench.gpu_trainer import SyncCounter
    modes = []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)

    class Profile:
        def __init__(self, activities):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def events(self):
            names = ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaMemcpyAsync", "cudaStreamSynchronize"]
            return [SimpleNamespace(name=n) for n in names]

    monkeypatch.setattr(torch.profiler, "profile", Profile)
    counter = SyncCounter(cuda=True)
    counter.start()
    for _ in range(3):
        warnings.warn("called a synchronizing CUDA operation", UserWarning)
    warnings.warn("something else", UserWarning)
    counter.stop()
    assert counter.count == 3 and counter.calls == 2 and modes == ["warn", "default"]
    monkeypatch.setattr(Profile, "events", lambda self: [SimpleNamespace(name="cudaStreamSynchronize")])
    counter = SyncCounter(cuda=True)
    counter.start()
    counter.stop()
    assert counter.calls is None  # no kernel launch recorded: the runtime's calls were not, either
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        warnings.warn("called a synchronizing CUDA operation", UserWarning)
    assert len(later) == 1 and counter.count == 0  # stopped: warnings are the caller's again


def test_pretrain_bench_masks_as_pretraining_and_times_both_models(tmp_path):
    """bench.pretrain's batches (full sequences, pretraining's masking: 15% of the words, 80% [MASK], never
    [CLS] or [SEP]), the same in every process, and a tiny run of both workers."""
    import torch

    from bench import pretrain
    args = pretrain.parse_args(["--batch-size", "32", "--length", "128", "--steps", "2", "--warmup", "0"])
    batches = pretrain.build_batches(args)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(batches, pretrain.build_batches(args)))
    inputs = torch.stack([b["input_ids"] for b in batches])
    labels = torch.stack([b["labels"] for b in batches])
    assert inputs.shape == (2, 32, 128) and all(bool(b["attention_mask"].all()) for b in batches)
    chosen = labels != -100
    assert not chosen[..., 0].any() and not chosen[..., -1].any()
    n = int(chosen.sum())                                                 # about 1,200 of 8,064 words
    assert abs(n / (64 * 126) - 0.15) < 0.02
    assert abs(float((inputs[chosen] == 103).sum()) / n - 0.8) < 0.05     # 103: [MASK] in bert-base-uncased
    out = tmp_path / "pretrain.json"
    code, printed, err = run_cli(pretrain.main, ["--size", "tiny", "--batch-size", "4", "--length", "16", "--steps",
                                                 "2", "--warmup", "1", "--precision", "fp32", "--json", str(out)])
    assert code == 0, err
    figures = json.loads(out.read_text())
    assert figures["tokens"] == 2 * 4 * 16 and set(figures["tokens_per_s"]) == {"minbert", "transformers"}
    assert abs(figures["first_loss"]["minbert"] - figures["first_loss"]["transformers"]) < 1e-4
    assert figures["info"]["minbert"]["class"] == "FastBertForMaskedLM" and "target: minBERT" in printed


def test_the_gpu_kit_unpacks_to_the_embedded_model_rounded_to_fp16_and_the_data(small_data_dir, tmp_path):
    """bench.gpu_kit's kit, unpacked as run.sh does: the stand-in package resolves `minilm` to the widened
    weights (the packaged ones rounded to fp16), and the course's files come back as they were."""
    import subprocess

    import torch

    import minbert
    from bench import gpu_kit
    kit = tmp_path / ".gpu"
    gpu_kit.build(kit, small_data_dir)
    assert not (kit / "minilm16" / "model.safetensors").exists()  # gzipped: what keeps the kit within 64 MiB
    script = (kit / "run.sh").read_text()
    assert "exec python3 -m bench gpu --out" in script and 'PYTHONPATH="$KIT/site:$REPO' in script
    assert ".gpu/site" not in script and 'cd "$REPO"' in script  # absolute: the kit's folder found from the script
    gpu_kit.main(["--unpack", str(kit)])
    assert (kit / "data" / "sts-dev.csv").read_bytes() == (small_data_dir / "sts-dev.csv").read_bytes()
    code = "import minbert; print(minbert.resolve('minilm')[0])"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONPATH": f"{kit / 'site'}:{Path(__file__).resolve().parents[2]}"}).stdout
    assert Path(found.strip()) == kit / "minilm"
    widened = minbert.from_pretrained(str(kit / "minilm")).state_dict()
    packaged = minbert.from_pretrained("minilm").state_dict()
    assert all(torch.equal(widened[k], packaged[k].half().float()) for k in packaged)


def made(kind, **given):
    """A row of `kind` with `given` figures and zeros for the rest it requires."""
    import dataclasses
    required = {f.name: 0 for f in dataclasses.fields(kind)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return kind(**{**required, **given})


def test_gpu_bench_reports_issue_48s_targets_met_or_not():
    from bench.gpu_report import Compared, Skipped, TrainerSteps, row_from_json, targets_lines
    rows = [made(TrainerSteps, model="bert-base", setting="default", precision="bf16", steps_per_s=14.5),
            made(TrainerSteps, model="embedded", setting="default", precision="bf16", steps_per_s=200.0),
            made(Compared, model="bert-base", precision="bf16", implementation="reference", train_ratio=2.1,
                 eval_ratio=1.2, minbert_peak_mib=3000.0),
            Skipped(model="bert-base", precision="fp16", why="budget")]
    lines = "\n".join(targets_lines(rows))
    assert "| bert-base: the trainer's step, bf16 | 69.0 ms | <= 15 ms | NOT MET |" in lines
    assert "| embedded: the trainer's step, bf16 | 5.0 ms | <= 8 ms | met |" in lines
    assert "| training against transformers, bf16 (reference) | 2.10x | >= 2.0x | met |" in lines
    assert "| evaluation against transformers, bf16 (reference) | 1.20x | >= 1.5x | NOT MET |" in lines
    assert "3,000 MiB | <= 3,277 MiB | met" in lines and "fp16" not in lines
    assert targets_lines([]) == []
    assert all(row_from_json(r.to_json()) == r for r in rows)


@pytest.mark.gpu
def test_gpu_bench_profiles_and_compares_the_trainers_cuda_path(small_data_dir, tmp_path, monkeypatch):
    """On CUDA, a tiny model: the graphs stage counts kernels and launches, and the comparison times the
    reference (what the trainer runs there) against transformers, each run's peak memory its own."""
    from bench import gpu
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "bench"
    code, _, err = run_cli(gpu.main, ["--dry-run", "--device", "cuda", "--stages", "graphs,compare", "--precisions",
                                      "bf16,fp32", "--data-dir", str(small_data_dir), "--out", str(out)])
    assert code == 0, err
    result = json.loads((out / "bench-gpu.json").read_text())
    for r in result["graphs"]:
        assert r["kernels"] > 0 and r["launches"] > 0 and r["device_busy_ms"] > 0 and r["compute_ops"] > 0, r
    assert [r["precision"] for r in result["compare"]] == ["bf16", "fp32"]
    for r in result["compare"]:
        assert r["implementation"] == "reference" and r["minbert_path"] == "trainer's path", r
        assert r["minbert_peak_mib"] > 0 and r["transformers_peak_mib"] > 0 and r["train_ratio"] > 0, r

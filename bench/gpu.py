"""What one CUDA GPU does with this project, in one command and under 8 minutes.

    python -m bench.gpu [--out DIR] [--budget SECONDS] [--stages tests,trainer,profile,compare] [--fast-path]
    python -m bench.gpu --dry-run          # no GPU: every stage's plumbing on the CPU, a tiny model, seconds

On whatever GPU torch finds (cuda:0), four stages, each capped so the whole stays within --budget (420 s):

1. tests: `pytest -m gpu -v tests` (every gpu-marked test) in a subprocess (cap --tests-cap): passed, failed, skipped.
2. trainer: `bench.gpu_trainer`, one process per model and setting (--settings: the default eager step and
   `--cuda-graphs on`), the embedded model and bert-base's shape (random
   weights, `bench.sizes`), --trainer-steps optimizer steps of the default run in bf16 (where native) and
   fp16: steps/s and examples/s (after a warm-up), peak memory, host syncs per step (CUDA's sync debug
   mode and the profiler's synchronising calls, over the last --sync-steps steps), the fp16 scaler's
   skipped steps, and the dev scores after those steps (bert-base's shape starts from random weights:
   near chance).
3. profile: `bench.step_profile` on the trainer's own steps, per model (--profile-models) in three settings:
   the default step (precision auto), fp32 (TF32 unless --no-tf32), and one fixed width (the default step's
   first timed step repeated: shapes never change): per step, the host's time, the device's busy time,
   kernels, kernel launches and aten operators.
4. compare: `bench.gpu_compare` on bert-base's shape: the trainer's own run (`train_multitask.py`'s model,
   loss, optimizer and steps; minBERT as the trainer loads it on this device: the reference) against the same
   run with transformers' BertModel (sdpa) as its encoder, same steps, same dev rows: train and evaluation
   examples/s, their ratio, peak memory, per precision (bf16, fp16, fp32 with TF32), as long as the budget
   lasts. `--fast-path` times minBERT's fast path instead (`--implementation fast`, not the trainer's on
   CUDA), and every row names the path it timed.

TF32 is on for fp32 matmuls, as in the trainer (--no-tf32 turns it off). Writes DIR/bench-gpu.json (every
figure) and DIR/bench-gpu.md (the tables, ready for a docs/measurements log), after each stage, with each
stage's output in DIR/gpu-tests.log and DIR/trainer-MODEL-SETTING.log, and prints the tables. Without
CUDA it says so in one line and exits 2 (unless --dry-run).
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.common import DATA_DIR_HELP, RESULT_PREFIX
from bench.gpu_report import markdown

REPO = Path(__file__).resolve().parents[1]
STAGES = ("tests", "trainer", "profile", "compare")
SETTINGS = {"default": [], "graphs": ["--cuda-graphs", "on"], "smart": ["--smart"], "pcgrad": ["--surgery", "pcgrad"],
            "compile": ["--compile"]}
DRY_SHAPE = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
DRY_RUN = dict(device="cpu", models="tiny", settings="default", trainer_precisions="fp32", trainer_steps=6,
               trainer_warmup=2, sync_steps=2, profile_models="tiny", profile_steps=2, profile_warmup=1,
               precisions="fp32", tasks="sst", compare_model="tiny", batch_size=4, eval_batch_size=16,
               eval_examples=16, steps=4, warmup=1, rounds=2)
RESERVE_S = {"profile": 40, "compare": 60}  # what the trainer stage leaves to each later stage asked for


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", default=None,
                   help="folder for bench-gpu.json and bench-gpu.md (default: runs/bench-gpu-<time>)")
    p.add_argument("--budget", type=float, default=420, help="seconds for all stages (default: %(default)s)")
    p.add_argument("--stages", default=",".join(STAGES), help="which of: " + ", ".join(STAGES))
    p.add_argument("--dry-run", action="store_true", help="on the CPU, tiny models, a few steps: the plumbing only")
    p.add_argument("--device", default="cuda")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tf32", action="store_true", help="fp32 matmuls in IEEE fp32, in every stage")
    tests = p.add_argument_group("tests")
    tests.add_argument("--tests-cap", type=float, default=230, help="seconds (default: %(default)s)")
    trainer = p.add_argument_group("trainer")
    trainer.add_argument("--models", default="embedded,bert-base",
                         help="embedded (minilm), bert-base (its shape, random weights) or folders "
                              "(default: %(default)s)")
    trainer.add_argument("--trainer-precisions", default="bf16,fp16", help="(default: %(default)s)")
    trainer.add_argument("--trainer-steps", type=int, default=200,
                         help="per model and precision (default: %(default)s)")
    trainer.add_argument("--trainer-warmup", type=int, default=20, help="untimed first steps (default: %(default)s)")
    trainer.add_argument("--sync-steps", type=int, default=10,
                         help="last steps, host syncs counted (default: %(default)s)")
    trainer.add_argument("--settings", default="default,graphs",
                         help="comma-separated trainer settings, each a run per model: " + ", ".join(SETTINGS))
    profile = p.add_argument_group("profile (the trainer's steps under torch.profiler)")
    profile.add_argument("--profile-models", default="embedded,bert-base", help="(default: %(default)s)")
    profile.add_argument("--profile-steps", type=int, default=10, help="steps profiled per setting "
                                                                        "(default: %(default)s)")
    profile.add_argument("--profile-warmup", type=int, default=5, help="(default: %(default)s)")
    compare = p.add_argument_group("compare (the trainer's run, minBERT's encoder against transformers')")
    compare.add_argument("--compare-model", default="bert-base", help="(default: %(default)s)")
    compare.add_argument("--precisions", default="bf16,fp16,fp32", help="(default: %(default)s)")
    compare.add_argument("--fast-path", action="store_true",
                         help="time minBERT's fast path (--implementation fast), not the trainer's path on CUDA "
                              "(the reference); every row says which")
    compare.add_argument("--tasks", default="sst,quora,sts", help="the run's tasks (default: %(default)s)")
    compare.add_argument("--batch-size", type=int, default=32)
    compare.add_argument("--eval-batch-size", type=int, default=128)
    compare.add_argument("--eval-examples", type=int, default=512, help="dev rows per task evaluated each round "
                                                                       "(default: %(default)s)")
    compare.add_argument("--steps", type=int, default=24, help="timed steps per model and phase")
    compare.add_argument("--warmup", type=int, default=4)
    compare.add_argument("--rounds", type=int, default=6)
    args = p.parse_args(argv)
    if args.dry_run:
        given = {a.dest for a in p._actions if any(o in (argv or sys.argv[1:]) for o in a.option_strings)}
        for name, value in DRY_RUN.items():
            if name not in given:
                setattr(args, name, value)
    unknown = set(args.stages.split(",")) - set(STAGES) | set(args.settings.split(",")) - set(SETTINGS)
    if unknown:
        p.error(f"unknown stage or setting: {', '.join(sorted(unknown))}")
    return args


class Clock:
    def __init__(self, budget: float):
        self.start, self.budget = time.perf_counter(), budget

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.start)


def run_capped(cmd: list, cap: float) -> tuple:
    """(exit status or None when cut at `cap` seconds, stdout, stderr, seconds)."""
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(cap, 1))
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        text = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
        code, out, err = None, *text
    return code, out, err, time.perf_counter() - started


def pytest_summary(output: str) -> dict:
    """Counts from pytest's last line ("3 passed, 1 skipped in 4.2s"), or when it never came (the run was cut)
    from its verbose per-test lines; the FAILED / ERROR lines; --durations' slowest."""
    lines = output.strip().splitlines()
    last = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|skipped|error)", line)), "")
    counts = {kind.rstrip("s") if kind == "errors" else kind: int(n)
              for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)", last)}
    if not last:
        for kind in re.findall(r"::\S+ (PASSED|FAILED|SKIPPED|ERROR)", output):
            counts[kind.lower()] = counts.get(kind.lower(), 0) + 1
    seconds = re.search(r" in ([\d.]+)s", last)
    return {"counts": counts, "pytest_s": float(seconds.group(1)) if seconds else None,
            "failures": [line for line in lines if line.startswith(("FAILED", "ERROR"))],
            "slowest": [line.strip() for line in lines if re.match(r"\s*[\d.]+s (call|setup|teardown) ", line)]}


def stage_tests(args, clock: Clock) -> dict:
    cap = min(args.tests_cap, clock.left() - 60)
    code, out, err, seconds = run_capped([sys.executable, "-m", "pytest", "-m", "gpu", "-v", "--durations=6",
                                          "tests"], cap)
    (args.out_dir / "gpu-tests.log").write_text(out + err)
    result = {**pytest_summary(out), "exit": code, "wall_s": seconds}
    if code is None:
        result["cut"] = f"stopped at its cap of {cap:.0f} s"
    return result


def model_folder(name: str, args) -> str:
    """embedded, bert-base or a folder; --dry-run's tiny bert-base shape for the named ones."""
    from bench import sizes
    if name in ("tiny", "bert-base") and args.dry_run:
        return str(sizes.bert_base_shaped(sizes.default_cache(), **DRY_SHAPE))
    if name == "bert-base":
        return str(sizes.bert_base_shaped(sizes.default_cache()))
    return "minilm" if name == "embedded" else name


def stage_trainer(args, clock: Clock) -> list:
    rows = []
    for setting in args.settings.split(","):
        for name in args.models.split(","):
            cap = clock.left() - sum(s for stage, s in RESERVE_S.items() if stage in args.stages.split(","))
            if cap < 20:
                rows.append({"model": name, "setting": setting, "skipped": f"budget: {clock.left():.0f} s left"})
                continue
            cmd = [sys.executable, "-m", "bench.gpu_trainer", "--model", model_folder(name, args),
                   "--precisions", args.trainer_precisions, "--steps", str(args.trainer_steps),
                   "--warmup", str(args.trainer_warmup), "--sync-steps", str(args.sync_steps), "--device", args.device,
                   *(["--data-dir", args.data_dir] if args.data_dir else []), "--", "--seed", str(args.seed),
                   *SETTINGS[setting], *(["--no-tf32"] if args.no_tf32 else [])]
            code, out, err, seconds = run_capped(cmd, cap)
            (args.out_dir / f"trainer-{Path(name).name}-{setting}.log").write_text(out + err)
            reported = [json.loads(line[len(RESULT_PREFIX):]) for line in out.splitlines()
                        if line.startswith(RESULT_PREFIX)]
            runs = [r for report in reported for r in report["runs"]]
            rows += [{**r, "model": name, "setting": setting} for r in runs]
            if code != 0:
                why = "cut at the budget" if code is None else f"exit {code}"
                rows.append({"model": name, "setting": setting,
                             "error": f"{why}: {(err.strip().splitlines() or [''])[-1][:300]}", "wall_s": seconds})
    return rows


def trainer_inputs(args, name: str, precision: str = "fp32"):
    """The default run's options on model `name` and its prepared data (tasks.inputs.prepare), as the trainer
    makes them on args.device."""
    from bench.gpu_compare import trainer_config
    from tasks.inputs import prepare
    config = trainer_config(args, model_folder(name, args), precision)
    return config, prepare(config, warn=lambda message: None)


def stage_profile(args, clock: Clock) -> list:
    import dataclasses

    import torch

    from bench.step_profile import profile_steps
    from tasks.training import build_run
    rows = []
    for name in args.profile_models.split(","):
        if clock.left() < 15:
            rows.append({"model": name, "skipped": f"budget: {clock.left():.0f} s left"})
            continue
        config, inputs = trainer_inputs(args, name, "auto")
        plan = None
        for setting, precision in (("default", inputs.precision), ("fp32", "fp32"), ("fixed width", inputs.precision)):
            row = {"model": name, "setting": setting, "precision": precision,
                   "tf32": inputs.tf32 and precision == "fp32"}
            if clock.left() < 10:
                rows.append({**row, "skipped": f"budget: {clock.left():.0f} s left"})
                continue
            run = build_run(dataclasses.replace(config, precision=precision),
                            dataclasses.replace(inputs, precision=precision, precision_requested=precision))
            plan = plan or run.sampler.plan(0)
            warmup, steps = plan[:args.profile_warmup], plan[args.profile_warmup:][:args.profile_steps]
            if setting == "fixed width":
                warmup, steps = [steps[0]] * args.profile_warmup, [steps[0]] * args.profile_steps
            row.update(profile_steps(torch, run, steps, warmup), implementation=run.model.encoder.config.implementation)
            rows.append(row)
            del run
            if inputs.device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


def stage_compare(args, clock: Clock) -> list:
    import torch

    import minbert
    from bench.gpu_compare import time_models
    config, inputs = trainer_inputs(args, args.compare_model)
    rows = []
    for precision in (p for p in args.precisions.split(",") if p not in ("", "none")):
        row = {"model": args.compare_model, "precision": precision}
        if not minbert.native(precision, inputs.device):
            rows.append({**row, "skipped": "not native on this device"})
        elif clock.left() < 20:
            rows.append({**row, "skipped": f"budget: {clock.left():.0f} s left"})
        else:
            rows.append({**row, **time_models(torch, args, config.model, precision, inputs)})
    return rows


def machine(args) -> dict:
    import torch

    from tasks.machine import cpu_model, source_commit
    device = torch.device(args.device)
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cpu": cpu_model(), "device": "cpu",
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **source_commit(REPO)}
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        out.update(device=properties.name, capability=".".join(map(str, torch.cuda.get_device_capability(device))),
                   memory_mib=properties.total_memory // 2**20)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    if not args.dry_run and not torch.cuda.is_available():
        print("bench.gpu: no CUDA GPU here (torch.cuda.is_available() is False); --dry-run runs its plumbing on "
              "the CPU", file=sys.stderr)
        return 2
    from tasks.machine import use_tf32
    clock = Clock(args.budget)
    use_tf32(torch.device(args.device), not args.no_tf32)
    out = Path(args.out or REPO / "runs" / time.strftime("bench-gpu-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    args.out_dir = out  # where the stages leave their logs
    results = {"machine": machine(args), "command": ["python", "-m", "bench.gpu", *(argv or sys.argv[1:])],
               "budget_s": args.budget, "dry_run": args.dry_run}
    print(f"bench.gpu: {results['machine']['device']}; torch {torch.__version__}; results in {out}", flush=True)
    summary = write(out, results, 0.0)
    for stage, run in (("tests", stage_tests), ("trainer", stage_trainer), ("profile", stage_profile),
                       ("compare", stage_compare)):
        if stage in args.stages.split(","):
            started = time.perf_counter()
            results[stage] = run(args, clock)
            print(f"bench.gpu: {stage} done in {time.perf_counter() - started:.0f} s, {clock.left():.0f} s left",
                  flush=True)
            summary = write(out, results, args.budget - clock.left())  # after each stage: a kill keeps them
    print(summary)
    return 0


def write(out: Path, results: dict, seconds: float) -> str:
    """bench-gpu.json and bench-gpu.md as they stand; returns the markdown."""
    results["total_s"] = seconds
    (out / "bench-gpu.json").write_text(json.dumps(results, indent=1))
    summary = markdown(results)
    (out / "bench-gpu.md").write_text(summary)
    return summary


if __name__ == "__main__":
    sys.exit(main())

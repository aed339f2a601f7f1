"""What one CUDA GPU does with this project, in one command and under 8 minutes.

    python -m bench.gpu [--out DIR] [--budget SECONDS] [--stages tests,trainer,compare]
    python -m bench.gpu --dry-run          # no GPU: every stage's plumbing on the CPU, a tiny model, seconds

On whatever GPU torch finds (cuda:0), three stages, each capped so the whole stays within --budget (420 s):

1. tests: `pytest -m gpu -v tests` (every gpu-marked test) in a subprocess (cap --tests-cap): passed, failed, skipped.
2. trainer: `bench.gpu_trainer`, one process per model, the embedded model and bert-base's shape (random
   weights, `bench.sizes`), --trainer-steps optimizer steps of the default run in bf16 (where native) and
   fp16: steps/s and examples/s (after a warm-up), peak memory, host syncs per step (CUDA's sync debug
   mode and the profiler's synchronising calls, over the last --sync-steps steps), the fp16 scaler's
   skipped steps, and the dev scores after those steps (bert-base's shape starts from random weights:
   near chance).
3. compare: `bench.gpu_compare` on bert-base's shape, minBERT against transformers on the same batches
   (train and evaluation examples/s, their ratio, peak memory), per precision and task, as long as the
   budget lasts.

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
STAGES = ("tests", "trainer", "compare")
SETTINGS = {"default": [], "smart": ["--smart"], "pcgrad": ["--surgery", "pcgrad"], "compile": ["--compile"]}
DRY_SHAPE = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
DRY_RUN = dict(device="cpu", models="tiny", trainer_precisions="fp32", trainer_steps=6, trainer_warmup=2,
               sync_steps=2, precisions="fp32", tasks="sst", batch_size=4, eval_batch_size=16, steps=4, warmup=1,
               rounds=2)
COMPARE_RESERVE_S = 45  # what the trainer stage leaves to the comparison


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
    trainer.add_argument("--settings", default="default",
                         help="comma-separated trainer settings, each a run per model: " + ", ".join(SETTINGS))
    compare = p.add_argument_group("compare (minBERT against transformers)")
    compare.add_argument("--compare-model", default="bert-base", help="(default: %(default)s)")
    compare.add_argument("--precisions", default="bf16,fp16", help="(default: %(default)s; fp32 too if wanted)")
    compare.add_argument("--tasks", default="sst,quora")
    compare.add_argument("--batch-size", type=int, default=32)
    compare.add_argument("--eval-batch-size", type=int, default=128)
    compare.add_argument("--steps", type=int, default=24, help="timed steps per model, task and phase")
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
    args.order, args.prime = "shuffled", False  # what bench.throughput's build_batches reads
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
            cap = clock.left() - (COMPARE_RESERVE_S if "compare" in args.stages else 0)
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


def stage_compare(args, clock: Clock) -> list:
    import torch

    import minbert
    from bench.gpu_compare import time_models
    folder = model_folder(args.compare_model, args)
    tokenizer = minbert.Tokenizer.from_folder(str(minbert.resolve(folder)[0]))
    rows = []
    for precision in (p for p in args.precisions.split(",") if p not in ("", "none")):
        for task in args.tasks.split(","):
            if not minbert.native(precision, torch.device(args.device)):
                rows.append({"task": task, "precision": precision, "skipped": "not native on this device"})
            elif clock.left() < 25:
                rows.append({"task": task, "precision": precision, "skipped": f"budget: {clock.left():.0f} s left"})
            else:
                rows.append(time_models(torch, args, folder, precision, task, tokenizer))
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
    for stage, run in (("tests", stage_tests), ("trainer", stage_trainer), ("compare", stage_compare)):
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

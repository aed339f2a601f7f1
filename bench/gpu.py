"""What one CUDA GPU does with this project, in one run planned to end within 600 s (the device's call limit).

    python -m bench gpu [--out DIR] [--stages graphs,tests,trainer,compare] [--fast-path]
    python -m bench gpu --dry-run          # no GPU: every stage's plumbing on the CPU, a tiny model, seconds

Four stages on cuda:0, each with its seconds in the plan (`PLAN_S`, printed first; a stage that ends early
leaves its seconds to the next): graphs (the trainer's graphed step against its eager one and transformers',
profiled: bench/gpu_graphs.py), tests (`pytest -m gpu`), trainer (the default run's steps per model and
precision: bench/gpu_trainer.py), compare (the trainer's run with minBERT's encoder against transformers':
bench/gpu_compare.py). Each times the run `train_multitask.py` builds from the options `run_options` makes of
these flags; TF32 is on for fp32 matmuls, as in the trainer. Writes DIR/bench-gpu.json (a typed row per
figure: bench/gpu_report.py) and DIR/bench-gpu.md after each stage, each subprocess's output in DIR/*.log, and
prints the tables. Without CUDA, one line and exit 2 (unless --dry-run).
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import dataclasses
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, arguments, bench_command, data_dir, model_folder, results_in, trainer_run
from bench.gpu_report import Failed, Machine, Report, Skipped, TestsRun, markdown, row_from_json

PLAN_S = {"graphs": 245, "tests": 150, "trainer": 100, "compare": 65}  # 560 of the device's 600
STAGES = tuple(PLAN_S)
SETTINGS = {"default": [], "graphs": ["--cuda-graphs", "on"], "smart": ["--smart"], "pcgrad": ["--surgery", "pcgrad"],
            "compile": ["--compile"]}
DRY_SHAPE = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
DRY_RUN = dict(device="cpu", models="tiny", settings="default", trainer_precisions="fp32", trainer_steps=6,
               trainer_warmup=2, sync_steps=2, precisions="fp32", tasks="sst", compare_model="tiny", batch_size=4,
               eval_batch_size=16, eval_examples=16, steps=4, warmup=1, rounds=2, graphs_model="tiny",
               graphs_precision="fp32", graphs_steps=6)


def add_stage_args(p) -> None:
    graphs = p.add_argument_group("graphs (the graphed step against the eager one and transformers')")
    graphs.add_argument("--graphs-model", default="bert-base", help="its model")
    graphs.add_argument("--graphs-precision", default="bf16", help="its precision")
    graphs.add_argument("--graphs-steps", type=int, default=24, help="timed steps")
    graphs.add_argument("--graphs-shapes", type=int, default=4, help="distinct step shapes")
    trainer = p.add_argument_group("trainer")
    trainer.add_argument("--models", default="embedded,bert-base", help="embedded (minilm), bert-base (its "
                         "shape, random weights) or folders")
    trainer.add_argument("--trainer-precisions", default="bf16,fp16", help="its precisions")
    trainer.add_argument("--trainer-steps", type=int, default=200, help="per model and precision")
    trainer.add_argument("--trainer-warmup", type=int, default=20, help="untimed first steps")
    trainer.add_argument("--sync-steps", type=int, default=10, help="last steps, host syncs counted")
    trainer.add_argument("--settings", default="default",
                         help="comma-separated trainer settings, each a run per model: " + ", ".join(SETTINGS))
    compare = p.add_argument_group("compare (the trainer's run, minBERT's encoder against transformers')")
    compare.add_argument("--compare-model", default="bert-base", help="its model")
    compare.add_argument("--precisions", default="bf16,fp16,fp32", help="its precisions")
    compare.add_argument("--fast-path", action="store_true",
                         help="time minBERT's fast path (--implementation fast), not the trainer's path on CUDA "
                              "(the reference); every row says which")
    compare.add_argument("--tasks", default="sst,quora,sts", help="the run's tasks")
    compare.add_argument("--batch-size", type=int, default=32)
    compare.add_argument("--eval-batch-size", type=int, default=128)
    compare.add_argument("--eval-examples", type=int, default=512, help="dev rows per task, each round")
    compare.add_argument("--steps", type=int, default=24, help="timed steps per model and phase")
    compare.add_argument("--warmup", type=int, default=4)
    compare.add_argument("--rounds", type=int, default=6)


def parse_args(argv=None):
    p = arguments("gpu", __doc__, "data-dir")
    p.add_argument("--out", default=None,
                   help="folder for bench-gpu.json and bench-gpu.md (default: runs/bench-gpu-<time>)")
    p.add_argument("--plan", default=None, help="stage=seconds,... to change the plan (default: " +
                   ", ".join(f"{k}={v}" for k, v in PLAN_S.items()) + ")")
    p.add_argument("--stages", default=",".join(STAGES), help="which of: " + ", ".join(STAGES))
    p.add_argument("--dry-run", action="store_true", help="on the CPU, tiny models, a few steps: the plumbing only")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tf32", action="store_true", help="fp32 matmuls in IEEE fp32, in every stage")
    add_stage_args(p)
    if p.parse_args(argv).dry_run:  # its defaults; any option given still wins
        p.set_defaults(**DRY_RUN)
    args = p.parse_args(argv)
    args.plan = plan(args.plan, p)
    unknown = set(args.stages.split(",")) - set(STAGES) | set(args.settings.split(",")) - set(SETTINGS)
    if unknown:
        p.error(f"unknown stage or setting: {', '.join(sorted(unknown))}")
    return args


def plan(text, parser) -> dict:
    """The seconds of each stage: PLAN_S, with --plan's stage=seconds in place of the defaults."""
    out = dict(PLAN_S)
    for item in filter(None, (text or "").split(",")):
        stage, _, seconds = item.partition("=")
        if stage not in PLAN_S or not seconds.replace(".", "", 1).isdigit():
            parser.error(f"--plan: {item!r} is not stage=seconds with a stage of {', '.join(PLAN_S)}")
        out[stage] = float(seconds)
    return out


def run_options(args, name: str, *more) -> list:
    """train_multitask.py's options for the run on model `name` (--dry-run: bert-base's shape made tiny) that
    every stage times, as this command's flags set them (the device, the seed, the data, TF32), `more`
    added."""
    tiny = DRY_SHAPE if args.dry_run and name in ("tiny", "bert-base") else {}
    return ["--model", model_folder(name, **tiny), "--device", args.device, "--seed", str(args.seed),
            "--data-dir", str(data_dir(args.data_dir)), *(["--no-tf32"] if args.no_tf32 else []),
            *map(str, more)]


def compare_options(args, precision: str) -> list:
    """The compare stage's run: the tasks, batch sizes and path it times."""
    return ["--precision", precision, "--tasks", args.tasks, "--batch-size", args.batch_size, "--eval-batch-size",
            args.eval_batch_size, *(["--implementation", "fast"] if args.fast_path else [])]


class Clock:
    """Each stage's seconds: its planned share, and what the stages before it left unused."""

    def __init__(self, planned: dict):
        self.planned, self.spare = planned, 0.0

    def begin(self, stage: str) -> float:
        self.stage_start, self.cap = time.perf_counter(), self.planned[stage] + self.spare
        return self.cap

    def end(self) -> None:
        self.spare = max(0.0, self.left())

    def left(self) -> float:
        return self.cap - (time.perf_counter() - self.stage_start)


def run_capped(cmd: list, cap: float, log: Path) -> tuple:
    """(exit status or None when cut at `cap` seconds, stdout, stderr, seconds); both outputs kept in `log`."""
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(cap, 1))
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        text = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
        code, out, err = None, *text
    log.write_text(out + err)
    return code, out, err, time.perf_counter() - started


def pytest_summary(output: str, **run) -> TestsRun:
    """Counts from pytest's last line ("3 passed, 1 skipped in 4.2s"), or when it never came (the run was cut)
    from its verbose per-test lines; the FAILED / ERROR lines; --durations' slowest."""
    lines = output.strip().splitlines()
    last = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|skipped|error)", line)), "")
    counts = {kind.rstrip("s") if kind == "errors" else kind: int(n)
              for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)", last)}
    if not last:
        kinds = [kind.lower() for kind in re.findall(r"::\S+ (PASSED|FAILED|SKIPPED|ERROR)", output)]
        counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    seconds = re.search(r" in ([\d.]+)s", last)
    return TestsRun(counts, float(seconds.group(1)) if seconds else None,
                    [line for line in lines if line.startswith(("FAILED", "ERROR"))],
                    [line.strip() for line in lines if re.match(r"\s*[\d.]+s (call|setup|teardown) ", line)], **run)


def stage_tests(args, clock: Clock) -> TestsRun:
    cap = clock.left()
    code, out, _, seconds = run_capped([sys.executable, "-m", "pytest", "-m", "gpu", "-v", "--durations=6", "tests"],
                                       cap, args.out_dir / "gpu-tests.log")
    return pytest_summary(out, exit=code, wall_s=seconds, cut=f"stopped at its cap of {cap:.0f} s" if code is None
                          else "")


def worker_rows(cmd: list, cap: float, log: Path, **where) -> list:
    """A worker's typed rows (its RESULT lines) named by `where`, and a failed row when it was cut at `cap` or
    exited in error."""
    code, out, err, seconds = run_capped(cmd, cap, log)
    rows = [dataclasses.replace(row_from_json(row), **where) for row in results_in(out)]
    if code != 0:
        why = f"cut at its {cap:.0f} s" if code is None else f"exit {code}"
        rows.append(Failed(**where, error=f"{why}: {(err.strip().splitlines() or [''])[-1][:300]}", wall_s=seconds))
    return rows


def stage_graphs(args, clock: Clock) -> list:
    cmd = bench_command("gpu-graphs", "--steps", args.graphs_steps, "--shapes", args.graphs_shapes,
                        *(["--dry-run"] if args.dry_run else []), "--",
                        *run_options(args, args.graphs_model, "--precision", args.graphs_precision))
    return worker_rows(cmd, clock.left(), args.out_dir / "graphs.log", model=args.graphs_model)


def stage_trainer(args, clock: Clock) -> list:
    rows, runs = [], [(s, n) for s in args.settings.split(",") for n in args.models.split(",")]
    for k, (setting, name) in enumerate(runs):
        cap = clock.left() / (len(runs) - k)  # an equal share of what is left
        if cap < 15:
            rows.append(Skipped(model=name, setting=setting, why=f"{clock.left():.0f} s left of the stage"))
            continue
        cmd = bench_command("gpu-trainer", "--precisions", args.trainer_precisions, "--steps", args.trainer_steps,
                            "--warmup", args.trainer_warmup, "--sync-steps", args.sync_steps, "--setting", setting,
                            "--", *run_options(args, name, *SETTINGS[setting]))
        rows += worker_rows(cmd, cap, args.out_dir / f"trainer-{Path(name).name}-{setting}.log", model=name)
    return rows


def stage_compare(args, clock: Clock) -> list:
    import torch

    import minbert
    from bench.gpu_compare import time_models
    options = run_options(args, args.compare_model, *compare_options(args, "fp32"))
    config, inputs, _ = trainer_run(options, build=False)  # the precision is set per row
    rows = []
    for precision in (p for p in args.precisions.split(",") if p not in ("", "none")):
        where = dict(model=args.compare_model, precision=precision)
        if not minbert.native(precision, inputs.device):
            rows.append(Skipped(**where, why="not native on this device"))
        elif clock.left() < 20:
            rows.append(Skipped(**where, why=f"{clock.left():.0f} s left of the stage"))
        else:
            rows.append(time_models(torch, args, config, precision, inputs, where))
    return rows


def machine(args) -> Machine:
    import torch

    from tasks.machine import cpu_model, source_commit
    device = torch.device(args.device)
    found = {key.removeprefix("minbert_"): value for key, value in source_commit(REPO).items()}
    gpu = {}
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        gpu = dict(device=properties.name, capability=".".join(map(str, torch.cuda.get_device_capability(device))),
                   memory_mib=properties.total_memory // 2**20)
    return Machine(**{"device": "cpu", **gpu}, cpu=cpu_model(), torch=torch.__version__, cuda=torch.version.cuda,
                   date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **found)


STAGE_RUNS = {"graphs": stage_graphs, "tests": stage_tests, "trainer": stage_trainer, "compare": stage_compare}


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch
    if not args.dry_run and not torch.cuda.is_available():
        print("bench gpu: no CUDA GPU here (torch.cuda.is_available() is False); --dry-run runs its plumbing on "
              "the CPU", file=sys.stderr)
        return 2
    from tasks.machine import use_tf32
    use_tf32(torch.device(args.device), not args.no_tf32)
    out = Path(args.out or REPO / "runs" / time.strftime("bench-gpu-%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out_dir = out  # where the stages leave their logs
    planned = {s: args.plan[s] for s in STAGES if s in args.stages.split(",")}
    report = Report(machine(args), ["python", "-m", "bench", "gpu", *(argv or sys.argv[1:])], planned, args.dry_run)
    print(f"bench gpu: {report.machine.device}; torch {torch.__version__}; results in {out}; the plan: "
          + ", ".join(f"{s} {v:.0f} s" for s, v in planned.items()) + f" = {sum(planned.values()):.0f} s", flush=True)
    clock, began = Clock(planned), time.perf_counter()
    summary = write(out, report)
    for stage in planned:
        cap = clock.begin(stage)
        report.stages[stage] = STAGE_RUNS[stage](args, clock)
        clock.end()
        print(f"bench gpu: {stage} done in {cap - clock.left():.0f} s of its {cap:.0f} s", flush=True)
        report.total_s = time.perf_counter() - began
        summary = write(out, report)  # after each stage: a kill keeps them
    print(summary)
    return 0


def write(out: Path, report: Report) -> str:
    """bench-gpu.json and bench-gpu.md as they stand; returns the markdown."""
    (out / "bench-gpu.json").write_text(json.dumps(report.to_json(), indent=1))
    summary = markdown(report)
    (out / "bench-gpu.md").write_text(summary)
    return summary


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.gpu")

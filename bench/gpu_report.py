"""`bench gpu`'s rows, a frozen dataclass per kind, and their markdown tables, ready for a measurements log."""
from dataclasses import asdict, dataclass, field

TASKS = ("sst", "quora", "sts")


@dataclass(frozen=True, kw_only=True)
class Row:
    """Where a row was measured: the model, the setting (a trainer setting or a variant of the step) and the
    precision. Its JSON names its kind."""
    model: str
    setting: str = "-"
    precision: str = "-"

    def to_json(self) -> dict:
        return {"kind": type(self).__name__, **asdict(self)}


@dataclass(frozen=True, kw_only=True)
class Skipped(Row):
    why: str

    def note(self) -> str:
        return f"skipped: {self.why}"


@dataclass(frozen=True, kw_only=True)
class Failed(Row):
    """A worker or a measurement that ended in error, or was cut at its seconds."""
    error: str
    wall_s: float | None = None

    def note(self) -> str:
        return f"failed: {self.error}"


@dataclass(frozen=True, kw_only=True)
class GraphedStep(Row):
    """One variant of the trainer's step (`setting`: eager, graphed, cudagraphs, transformers) over the same
    steps. A graphed variant says what a default run's compile costs over its first epoch's shapes and what
    the graphs save over its steps."""
    ms_per_step: float
    warm_s: float
    compile_s: float
    skips: int
    shapes: int
    timed_steps: int
    graphs: str                                 # the run's own word on its step: graphed or eager, and why
    ops: float                                  # aten operators per step (bench/trainer.py's profile_steps)
    leaf_ops: float
    compute_ops: float
    kernels: float | None = None                # CUDA only
    device_busy_ms: float | None = None
    launches: float | None = None
    graph_launches: float | None = None
    default_shapes: int | None = None           # graphed variants only
    default_compile_s: float | None = None
    default_saved_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class TrainerSteps(Row):
    """`--steps` of the default run in one precision (bench/gpu_trainer.py's windows of steps)."""
    steps: int
    timed_steps: int
    steps_per_s: float
    examples_per_s: float
    syncs_per_step: float
    warmup_s: float
    prepare_s: float
    wall_s: float
    nonfinite_skipped: int
    implementation: str
    tf32: bool
    dev: dict = field(default_factory=dict)
    sync_calls_per_step: float | None = None    # the profiler's count: CUDA with CUPTI only
    peak_mib: float | None = None               # CUDA only
    scaler_skipped: int | None = None           # fp16 only


@dataclass(frozen=True, kw_only=True)
class Compared(Row):
    """The trainer's run with minBERT's encoder against transformers' (bench/gpu_compare.py): examples/s of
    each, ratios the median of per-round ratios (above 1: minBERT faster), each run's own peak memory."""
    implementation: str
    minbert_path: str
    tf32: bool
    steps_per_round: int
    minbert_train_per_s: float
    transformers_train_per_s: float
    train_ratio: float
    minbert_eval_per_s: float
    transformers_eval_per_s: float
    eval_ratio: float
    minbert_ms_per_step: float
    transformers_ms_per_step: float
    minbert_peak_mib: float | None = None       # CUDA only
    transformers_peak_mib: float | None = None


KINDS = {kind.__name__: kind for kind in (Skipped, Failed, GraphedStep, TrainerSteps, Compared)}


def row_from_json(data: dict) -> Row:
    data = dict(data)
    return KINDS[data.pop("kind")](**data)


@dataclass(frozen=True)
class Machine:
    device: str
    cpu: str
    torch: str
    cuda: str | None
    date: str
    commit: str = "?"
    dirty: bool = False
    capability: str | None = None               # CUDA only
    memory_mib: int | None = None

    def describe(self) -> str:
        device = self.device + (f" (compute capability {self.capability}, {self.memory_mib:,} MiB)"
                                if self.capability else "")
        return (f"Machine: {device}; host CPU {self.cpu}; torch {self.torch} (CUDA {self.cuda}); code "
                f"{self.commit[:7]}{' with local changes' if self.dirty else ''}; {self.date}.")


@dataclass(frozen=True)
class TestsRun:
    """`pytest -m gpu`'s outcome: its counts, seconds, failures and slowest tests; `cut` when stopped."""
    counts: dict
    pytest_s: float | None
    failures: list
    slowest: list
    exit: int | None = None
    wall_s: float = 0.0
    cut: str = ""


@dataclass
class Report:
    """What `bench gpu` writes after each stage: the machine, the command, the plan and each stage's rows."""
    machine: Machine
    command: list
    plan: dict
    dry_run: bool
    total_s: float = 0.0
    stages: dict = field(default_factory=dict)  # stage -> its rows, or the tests' TestsRun

    def rows(self) -> list:
        return [r for rows in self.stages.values() if isinstance(rows, list) for r in rows]

    def to_json(self) -> dict:
        stages = {stage: [r.to_json() for r in rows] if isinstance(rows, list) else asdict(rows)
                  for stage, rows in self.stages.items()}
        return {"machine": asdict(self.machine), "command": self.command, "plan": self.plan,
                "dry_run": self.dry_run, "total_s": self.total_s, **stages}


def _f(value, digits=1, thousands=False) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        return "-"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def _precision(r) -> str:
    return r.precision + (" (TF32)" if getattr(r, "tf32", False) else "")


def table(title: str, header: list, cells, rows: list) -> list:
    """A markdown table: `cells(row)` for a measured row; a skipped or failed one says why in its third column."""
    lines = [f"## {title}", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for r in rows:
        shown = [r.model, r.setting, r.note()] if isinstance(r, (Skipped, Failed)) else cells(r)
        lines.append("| " + " | ".join(map(str, shown)) + " |" + "|" * (len(header) - len(shown)))
    return lines


def graphs_cells(r: GraphedStep) -> list:
    repays = "-" if r.default_shapes is None else (
        f"{_f(r.default_compile_s, 0)} s compile for {r.default_shapes} shapes vs {_f(r.default_saved_s, 0)} s "
        f"saved: {'repays' if r.default_saved_s > r.default_compile_s else 'DOES NOT repay'}")
    return [r.model, r.setting, r.precision, _f(r.ms_per_step, 2), _f(r.device_busy_ms, 2), _f(r.warm_s),
            _f(r.compile_s), _f(r.graph_launches, 1), _f(r.launches, 0, True), _f(r.kernels, 0, True),
            _f(r.compute_ops, 0, True), r.skips, r.shapes, repays]


def trainer_cells(r: TrainerSteps) -> list:
    dev = " / ".join(_f(r.dev[task], 3) if task in r.dev else "-" for task in TASKS)
    return [r.model, r.setting, r.precision, _f(r.steps_per_s, 2), _f(r.examples_per_s, 0, True),
            _f(r.peak_mib, 0, True), f"{_f(r.syncs_per_step)}; {_f(r.sync_calls_per_step)}",
            _f(r.scaler_skipped, 0), dev, _f(r.warmup_s), _f(r.wall_s)]


def compare_cells(r: Compared) -> list:
    return [r.model, r.setting, _precision(r), f"{r.minbert_path}: {r.implementation}",
            _f(r.minbert_train_per_s, 0, True), _f(r.transformers_train_per_s, 0, True), _f(r.train_ratio, 2),
            _f(r.minbert_eval_per_s, 0, True), _f(r.transformers_eval_per_s, 0, True), _f(r.eval_ratio, 2),
            f"{_f(r.minbert_peak_mib, 0, True)} / {_f(r.transformers_peak_mib, 0, True)}",
            f"{_f(r.minbert_ms_per_step)} / {_f(r.transformers_ms_per_step)}"]


TABLES = {
    "graphs": ("The graphed step against the eager one and transformers' (same steps, every shape warmed)",
               ["model", "variant", "precision", "ms/step", "device busy ms/step", "warm-up s", "compile s",
                "graph launches/step", "kernel launches/step", "kernels/step", "compute ops/step", "capture skips",
                "shapes", "a default run"], graphs_cells),
    "trainer": ("The trainer's own steps", ["model", "setting", "precision", "steps/s", "examples/s", "peak MiB",
                "host syncs / step (debug mode; profiler)", "scaler skips", "dev sst / quora / sts", "warm-up s",
                "wall s"], trainer_cells),
    "compare": ("The trainer's run: minBERT's encoder against transformers' (same steps, same dev rows)",
                ["model", "setting", "precision", "minBERT path", "minBERT train ex/s", "transformers", "ratio",
                 "minBERT eval ex/s", "transformers", "ratio", "peak MiB minBERT / transformers",
                 "ms/step minBERT / transformers"], compare_cells),
}

# Issue 48's targets: bert-base's shape at batch 32 in bf16 (the embedded model's step too), on an H100 or H200.
STEP_MS = {"bert-base": 15.0, "embedded": 8.0}
PEAK_MIB = 3.2 * 1024


def target_line(what: str, shown: str, threshold: str, met: bool) -> str:
    return f"| {what} | {shown} | {threshold} | {'met' if met else 'NOT MET'} |"


def targets_lines(rows: list) -> list:
    """Each target beside its figure, met or not, where this run measured it (bf16; fp32 ratios shown too)."""
    lines = []
    for r in rows:
        if isinstance(r, TrainerSteps) and r.setting == "default" and r.precision == "bf16" and r.model in STEP_MS:
            ms = 1000 / r.steps_per_s
            lines.append(target_line(f"{r.model}: the trainer's step, bf16", f"{ms:.1f} ms",
                                     f"<= {STEP_MS[r.model]:.0f} ms", ms <= STEP_MS[r.model]))
        if isinstance(r, Compared) and r.model == "bert-base" and r.precision in ("bf16", "fp32"):
            for what, ratio, floor in (("training", r.train_ratio, 2.0), ("evaluation", r.eval_ratio, 1.5)):
                lines.append(target_line(f"{what} against transformers, {_precision(r)} ({r.implementation})",
                                         f"{ratio:.2f}x", f">= {floor:.1f}x", ratio >= floor))
        if isinstance(r, Compared) and r.model == "bert-base" and r.precision == "bf16":
            lines.append(target_line("peak memory of the trainer's run, bf16", f"{r.minbert_peak_mib:,.0f} MiB",
                                     f"<= {PEAK_MIB:,.0f} MiB", r.minbert_peak_mib <= PEAK_MIB))
    if not lines:
        return []
    return ["## Issue 48's targets (bert-base's shape, batch 32)", "", "| target | measured | threshold | |",
            "|---|---|---|---|", *lines]


def tests_lines(t: TestsRun) -> list:
    counts = ", ".join(f"{n} {kind}" for kind, n in t.counts.items()) or "no summary line"
    lines = ["## GPU tests", "", "```", "python -m pytest -m gpu -v --durations=6 tests",
             f"{counts} in {_f(t.pytest_s)} s" + (f"   ({t.cut})" if t.cut else ""), "```"]
    slowest = ["", "Slowest:", "", "```", *t.slowest, "```"] if t.slowest else []
    return lines + [f"- {line}" for line in t.failures] + slowest


def markdown(report: Report) -> str:
    plan = ", ".join(f"{stage} {_f(s, 0)} s" for stage, s in report.plan.items())
    lines = [f"# bench gpu{' (dry run, CPU)' if report.dry_run else ''}", "", report.machine.describe(), "", "```",
             " ".join(report.command), "```", f"Total {_f(report.total_s, 0)} s; the plan: {plan}.", ""]
    for stage, rows in report.stages.items():
        lines += (tests_lines(rows) if isinstance(rows, TestsRun) else table(*TABLES[stage], rows)) + [""]
    targets = targets_lines(report.rows())
    return "\n".join(lines + targets + ([""] if targets else []))

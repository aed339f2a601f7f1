"""`bench gpu`'s rows and summary: typed rows, and their markdown tables, ready to paste into a measurements log."""
from dataclasses import asdict, dataclass, field

MEASURED, SKIPPED, FAILED = "measured", "skipped", "failed"


@dataclass(frozen=True)
class Row:
    """One line of a `bench gpu` table: `measured` (its figures), `skipped` (note: why) or `failed` (note: the
    error; figures: what was measured before it)."""
    kind: str
    model: str
    setting: str = "-"
    precision: str = "-"
    note: str = ""
    figures: dict = field(default_factory=dict)

    @classmethod
    def measured(cls, model: str, setting: str = "-", precision: str = "-", figures: dict = None) -> "Row":
        return cls(MEASURED, model, setting, precision, "", dict(figures or {}))

    @classmethod
    def skipped(cls, why: str, model: str, setting: str = "-", precision: str = "-") -> "Row":
        return cls(SKIPPED, model, setting, precision, why)

    @classmethod
    def failed(cls, error: str, model: str, setting: str = "-", precision: str = "-", figures: dict = None) -> "Row":
        return cls(FAILED, model, setting, precision, error, dict(figures or {}))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Row":
        return cls(**data)

    def get(self, key: str):
        """A figure, or None where this row has none (a skipped row, a figure only CUDA gives)."""
        return self.figures.get(key)


def _f(value, digits=1, thousands=False) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        return "-"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def _dev(dev) -> str:
    return " / ".join(_f(dev.get(task), 3) for task in ("sst", "quora", "sts")) if dev else "-"


def _precision(r: Row) -> str:
    return r.precision + (" (TF32)" if r.get("tf32") else "")


def table(title: str, header: list, rows: list, cells) -> list:
    """A markdown table: `cells(row)` for a measured row; a skipped or failed one says why in its third column."""
    lines = [f"## {title}", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for r in rows:
        shown = cells(r) if r.kind == MEASURED else [r.model, r.setting, f"{r.kind}: {r.note}"]
        lines.append("| " + " | ".join(map(str, shown)) + " |" + "|" * (len(header) - len(shown)))
    return lines


def graphs_cells(r: Row) -> list:
    run = r.get("default_run")
    repays = "-" if not run else (f"{_f(run['compile_s'], 0)} s compile for {run['shapes']} shapes vs "
                                  f"{_f(run['saved_s'], 0)} s saved: {'repays' if run['repays'] else 'DOES NOT repay'}")
    return [r.model, r.setting, _precision(r), _f(r.get("ms_per_step"), 2), _f(r.get("warm_s")),
            _f(r.get("compile_s")), _f(r.get("graph_launches"), 1), _f(r.get("launches"), 0, True),
            r.get("skips"), r.get("shapes"), repays]


def trainer_cells(r: Row) -> list:
    return [r.model, r.setting, r.precision, _f(r.get("steps_per_s"), 2), _f(r.get("examples_per_s"), 0, True),
            _f(r.get("peak_mib"), 0, True), f"{_f(r.get('syncs_per_step'))}; {_f(r.get('sync_calls_per_step'))}",
            _f(r.get("scaler_skipped"), 0), _dev(r.get("dev")), _f(r.get("warmup_s")), _f(r.get("wall_s"))]


def profile_cells(r: Row) -> list:
    return [r.model, r.setting, _precision(r), r.get("implementation"), _f(r.get("examples_per_step"), 0),
            _f(r.get("host_ms")), _f(r.get("wall_ms")), _f(r.get("device_busy_ms")), _f(r.get("kernels"), 0, True),
            _f(r.get("launches"), 0, True), _f(r.get("graph_launches"), 0), _f(r.get("ops"), 0, True),
            _f(r.get("leaf_ops"), 0, True), _f(r.get("compute_ops"), 0, True)]


def compare_cells(r: Row) -> list:
    peaks = r.get("peak_mib")
    return [r.model, r.setting, _precision(r), f"{r.get('minbert_path')}: {r.get('implementation')}",
            _f(r.get("minbert_train_examples_per_s"), 0, True), _f(r.get("transformers_train_examples_per_s"), 0, True),
            _f(r.get("train_ratio"), 2), _f(r.get("minbert_eval_examples_per_s"), 0, True),
            _f(r.get("transformers_eval_examples_per_s"), 0, True), _f(r.get("eval_ratio"), 2),
            f"{_f(peaks['minbert'], 0, True)} / {_f(peaks['transformers'], 0, True)}",
            f"{_f(r.get('minbert_ms_per_step'))} / {_f(r.get('transformers_ms_per_step'))}"]


TABLES = {
    "graphs": ("The graphed step against the eager one and transformers' (same steps, every shape warmed)",
               ["model", "variant", "precision", "ms/step", "warm-up s", "compile s", "graph launches/step",
                "kernel launches/step", "capture skips", "shapes", "a default run"], graphs_cells),
    "trainer": ("The trainer's own steps", ["model", "setting", "precision", "steps/s", "examples/s", "peak MiB",
                "host syncs / step (debug mode; profiler)", "scaler skips", "dev sst / quora / sts", "warm-up s",
                "wall s"], trainer_cells),
    "profile": ("Where a step's time goes (the trainer's steps under torch.profiler, per step)",
                ["model", "setting", "precision", "path", "examples", "host ms", "wall ms", "device busy ms",
                 "kernels", "launches", "graph launches", "aten ops", "leaf ops", "compute ops"], profile_cells),
    "compare": ("The trainer's run: minBERT's encoder against transformers' (same steps, same dev rows)",
                ["model", "setting", "precision", "minBERT path", "minBERT train ex/s", "transformers", "ratio",
                 "minBERT eval ex/s", "transformers", "ratio", "peak MiB minBERT / transformers",
                 "ms/step minBERT / transformers"], compare_cells),
}

# Issue 48's targets: bert-base's shape at batch 32 in bf16 (the embedded model's step too), on an H100 or H200.
STEP_MS = {"bert-base": 15.0, "embedded": 8.0}
RATIOS = {"train_ratio": 2.0, "eval_ratio": 1.5}
PEAK_MIB = 3.2 * 1024


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def targets_lines(results: dict) -> list:
    """Each target beside its figure, met or not, where this run measured it (bf16; fp32 ratios shown too)."""
    lines = []
    for r in results.get("trainer", []):
        if r.kind == MEASURED and r.setting == "default" and r.precision == "bf16" and r.model in STEP_MS:
            ms = 1000 / r.get("steps_per_s")
            lines.append(f"| {r.model}: the trainer's step, bf16 | {ms:.1f} ms | <= {STEP_MS[r.model]:.0f} ms | "
                         f"{_verdict(ms <= STEP_MS[r.model])} |")
    for r in results.get("compare", []):
        if r.kind != MEASURED or r.model != "bert-base" or r.precision not in ("bf16", "fp32"):
            continue
        for key, floor in RATIOS.items():
            what = "training" if key == "train_ratio" else "evaluation"
            lines.append(f"| {what} against transformers, {_precision(r)} ({r.get('implementation')}) | "
                         f"{r.get(key):.2f}x | >= {floor:.1f}x | {_verdict(r.get(key) >= floor)} |")
        if r.precision == "bf16":
            peak = r.get("peak_mib")["minbert"]
            lines.append(f"| peak memory of the trainer's run, bf16 | {peak:,.0f} MiB | <= {PEAK_MIB:,.0f} MiB | "
                         f"{_verdict(peak <= PEAK_MIB)} |")
    if not lines:
        return []
    return ["## Issue 48's targets (bert-base's shape, batch 32)", "", "| target | measured | threshold | |",
            "|---|---|---|---|", *lines]


def tests_lines(t: dict) -> list:
    counts = ", ".join(f"{n} {kind}" for kind, n in t["counts"].items()) or "no summary line"
    lines = ["## GPU tests", "", "```", "python -m pytest -m gpu -v --durations=6 tests",
             f"{counts} in {_f(t['pytest_s'])} s" + (f"   ({t['cut']})" if t.get("cut") else ""), "```"]
    slowest = ["", "Slowest:", "", "```", *t["slowest"], "```"] if t["slowest"] else []
    return lines + [f"- {line}" for line in t["failures"]] + slowest


def markdown(results: dict) -> str:
    m = results["machine"]
    device = m["device"] + (f" (compute capability {m['capability']}, {m['memory_mib']:,} MiB)"
                            if "capability" in m else "")
    commit = m.get("minbert_commit", "?")[:7] + (" with local changes" if m.get("minbert_dirty") else "")
    plan = ", ".join(f"{stage} {_f(s, 0)} s" for stage, s in results["plan"].items())
    lines = [f"# bench gpu{' (dry run, CPU)' if results.get('dry_run') else ''}", "",
             f"Machine: {device}; host CPU {m['cpu']}; torch {m['torch']} (CUDA {m['cuda']}); code {commit}; "
             f"{m['date']}.", "", "```", " ".join(results["command"]), "```",
             f"Total {_f(results.get('total_s'), 0)} s; the plan: {plan}.", ""]
    for stage in ("graphs", "tests", "trainer", "profile", "compare"):
        if stage == "tests" and stage in results:
            lines += tests_lines(results[stage]) + [""]
        elif stage in results:
            lines += table(TABLES[stage][0], TABLES[stage][1], results[stage], TABLES[stage][2]) + [""]
    targets = targets_lines(results)
    return "\n".join(lines + targets + ([""] if targets else []))

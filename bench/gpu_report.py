"""`bench.gpu`'s summary: its figures as markdown tables, ready to paste into a docs/measurements log."""


def _f(value, digits=1, thousands=False) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:  # NaN
        return "-"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def _dev(dev: dict) -> str:
    return " / ".join(_f(dev.get(task), 3) for task in ("sst", "quora", "sts")) if dev else "-"


def machine_lines(m: dict) -> list:
    device = m["device"] + (f" (compute capability {m['capability']}, {m['memory_mib']:,} MiB)"
                            if "capability" in m else "")
    commit = m.get("minbert_commit", "?")[:7] + (" with local changes" if m.get("minbert_dirty") else "")
    return [f"Machine: {device}; host CPU {m['cpu']}; torch {m['torch']} (CUDA {m['cuda']}); code {commit}; "
            f"{m['date']}."]


def tests_lines(t: dict) -> list:
    counts = ", ".join(f"{n} {kind}" for kind, n in t["counts"].items()) or "no summary line"
    lines = ["## GPU tests", "", "```", "python -m pytest -m gpu -v --durations=6 tests",
             f"{counts} in {_f(t['pytest_s'])} s" + (f"   ({t['cut']})" if t.get("cut") else ""), "```"]
    slowest = ["", "Slowest:", "", "```", *t.get("slowest", []), "```"] if t.get("slowest") else []
    return lines + [f"- {line}" for line in t["failures"]] + slowest


def trainer_lines(rows: list) -> list:
    lines = ["## The trainer's own steps", "",
             "| model | setting | precision | steps/s | examples/s | peak MiB | host syncs / step (debug mode; "
             "profiler) | scaler skips | dev sst / quora / sts | warm-up s | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['model']} | {r['setting']} | {r.get('precision', '-')} | "
                         f"{r.get('error') or r.get('skipped')} |||||||")
            continue
        lines.append(f"| {r['model']} | {r['setting']} | {r['precision']} | {_f(r.get('steps_per_s'), 2)} | "
                     f"{_f(r.get('examples_per_s'), 0, True)} | {_f(r.get('peak_mib'), 0, True)} | "
                     f"{_f(r.get('syncs_per_step'), 1)}; {_f(r.get('sync_calls_per_step'), 1)} | "
                     f"{_f(r.get('scaler_skipped'), 0)} | {_dev(r.get('dev'))} | "
                     f"{_f(r.get('warmup_s'))} | {_f(r.get('wall_s'))} |")
    return lines


def _precision(r: dict) -> str:
    return r["precision"] + (" (TF32)" if r.get("tf32") else "")


def profile_lines(rows: list) -> list:
    lines = ["## Where a step's time goes (the trainer's steps under torch.profiler, per step)", "",
             "| model | setting | precision | path | examples | host ms | wall ms | device busy ms | kernels | "
             "launches | graph launches | aten ops | leaf ops | compute ops |", "|---" * 14 + "|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['model']} | {r.get('setting', '-')} | {r.get('precision', '-')} | {r['skipped']} "
                         f"||||||||||")
            continue
        lines.append(f"| {r['model']} | {r['setting']} | {_precision(r)} | {r['implementation']} | "
                     f"{_f(r['examples_per_step'], 0)} | {_f(r['host_ms'])} | {_f(r['wall_ms'])} | "
                     f"{_f(r.get('device_busy_ms'))} | {_f(r.get('kernels'), 0, True)} | "
                     f"{_f(r.get('launches'), 0, True)} | {_f(r.get('graph_launches'), 0)} | "
                     f"{_f(r['ops'], 0, True)} | {_f(r['leaf_ops'], 0, True)} | {_f(r['compute_ops'], 0, True)} |")
    return lines


def compare_lines(rows: list) -> list:
    lines = ["## The trainer's run: minBERT's encoder against transformers' (same steps, same dev rows)", "",
             "| model | precision | minBERT path | minBERT train ex/s | transformers | ratio | minBERT eval ex/s | "
             "transformers | ratio | peak MiB minBERT / transformers | ms/step minBERT / transformers |",
             "|---" * 11 + "|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r.get('model', '-')} | {r['precision']} | {r['skipped']} ||||||||")
            continue
        peaks = r["peak_mib"]
        lines.append(f"| {r['model']} | {_precision(r)} | {r['minbert_path']}: {r['implementation']} | "
                     f"{_f(r['minbert_train_examples_per_s'], 0, True)} | "
                     f"{_f(r['transformers_train_examples_per_s'], 0, True)} | {_f(r['train_ratio'], 2)} | "
                     f"{_f(r['minbert_eval_examples_per_s'], 0, True)} | "
                     f"{_f(r['transformers_eval_examples_per_s'], 0, True)} | {_f(r['eval_ratio'], 2)} | "
                     f"{_f(peaks['minbert'], 0, True)} / {_f(peaks['transformers'], 0, True)} | "
                     f"{_f(r['minbert_ms_per_step'])} / {_f(r['transformers_ms_per_step'])} |")
    return lines


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
        if r.get("setting") == "default" and r.get("precision") == "bf16" and r.get("steps_per_s") \
                and r["model"] in STEP_MS:
            ms = 1000 / r["steps_per_s"]
            lines.append(f"| {r['model']}: the trainer's step, bf16 | {ms:.1f} ms | <= {STEP_MS[r['model']]:.0f} ms | "
                         f"{_verdict(ms <= STEP_MS[r['model']])} |")
    for r in results.get("compare", []):
        if "skipped" in r or r.get("model") != "bert-base" or r["precision"] not in ("bf16", "fp32"):
            continue
        for key, floor in RATIOS.items():
            what = "training" if key == "train_ratio" else "evaluation"
            lines.append(f"| {what} against transformers, {_precision(r)} ({r['implementation']}) | "
                         f"{r[key]:.2f}x | >= {floor:.1f}x | {_verdict(r[key] >= floor)} |")
        if r["precision"] == "bf16":
            peak = r["peak_mib"]["minbert"]
            lines.append(f"| peak memory of the trainer's run, bf16 | {peak:,.0f} MiB | <= {PEAK_MIB:,.0f} MiB | "
                         f"{_verdict(peak <= PEAK_MIB)} |")
    if not lines:
        return []
    return ["## Issue 48's targets (bert-base's shape, batch 32)", "", "| target | measured | threshold | |",
            "|---|---|---|---|", *lines]


def markdown(results: dict) -> str:
    lines = [f"# bench.gpu{' (dry run, CPU)' if results.get('dry_run') else ''}", "",
             *machine_lines(results["machine"]), "", "```", " ".join(results["command"]), "```",
             f"Total {_f(results.get('total_s'), 0)} s of a {_f(results['budget_s'], 0)} s budget.", ""]
    for stage, write in (("tests", tests_lines), ("trainer", trainer_lines), ("profile", profile_lines),
                         ("compare", compare_lines)):
        if stage in results:
            lines += write(results[stage]) + [""]
    targets = targets_lines(results)
    lines += targets + ([""] if targets else [])
    return "\n".join(lines)

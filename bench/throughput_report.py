"""`bench throughput`'s report: the FLOPs of a step (bench/throughput.py's docstring), each task's table, the
speed targets met or not, and the JSON of every figure."""
import json
import os
from pathlib import Path

from bench import paired
from tasks.registry import get_task

WORKERS = ("minbert", "transformers")


def head_classes(task: str) -> int:
    """Outputs of the linear head timed for `task`.

    The trainer's "binary" head is one logit under BCE; it is timed as two logits
    under cross-entropy, the same model (sigmoid(x) = softmax([0, x])[1]), so
    every task runs the same loss.
    """
    cfg = get_task(task)
    return cfg.num_classes if cfg.kind.has_classes else 2


def step_flops(info: dict, stats: dict, classes: int) -> float:
    """Training FLOPs of all the timed steps (see the module docstring)."""
    head = info["hidden"] * classes + classes
    return (6 * info["encoder_matrices"] * stats["tokens"] + 6 * (info["pooler"] + head) * stats["examples"]
            + 12 * info["layers"] * info["hidden"] * stats["sum_len_sq"])


def report(args, info, results, peak, memory, loads, wall):
    mine = info["minbert"]
    print(f"model {args.model}: {mine['layers']} layers x {mine['hidden']}, {mine['params'] / 1e6:.1f}M parameters "
          f"({mine['non_embedding'] / 1e6:.1f}M non-embedding)  precision {args.precision}  batch {args.batch_size}  "
          f"AdamW {args.optimizer}  batches {args.order}")
    print(f"machine: {os.cpu_count()} CPUs, torch {mine['torch']}, {mine['threads']} threads, "
          f"OMP_WAIT_POLICY={args.omp_wait}; load average {loads[0][0]:.1f} -> {loads[1][0]:.1f} "
          f"(shared machine: rounds alternate, ratios are medians of per-round ratios)")
    print(f"matmul peak ({args.precision}, square 2048-4096, best of the run): {peak:.0f} GFLOP/s")
    print("FLOPs per train step = 6*P_enc*tokens + 6*(P_pooler+P_head)*examples + 12*layers*hidden*sum(len^2), "
          f"eval = 1/3; real tokens; P_enc = {mine['encoder_matrices'] / 1e6:.2f}M")
    out = {"args": vars(args), "info": info, "matmul_peak_gflops": peak, "memory_mib": memory,
           "load_average": loads, "tasks": {task: task_report(args, mine, task, res, peak)
                                            for task, res in results.items()}}
    peak_rss = {n: paired.peak_rss(memory[n]) for n in WORKERS}
    print(f"\npeak resident memory (VmHWM, MiB; ru_maxrss agrees)  minbert {peak_rss['minbert']:.0f}  "
          f"transformers {peak_rss['transformers']:.0f}  ratio {peak_rss['minbert'] / peak_rss['transformers']:.2f}")
    print(f"wall time {wall:.0f} s")
    out["targets"] = targets(args, mine, out["tasks"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


def task_report(args, mine: dict, task: str, res: dict, peak: float) -> dict:
    """One task's table (examples/s, tokens/s, GFLOP/s, share of the peak; train and eval) and its figures."""
    s = res["stats"]
    print(f"\n[{task}] {sum(res['train']['steps'])} timed steps x {args.batch_size} = {s['examples']} examples, "
          f"{s['tokens']} real tokens (mean length {s['mean_len']:.1f}, padded to {s['mean_padded_len']:.1f})")
    flops = step_flops(mine, s, head_classes(task))
    print(f"{'':28s}{'minbert':>12s}{'transformers':>14s}{'ratio':>8s}")
    figures = {"stats": s}
    for phase in ("train", "eval"):
        sec = res[phase]["seconds"]
        total = {n: sum(v) for n, v in sec.items()}
        ratio = paired.median_ratio(sec)
        work = flops if phase == "train" else flops / 3
        ex = {n: s["examples"] / t for n, t in total.items()}
        tok = {n: s["tokens"] / t for n, t in total.items()}
        util = {n: work / t / 1e9 / peak for n, t in total.items()}
        for label, values, fmt in ((f"{phase} examples/s", ex, "{:.1f}"), (f"{phase} real tokens/s", tok, "{:.0f}"),
                                   (f"{phase} GFLOP/s", {n: u * peak for n, u in util.items()}, "{:.0f}"),
                                   (f"{phase} % of matmul peak", {n: 100 * u for n, u in util.items()}, "{:.1f}")):
            print(f"{label:28s}{fmt.format(values['minbert']):>12s}{fmt.format(values['transformers']):>14s}"
                  f"{ratio:8.2f}")
        figures[phase] = {"seconds": sec, "examples_per_s": ex, "tokens_per_s": tok, "utilisation": util,
                          "ratio_median_of_rounds": ratio}
    ceiling = res["ceiling_gflops"]
    print(f"ceiling: the step's encoder matmuls alone, same shapes, back to back: {ceiling:.0f} GFLOP/s = "
          f"{100 * ceiling / peak:.1f}% of the matmul peak (no implementation of these batches exceeds it)")
    figures["ceiling"] = {"gflops": ceiling, "utilisation": ceiling / peak}
    return figures


TRAIN_RATIO, EVAL_RATIO = 2.0, 2.5                  # x transformers, same precision, same batches
CEILING_SHARE = {"bf16": 0.60, "fp32": 0.75}         # training step's share of the peak / the ceiling's


def targets(args, info: dict, tasks: dict) -> list:
    """The speed targets, each measured figure beside its threshold, printed as met or not met."""
    rows = []
    for task, t in tasks.items():
        rows.append((f"{task} train vs transformers", t["train"]["ratio_median_of_rounds"], TRAIN_RATIO, "x"))
        rows.append((f"{task} eval vs transformers", t["eval"]["ratio_median_of_rounds"], EVAL_RATIO, "x"))
        if args.precision == "bf16" and not info["native_bf16"]:
            continue  # emulated bf16: no share of a bf16 peak to aim at
        share = t["train"]["utilisation"]["minbert"] / t["ceiling"]["utilisation"]
        rows.append((f"{task} train share of the ceiling", share, CEILING_SHARE[args.precision], "%"))
    print(f"\ntargets ({args.precision}{'' if info['native_bf16'] or args.precision == 'fp32' else ', emulated'}):")
    for label, value, threshold, unit in rows:
        if unit == "x":
            shown = (f"{value:.2f}x", f">= {threshold:.1f}x")
        else:
            shown = (f"{100 * value:.0f}%", f">= {100 * threshold:.0f}%")
        print(f"  {label:34s}{shown[0]:>8s}  {shown[1]:>8s}  {'met' if value >= threshold else 'NOT MET'}")
    return [{"target": label, "value": value, "threshold": threshold, "met": value >= threshold}
            for label, value, threshold, unit in rows]

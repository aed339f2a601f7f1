"""The trainer's own steps on this machine: where a step's time goes, what a step launches, and whole epochs.

    python -m bench trainer [--model embedded] [--precision auto|bf16|fp32] [--steps 12] [--top 25] [-- options]
    python -m bench trainer --count-ops [--models embedded,bert-base] [--implementations reference,fast]
    python -m bench trainer --epoch [--configs bucketed,plain,fp32,bf16] [--seeds 0,1] [--max-steps N]

Every mode runs the run `train_multitask.py` builds (bench/common.py's trainer_run: every option at its default
unless given, `-- options` added).

- the default, profile: the first steps of the epoch-0 plan (the proportional sampler's SST, Quora and STS
  batches, length-bucketed), `--warmup` untimed, then `--steps` whole optimizer steps (`train_step`: batches,
  forward, backward, clipping, AdamW, the schedule) under torch.profiler: the top operators by self CPU time,
  the same time grouped into kinds (matmul, copies, dropout, optimizer, ...), and the wall time without it.
- `--count-ops`: what a GPU would launch, counted on the CPU: the aten operators of one step
  (bench/step_profile.py: all, the leaves, and the compute ones, about one kernel each on a GPU) per
  implementation and precision, for the embedded model and bert-base's shape (random weights); the plan's first
  step of each task after one warm-up step. The count depends on neither the weights nor the machine's speed.
- `--epoch`: one full default epoch (`--epochs 1`) per configuration and seed, each in its own process: the
  padding fraction of its batches, training and evaluation time, peak RSS and dev metrics. Configurations:
  `bucketed` (the default run), `plain` (--no-bucketing), `fp32`, `bf16`; the one of fp32 and bf16 that `auto`
  already is on this machine repeats `bucketed` and is not run again. The spread between seeds is the noise
  the configurations' differences are compared with.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.common import DATA_DIR_HELP, REPO, bench_command, model_folder, report_result, run_worker, trainer_run

# Operator name -> kind. The first pattern contained in the name decides; anything else is "other".
KINDS = (
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "mkldnn", "_mkl")),
    ("attention", ("scaled_dot_product", "flash_attention", "_softmax", "softmax")),
    ("optimizer", ("_fused_adamw", "_foreach", "adamw", "aten::_fused_adam", "lerp", "addcdiv", "addcmul")),
    ("dropout", ("random_", "bernoulli", "clamp_", "native_dropout")),
    ("dtype copies", ("aten::copy_", "aten::_to_copy", "aten::to")),
    ("gather/scatter", ("index_select", "index_copy", "index_add", "scatter", "gather", "embedding",
                        "nonzero", "cumsum", "masked")),
    ("norm/activation", ("layer_norm", "gelu", "tanh", "sigmoid", "norm")),
    ("fill/alloc", ("fill_", "zero_", "empty", "zeros", "ones", "full")),
    ("cat/split/views", ("aten::cat", "split", "unbind", "view", "reshape", "permute", "transpose",
                         "as_strided", "contiguous", "clone", "select", "slice", "expand", "stack")),
    ("element-wise", ("aten::add", "aten::mul", "aten::sub", "aten::div", "aten::sum", "aten::mean",
                      "aten::where", "aten::pow", "aten::sqrt", "aten::neg", "aten::exp")),
)


EPOCH_CONFIGS = {"bucketed": [], "plain": ["--no-bucketing"], "fp32": ["--precision", "fp32"],
                 "bf16": ["--precision", "bf16"]}
METRICS = ("sst", "quora", "sts", "overall")


def kind_of(name: str) -> str:
    return next((kind for kind, patterns in KINDS if any(p in name for p in patterns)), "other")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench trainer", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--model", default="embedded", help="embedded, bert-base or a checkpoint (default: %(default)s)")
    p.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--json", default=None, help="also write the figures to this file")
    profile = p.add_argument_group("profile (the default)")
    profile.add_argument("--steps", type=int, default=12, help="profiled optimizer steps (default: %(default)s)")
    profile.add_argument("--warmup", type=int, default=4, help="untimed steps first (default: %(default)s)")
    profile.add_argument("--top", type=int, default=25, help="operators listed (default: %(default)s)")
    count = p.add_argument_group("--count-ops: operators per training step, no timing")
    count.add_argument("--count-ops", action="store_true", help="count the operators of a step")
    count.add_argument("--models", default="embedded,bert-base", help="(default: %(default)s)")
    count.add_argument("--implementations", default="reference,fast", help="(default: %(default)s)")
    count.add_argument("--precisions", default="fp32,bf16", help="(default: %(default)s)")
    epoch = p.add_argument_group("--epoch: whole default epochs, each in its own process")
    epoch.add_argument("--epoch", action="store_true", help="time whole epochs")
    epoch.add_argument("--configs", default=",".join(EPOCH_CONFIGS), help="subset of %(default)s")
    epoch.add_argument("--seeds", default="0,1", help="(default: %(default)s)")
    epoch.add_argument("--max-steps", type=int, default=None, help="cut each epoch short (a smoke run)")
    epoch.add_argument("--out", default=None, help="keep the run folders here (default: a temporary folder)")
    p.add_argument("--epoch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("train_options", nargs=argparse.REMAINDER, help="after --: train_multitask.py options")
    args = p.parse_args(argv)
    args.train_options = [a for a in args.train_options if a != "--"]
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be positive, --warmup non-negative")
    if set(args.configs.split(",")) - set(EPOCH_CONFIGS):
        p.error(f"--configs: choose from {', '.join(EPOCH_CONFIGS)}")
    return args


def timed_steps(run, steps: list) -> float:
    from bench.step_profile import trainer_steps
    start = time.perf_counter()
    trainer_steps(run, steps)
    return time.perf_counter() - start


def profile_main(args) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tasks.machine import cpu_model
    _, inputs, run = trainer_run(["--model", model_folder(args.model), "--precision", args.precision,
                                  *args.train_options], args.data_dir)
    plan = run.sampler.plan(0)
    if args.warmup + args.steps > len(plan):
        sys.exit(f"bench: the epoch has only {len(plan)} steps")
    steps = plan[args.warmup:args.warmup + args.steps]
    timed_steps(run, plan[:args.warmup])
    plain = timed_steps(run, steps)  # without the profiler: its own overhead stays out of the wall time
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled = timed_steps(run, steps)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    mix = defaultdict(int)
    for step in steps:
        for task in step:
            mix[task] += 1
    print(f"model {args.model}  precision {inputs.precision}  device {inputs.device}  CPU {cpu_model()}  "
          f"threads {torch.get_num_threads()}  torch {torch.__version__}")
    print(f"{args.steps} optimizer steps of the default plan (" + ", ".join(f"{t} {n}" for t, n in mix.items())
          + f"): {1000 * plain / args.steps:.0f} ms/step unprofiled, {1000 * profiled / args.steps:.0f} profiled")
    kinds = defaultdict(float)
    for e in events:
        kinds[kind_of(e.key)] += e.self_cpu_time_total
    print("\nself CPU time by kind")
    for kind, us in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:20s}{100 * us / total:6.1f}%  {us / 1000 / args.steps:8.1f} ms/step")
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.top]
    print(f"\ntop {args.top} operators by self CPU time\n  {'operator':44s}{'self %':>8s}{'ms/step':>9s}"
          f"{'calls/step':>12s}")
    for e in top:
        print(f"  {e.key[:44]:44s}{100 * e.self_cpu_time_total / total:8.1f}"
              f"{e.self_cpu_time_total / 1000 / args.steps:9.2f}{e.count / args.steps:12.1f}")
    return {"cpu": cpu_model(), "precision": inputs.precision, "ms_per_step": 1000 * plain / args.steps,
            "kinds": {k: v / total for k, v in kinds.items()},
            "top": [{"op": e.key, "share": e.self_cpu_time_total / total, "calls": e.count} for e in top]}


def count_ops(folder: str, implementation: str, precision: str, data_dir=None, batch_size: int = 32) -> dict:
    """Operators per step of the default run on `folder` on the CPU (bench.step_profile's counts): the plan's
    first step of each task, after the plan's first step as a warm-up."""
    import torch

    from bench.step_profile import profile_steps
    _, _, run = trainer_run(["--model", folder, "--implementation", implementation, "--precision", precision,
                             "--device", "cpu", "--batch-size", str(batch_size)], data_dir)
    plan = run.sampler.plan(0)
    firsts = {}
    for step in plan[1:]:
        firsts.setdefault(tuple(step), step)  # a step's tasks, e.g. ("sst",)
    counted = profile_steps(torch, run, list(firsts.values()), plan[:1], timed=False)
    encoder = run.model.encoder.config
    return {**counted, "tasks": ["+".join(key) for key in firsts], "implementation": implementation,
            "precision": run.inputs.precision, "layers": encoder.num_hidden_layers, "hidden": encoder.hidden_size}


def count_main(args) -> dict:
    import torch

    from tasks.machine import cpu_model
    rows = []
    print(f"aten operators per training step of the default run (batch 32), CPU {cpu_model()}, torch "
          f"{torch.__version__}\n  {'model':12s}{'shape':>10s}  {'implementation':15s}{'precision':10s}"
          f"{'ops/step':>10s}{'leaf ops/step':>15s}{'compute ops/step':>18s}")
    for name in args.models.split(","):
        for implementation in args.implementations.split(","):
            for precision in args.precisions.split(","):
                row = {"model": name, **count_ops(model_folder(name), implementation, precision, args.data_dir)}
                rows.append(row)
                print(f"  {name:12s}{row['layers']:>4d} x {row['hidden']:<4d}  {implementation:15s}"
                      f"{row['precision']:10s}{row['ops']:10.0f}{row['leaf_ops']:15.0f}{row['compute_ops']:18.0f}",
                      flush=True)
    print(f"(the mean over one step of each task: {', '.join(rows[0]['tasks'])}; after one warm-up step)")
    return {"cpu": cpu_model(), "torch": torch.__version__, "rows": rows}


def epoch_worker(argv: list) -> None:
    """train_multitask.py's command on argv, a callback timing the evaluations and reading the epoch's plan."""
    import resource

    from tasks.training import Callback, padding_fraction, train_command
    seen = {"eval_s": 0.0}

    class Probe(Callback):
        def on_plan(self, run, plan):
            seen.setdefault("padding", padding_fraction(plan, {t: s.lengths for t, s in run.train.items()}))

        def on_evaluate(self, run, metrics, seconds):
            seen["eval_s"] += seconds

    code = train_command(argv, callbacks=[Probe()])
    if code != 0:
        sys.exit(code)
    out = Path(argv[argv.index("--out") + 1])
    metrics = json.loads((out / "metrics.json").read_text())
    seen.update(final=metrics["final"], steps=metrics["steps"], fit_s=metrics["history"][-1]["elapsed_s"],
                precision=json.loads((out / "config.json").read_text())["precision"]["used"],
                peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    report_result(seen)


def epoch_configs(configs: list) -> list:
    """Without `fp32` or `bf16` where the default precision (auto) already is that one on this machine."""
    import minbert
    from tasks.machine import resolve_device
    auto = minbert.resolve_precision("auto", resolve_device("auto"))
    if "bucketed" in configs and auto in configs:
        print(f"note: --precision auto is {auto} on this machine: '{auto}' = 'bucketed', not run twice", flush=True)
        configs = [c for c in configs if c != auto]
    return configs


def epoch_main(args) -> dict:
    seeds, configs = [int(s) for s in args.seeds.split(",")], epoch_configs(args.configs.split(","))
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-epoch-"))
    extra = [*(["--data-dir", args.data_dir] if args.data_dir else []), "--model", model_folder(args.model),
             *(["--max-steps", str(args.max_steps)] if args.max_steps else []), *args.train_options]
    print(f"{'config':<9} {'seed':>4} {'prec':>5} {'steps':>5} {'padding':>8} {'train s':>8} {'eval s':>7} "
          f"{'RSS MB':>7}  " + " ".join(f"{m:>7}" for m in METRICS), flush=True)
    results = {}
    for config in configs:
        for seed in seeds:
            argv = ["--epochs", "1", "--seed", seed, "--out", folder / f"{config}-seed{seed}", *EPOCH_CONFIGS[config],
                    *extra]
            r = results[config, seed] = run_worker(bench_command("trainer", "--epoch-worker", "--", *argv),
                                                   f"{config} seed {seed}", cwd=REPO)
            r["train_s"] = r["fit_s"] - r["eval_s"]
            print(f"{config:<9} {seed:>4} {r['precision']:>5} {r['steps']:>5} {r['padding']:>8.3f} "
                  f"{r['train_s']:>8.1f} {r['eval_s']:>7.1f} {r['peak_rss_mb']:>7.0f}  "
                  + " ".join(f"{r['final'][m]:>7.4f}" for m in METRICS), flush=True)
    print("\nmeans over seeds (+- half the seed range):")
    for config in configs:
        rows = [results[config, s] for s in seeds]
        cells = [f"{m} {statistics.mean(v):.4f}+-{(max(v) - min(v)) / 2:.4f}"
                 for m, v in ((m, [r["final"][m] for r in rows]) for m in METRICS)]
        print(f"  {config:<9} train {statistics.mean(r['train_s'] for r in rows):7.1f} s  "
              f"padding {statistics.mean(r['padding'] for r in rows):.3f}  " + "  ".join(cells))
    return {f"{config} seed {seed}": r for (config, seed), r in results.items()}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.epoch_worker:
        epoch_worker(args.train_options)
        return 0
    figures = (count_main if args.count_ops else epoch_main if args.epoch else profile_main)(args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    return 0

"""Whether torch.compile of the fast path's per-layer element-wise work pays, in the trainer's own steps.

    python -m bench.compile [--precision auto|bf16|fp32] [--threads N] [--dropout inductor|mask]
                            [--steps 8] [--rounds 6]

Builds the default `train_multitask.py` run (as `bench.profile` does) and compiles, with a dynamic
row count, the work of each layer between one attention and the next: on the (rows, hidden) matrix
of real tokens, the attention output (dense, dropout, residual, LayerNorm) and the feed-forward
network (dense, GELU, dense, dropout, residual, LayerNorm), as one region that all layers share.
Attention itself (regrouping, host syncs) stays eager. Then it times whole optimizer steps
(`tasks.training.train_step`: batches, forward, backward, clipping, fused AdamW) with the region
compiled and eager, alternated round by round (A B, B A, ...) over the same steps of the plan in one
process, and prints each round's ratio (eager time / compiled time: above 1, compiled is faster)
and their median. Before the rounds it times the compile: the first compiled step, and the slowest
of the next `--recompile-steps` and the number of distinct row counts they ran (a recompile would
show there), with inductor's cache in a fresh folder (a first run's compile) unless `--warm-cache`.

`--dropout inductor` (the default) calls F.dropout inside the region, so inductor generates the
random numbers and fuses the mask; `--dropout mask` draws fast.py's mask eagerly (four draws per
64-bit random number) and passes it in, so only the multiply is fused.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from bench.common import add_trainer_setting


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.compile", description=__doc__.split("\n\n")[0])
    add_trainer_setting(p)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--dropout", choices=("inductor", "mask"), default="inductor",
                   help="F.dropout inside the compiled region, or fast.py's mask drawn eagerly and passed in")
    p.add_argument("--steps", type=int, default=8, help="timed optimizer steps per round and variant")
    p.add_argument("--rounds", type=int, default=6, help="alternating rounds (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed eager steps first (default: %(default)s)")
    p.add_argument("--recompile-steps", type=int, default=40,
                   help="compiled steps after the first, each timed, to see recompiles (default: %(default)s)")
    p.add_argument("--warm-cache", action="store_true",
                   help="use inductor's own cache folder; by default a fresh empty one, so the compile time "
                        "printed is a first run's")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("train_options", nargs=argparse.REMAINDER,
                   help="after --: train_multitask.py options for the timed run (e.g. -- --max-length 64)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or args.recompile_steps < 1 or args.warmup < 0:
        p.error("--steps, --rounds and --recompile-steps must be positive, --warmup non-negative")
    return args


def between_attentions(y, x, so, inter, out, keep1, keep2, scale, p, training, approximate):
    """A layer after its attention: `y` the attention's rows, `x` the residual stream's."""
    import torch.nn.functional as F
    h = F.linear(y, so[0], so[1])
    h = h * keep1 * scale if keep1 is not None else F.dropout(h, p, training)
    x = F.layer_norm(h + x, x.shape[-1:], so[2], so[3], so[4])
    h = F.linear(F.gelu(F.linear(x, inter[0], inter[1]), approximate=approximate), out[0], out[1])
    h = h * keep2 * scale if keep2 is not None else F.dropout(h, p, training)
    return F.layer_norm(h + x, x.shape[-1:], out[2], out[3], out[4])


def compiled_layer_forward(layer, region, eager_mask: bool, approximate: str, rows_seen: set):
    """A `BertLayer.forward` for the fast path whose work after attention runs in `region`."""
    from minbert.fast_layers import keep_mask
    so, inter, out = layer.attention.output, layer.intermediate, layer.output

    def forward(x, layout, output_attentions=False):
        y, probs = layer.attention.self(x, layout, output_attentions)
        rows_seen.add(x.shape[0])
        p, training = so.dropout.p, layer.training
        keep1 = keep2 = None
        scale = 1.0
        if eager_mask and training and p > 0:
            keep1, kept = keep_mask(x.shape, p, x.dtype, x.device)
            keep2, _ = keep_mask(x.shape, p, x.dtype, x.device)
            scale = 1.0 / kept
        x = region(y, x, (so.dense.weight, so.dense.bias, so.LayerNorm.weight, so.LayerNorm.bias, so.LayerNorm.eps),
                   (inter.dense.weight, inter.dense.bias),
                   (out.dense.weight, out.dense.bias, out.LayerNorm.weight, out.LayerNorm.bias, out.LayerNorm.eps),
                   keep1, keep2, scale, p, training, approximate)
        return x, probs
    return forward


def use_region(encoder, region, eager_mask: bool, rows_seen: set) -> None:
    """Route every layer of `encoder` through `region`, noting the row counts it runs in `rows_seen`;
    `region=None` gives back the eager fast path."""
    approximate = "none" if encoder.config.hidden_act == "gelu" else "tanh"
    for layer in encoder.encoder.layer:
        if region is None:
            layer.__dict__.pop("forward", None)
        else:
            layer.forward = compiled_layer_forward(layer, region, eager_mask, approximate, rows_seen)


def main(argv=None):
    args = parse_args(argv)
    if not args.warm_cache:  # read when inductor first compiles
        cache = tempfile.mkdtemp(prefix="minbert-bench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
    import torch
    from torch._dynamo.utils import counters

    from bench.profile import build_run
    from tasks.machine import cpu_model
    from tasks.training import train_step

    if args.threads:
        torch.set_num_threads(args.threads)
    run = build_run(args)
    if run.model.encoder.config.hidden_act not in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        sys.exit(f"bench: hidden_act {run.model.encoder.config.hidden_act} is not a GELU")
    plan = run.sampler.plan(0)
    needed = args.warmup + 1 + args.recompile_steps + args.steps
    if needed > len(plan):
        sys.exit(f"bench: the epoch has only {len(plan)} steps, {needed} needed")
    region = torch.compile(between_attentions, dynamic=True)
    eager_mask = args.dropout == "mask"
    run.model.train()
    rows_seen = set()

    def timed(steps, compiled: bool) -> list:
        use_region(run.model.encoder, region if compiled else None, eager_mask, rows_seen)
        seconds = []
        for step in steps:
            start = time.perf_counter()
            train_step(run, step)
            run.scheduler.step()
            seconds.append(time.perf_counter() - start)
        return seconds

    timed(plan[:args.warmup], compiled=False)
    first = timed(plan[args.warmup:args.warmup + 1], compiled=True)[0]
    later = timed(plan[args.warmup + 1:args.warmup + 1 + args.recompile_steps], compiled=True)
    graphs, row_counts = counters["stats"]["unique_graphs"], len(rows_seen)
    steps = plan[args.warmup + 1 + args.recompile_steps:needed]
    timed(steps, compiled=False)  # every timed shape seen eagerly too (oneDNN's kernels per shape)
    ratios, totals = [], {False: 0.0, True: 0.0}
    for r in range(args.rounds):
        got = {c: sum(timed(steps, c)) for c in ((False, True) if r % 2 == 0 else (True, False))}
        for c, seconds in got.items():
            totals[c] += seconds
        ratios.append(got[False] / got[True])
        print(f"round {r + 1}: eager {got[False]:.2f} s, compiled {got[True]:.2f} s, ratio {ratios[-1]:.3f}",
              flush=True)

    n = args.rounds * args.steps
    figures = {"cpu": cpu_model(), "precision": run.inputs.precision, "threads": torch.get_num_threads(),
               "dropout": args.dropout, "torch": torch.__version__, "first_compiled_step_s": first,
               "next_steps_max_s": max(later), "next_steps_median_s": statistics.median(later),
               "graphs": graphs, "row_counts": row_counts, "cold_cache": not args.warm_cache,
               "ms_per_step": {"eager": 1000 * totals[False] / n, "compiled": 1000 * totals[True] / n},
               "ratios": ratios, "median_ratio": statistics.median(ratios)}
    print(f"model {args.model}  precision {figures['precision']}  threads {figures['threads']}  "
          f"dropout {args.dropout}  CPU {figures['cpu']}  torch {torch.__version__}")
    cache = "warm" if args.warm_cache else "cold"
    print(f"compile ({cache} cache): first compiled step {first:.1f} s; the next {args.recompile_steps} steps: "
          f"slowest {max(later):.2f} s, median {statistics.median(later):.2f} s; {row_counts} row counts, "
          f"{graphs} graph(s) compiled")
    print(f"steady state, {args.rounds} rounds of {args.steps} steps: eager {figures['ms_per_step']['eager']:.0f} "
          f"ms/step, compiled {figures['ms_per_step']['compiled']:.0f} ms/step; "
          f"eager / compiled, median of rounds: {figures['median_ratio']:.3f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

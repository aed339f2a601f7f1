"""Training and evaluation throughput of minBERT against transformers.BertModel on this machine.

    python -m bench throughput [--model embedded|bert-base|FOLDER] [--precision bf16|fp32]
                               [--task sst|quora|both] [--order shuffled|bucketed]

Each model runs in its own worker process, rounds alternated (bench/paired.py); both build the same batches
(their digests checked). Training times the batches as cut; evaluation the timed examples as the trainer
evaluates them: sorted by length, in batches of --eval-batch-size, under inference mode. The last lines print
the speed targets, each `met` or `NOT MET`. FLOPs are counted on real tokens, identically for both models (the
formula is printed); the method: bench/README.md.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import random
import sys
import time

from bench import paired
from bench.common import arguments, data_dir, model_folder, parse, transformers_bert, write_json
from tasks.config import TrainConfig
from tasks.data import read_split
from tasks.encoded import encode_split, make_batch
from tasks.registry import get_task
from tasks.training import build_sampler

TRAIN_RATIO, EVAL_RATIO = 2.0, 2.5                  # x transformers, same precision, same batches
CEILING_SHARE = {"bf16": 0.60, "fp32": 0.75}         # training step's share of the peak / the ceiling's


def parse_args(argv=None):
    p = arguments("throughput", __doc__, "model", "data-dir", "json")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=128, help="the trainer's")
    p.add_argument("--steps", type=int, default=24, help="timed steps per model, task and phase")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--rounds", type=int, default=6, help="the timed steps are split into this many rounds")
    p.add_argument("--task", choices=("sst", "quora", "both"), default="both")
    p.add_argument("--order", choices=("shuffled", "bucketed"), default="shuffled",
                   help="shuffled batches, or the trainer's own length-bucketed batches for the task "
                        "(its default sampler, epoch 0: less padding)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", choices=paired.WORKERS, help=argparse.SUPPRESS)
    args = parse(p, argv)
    if args.steps < 1 or args.batch_size < 1 or args.warmup < 0 or args.rounds < 1:
        p.error("--steps, --batch-size and --rounds must be positive, --warmup non-negative")
    args.rounds = min(args.rounds, args.steps)
    return args


def build_batches(args, task: str, tokenizer, warn=None) -> tuple:
    """The warm-up then the timed training batches of `task`, and the evaluation batches, the same in
    every process: read and tokenised as the trainer does (cross-encoded pairs, the task's max length);
    `shuffled`, a seeded shuffle cut into full batches; `bucketed`, the trainer's plan for `task` alone."""
    dataset = read_split(data_dir(args.data_dir), task, "train", warn=warn)
    count = args.warmup + args.steps
    max_length = min(get_task(task).max_length, tokenizer.max_length)
    if args.order == "bucketed":  # the sampler bucketing needs every example's length
        split = encode_split(dataset, tokenizer, "cross", max_length)
        sampler = build_sampler(TrainConfig().sampler, {task: split.lengths}, args.batch_size, args.seed)
        plan = [step[task] for step in sampler.plan(0)[:count]]
    else:
        order = list(range(len(dataset)))
        random.Random(args.seed).shuffle(order)
        chosen = [dataset.examples[i] for i in order[:count * args.batch_size]]
        split = encode_split(dataclasses.replace(dataset, examples=chosen), tokenizer, "cross", max_length)
        plan = [range(i, i + args.batch_size) for i in range(0, len(split) - args.batch_size + 1, args.batch_size)]
    batches = [make_batch(split, indices, tokenizer, "cpu") for indices in plan]
    for batch in batches:  # class indices for cross-entropy, whatever the trainer's label dtype
        batch["labels"] = batch["labels"].long()
    # Evaluation sees the timed examples as tasks.evaluation.predict does: sorted by length, large batches.
    timed = sorted((i for indices in plan[args.warmup:] for i in indices), key=split.lengths.__getitem__)
    evals = [make_batch(split, timed[i:i + args.eval_batch_size], tokenizer, "cpu")
             for i in range(0, len(timed), args.eval_batch_size)]
    return batches, evals


# ------------------------------------------------------------------------------------------ worker

def head_classes(task: str) -> int:
    """Outputs of the linear head timed for `task`: the trainer's one-logit "binary" head under BCE is timed as
    two logits under cross-entropy, the same model (sigmoid(x) = softmax([0, x])[1]), so every task runs the
    same loss."""
    cfg = get_task(task)
    return cfg.num_classes if cfg.kind.has_classes else 2


class Worker:
    """One model, its batches, heads and optimiser; answers the parent's commands on stdin/stdout."""

    def __init__(self, args):
        import torch

        import minbert
        self.torch, self.args = torch, args
        folder, _ = minbert.resolve(model_folder(args.model))
        self.tokenizer = minbert.Tokenizer.from_folder(folder)
        load = minbert.from_pretrained if args.worker == "minbert" else transformers_bert
        self.model = load(str(folder))
        self.config = self.model.config
        self.dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32

    def prepare(self, task: str) -> dict:
        """Batches, a fresh head and optimiser for this task, the warm-up steps, and every timed batch's shape
        seen once (oneDNN compiles a kernel per new shape, which a long run pays once)."""
        torch, args = self.torch, self.args
        # Skipped rows are reported once, by the parent, which builds the same batches.
        batches, self.evals = build_batches(args, task, self.tokenizer, warn=lambda message: None)
        warmup, self.batches = batches[:args.warmup], batches[args.warmup:]
        torch.manual_seed(args.seed)
        self.head = torch.nn.Linear(self.config.hidden_size, head_classes(task))
        params = [*self.model.parameters(), *self.head.parameters()]
        self.optimizer = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01, fused=True)
        torch.manual_seed(args.seed + 1)
        for b in warmup:
            self.train_step(b)
        for b in self.evals:
            self.eval_step(b)
        for b in self.batches:
            self.train_step(b, update=False)
        return {"batches": paired.digest(batches, ("input_ids", "attention_mask")),
                "train_batches": len(self.batches), "eval_batches": len(self.evals)}

    def autocast(self):
        return self.torch.autocast("cpu", dtype=self.torch.bfloat16, enabled=self.args.precision == "bf16")

    def logits(self, batch):
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"])
        return self.head(out.pooler_output)

    def train_step(self, batch, update: bool = True):
        self.model.train()
        with self.autocast():
            loss = self.torch.nn.functional.cross_entropy(self.logits(batch).float(), batch["labels"])
        loss.backward()
        if update:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def eval_step(self, batch):
        self.model.eval()
        with self.torch.inference_mode(), self.autocast():
            return self.logits(batch).argmax(-1)

    def matmul_peak(self) -> dict:
        """Best GFLOP/s of large square matmuls in the run's precision."""
        best = 0.0
        for n in (2048, 3072, 4096):
            a, b = self.torch.randn(n, n).to(self.dtype), self.torch.randn(n, n).to(self.dtype)
            a @ b
            for _ in range(4 if self.dtype == self.torch.bfloat16 else 2):
                t = time.perf_counter()
                a @ b
                best = max(best, 2 * n ** 3 / (time.perf_counter() - t) / 1e9)
        return {"gflops": best}

    def matmul_ceiling(self) -> dict:
        """GFLOP/s of a training step's encoder matmuls alone, at the timed batches' own shapes: per layer and
        batch, the forward and the backward's two products (input and weight gradients) of the Q/K/V,
        attention-output, FFN-up and FFN-down projections, on plain tensors, back to back. No implementation of
        this step can use the peak better than this."""
        torch, c = self.torch, self.config
        h, inter = c.hidden_size, c.intermediate_size
        shapes = [(h, 3 * h), (h, h), (h, inter), (inter, h)]
        weights = [torch.randn(i, o).to(self.dtype) for i, o in shapes]
        tokens = [int(b["attention_mask"].sum()) for b in self.batches]
        # Operands made before the clock starts: their random fill is not matmul work.
        xs = {i: torch.randn(max(tokens), i).to(self.dtype) for i in (h, inter)}
        gs = {o: torch.randn(max(tokens), o).to(self.dtype) for o in (h, 3 * h, inter)}

        def one_pass():
            for t in tokens:
                for _ in range(c.num_hidden_layers):
                    for (i, o), w in zip(shapes, weights):
                        x, g = xs[i][:t], gs[o][:t]
                        x @ w, g @ w.t(), x.t() @ g
            return sum(6 * t * i * o for t in tokens for i, o in shapes) * c.num_hidden_layers

        one_pass()  # kernels for every shape first
        start = time.perf_counter()
        return {"gflops": one_pass() / (time.perf_counter() - start) / 1e9}

    def describe(self) -> dict:
        named = list(self.model.named_parameters())
        total = sum(p.numel() for _, p in named)
        return {"layers": self.config.num_hidden_layers, "hidden": self.config.hidden_size, "params": total,
                "non_embedding": total - sum(p.numel() for n, p in named if n.startswith("embeddings.")),
                "encoder_matrices": sum(p.numel() for n, p in named if n.startswith("encoder.") and p.dim() == 2),
                "pooler": sum(p.numel() for n, p in named if n.startswith("pooler.")), **paired.describe(self.torch)}

    def serve(self):
        paired.serve(self.describe(), {
            "prepare": self.prepare, "matmul": self.matmul_peak, "ceiling": self.matmul_ceiling,
            "train": lambda start, count: paired.timed(self.train_step, self.batches[start:start + count]),
            "eval": lambda start, count: paired.timed(self.eval_step, self.evals[start:start + count])})


# ------------------------------------------------------------------------------------------ parent

def batch_stats(args, task: str) -> dict:
    """Token counts of the timed batches, rebuilt here exactly as the workers build them."""
    import minbert
    folder, _ = minbert.resolve(model_folder(args.model))
    batches = build_batches(args, task, minbert.Tokenizer.from_folder(folder))[0][args.warmup:args.warmup + args.steps]
    if not batches:
        sys.exit(f"bench: {task} has too few training rows for --warmup {args.warmup} and a timed step")
    lengths = [int(n) for b in batches for n in b["attention_mask"].sum(1)]
    return {"examples": len(lengths), "tokens": sum(lengths), "padded": sum(b["input_ids"].numel() for b in batches),
            "sum_len_sq": sum(n * n for n in lengths), "mean_len": sum(lengths) / len(lengths),
            "mean_padded_len": sum(b["input_ids"].shape[1] for b in batches) / len(batches)}


def measure_task(args, workers: dict, task: str) -> dict:
    counts = paired.prepare_all(workers, task=task)["minbert"]
    return {"train": paired.alternate(workers, "train", counts["train_batches"], args.rounds),
            "eval": paired.alternate(workers, "eval", counts["eval_batches"], args.rounds),
            "ceiling_gflops": workers["minbert"].ask(op="ceiling")["gflops"]}


def measure(args, workers: dict) -> dict:
    """Each task's timings, and the best matmul peak (before, and after each task, under the same load)."""
    peaks, results = [workers["minbert"].ask(op="matmul")["gflops"]], {}
    for k, task in enumerate(chosen_tasks(args)):
        results[task] = measure_task(args, workers, task)
        peaks.append(workers[paired.WORKERS[k % 2]].ask(op="matmul")["gflops"])
    return {"peak": max(peaks), "tasks": results}


def chosen_tasks(args) -> list:
    return ["sst", "quora"] if args.task == "both" else [args.task]


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        Worker(args).serve()
        return 0
    stats = {task: batch_stats(args, task) for task in chosen_tasks(args)}  # a wrong folder: one line, here
    report(args, stats, paired.compare("throughput", argv, lambda workers: measure(args, workers)))
    return 0


# ------------------------------------------------------------------------------------------ report

def step_flops(info: dict, stats: dict, classes: int) -> float:
    """Training FLOPs of all the timed steps (see the module docstring)."""
    head = info["hidden"] * classes + classes
    return (6 * info["encoder_matrices"] * stats["tokens"] + 6 * (info["pooler"] + head) * stats["examples"]
            + 12 * info["layers"] * info["hidden"] * stats["sum_len_sq"])


def report(args, stats: dict, run: paired.Paired) -> None:
    mine, peak = run.info["minbert"], run.figures["peak"]
    print(f"model {args.model}: {mine['layers']} layers x {mine['hidden']}, {mine['params'] / 1e6:.1f}M parameters "
          f"({mine['non_embedding'] / 1e6:.1f}M non-embedding)  precision {args.precision}  batch {args.batch_size}  "
          f"AdamW fused  batches {args.order}")
    print(run.machine())
    print(f"matmul peak ({args.precision}, square 2048-4096, best of the run): {peak:.0f} GFLOP/s")
    print("FLOPs per train step = 6*P_enc*tokens + 6*(P_pooler+P_head)*examples + 12*layers*hidden*sum(len^2), "
          f"eval = 1/3; real tokens; P_enc = {mine['encoder_matrices'] / 1e6:.2f}M")
    tasks = {task: task_report(args, mine, task, stats[task], res, peak)
             for task, res in run.figures["tasks"].items()}
    print("\n" + run.memory_line())
    print(f"wall time {run.wall_s:.0f} s")
    met = targets(args, mine, tasks)
    write_json(args.json, {"args": vars(args), "cpu": run.cpu, "info": run.info, "matmul_peak_gflops": peak,
                           "peak_rss_mib": run.memory, "load_average": run.loads, "tasks": tasks,
                           "targets": met})


def task_report(args, mine: dict, task: str, s: dict, res: dict, peak: float) -> dict:
    """One task's table (examples/s, tokens/s, GFLOP/s, share of the peak; train and eval) and its figures."""
    print(f"\n[{task}] {sum(res['train'].steps)} timed steps x {args.batch_size} = {s['examples']} examples, "
          f"{s['tokens']} real tokens (mean length {s['mean_len']:.1f}, padded to {s['mean_padded_len']:.1f})")
    flops = step_flops(mine, s, head_classes(task))
    print(f"{'':28s}{'minbert':>12s}{'transformers':>14s}{'ratio':>8s}")
    figures = {"stats": s}
    for phase, work in (("train", flops), ("eval", flops / 3)):
        timed, total = res[phase], {n: res[phase].total(n) for n in paired.WORKERS}
        ex = {n: s["examples"] / t for n, t in total.items()}
        tok = {n: s["tokens"] / t for n, t in total.items()}
        util = {n: work / t / 1e9 / peak for n, t in total.items()}
        for label, values, fmt in (("examples/s", ex, "{:.1f}"), ("real tokens/s", tok, "{:.0f}"),
                                   ("GFLOP/s", {n: u * peak for n, u in util.items()}, "{:.0f}"),
                                   ("% of matmul peak", {n: 100 * u for n, u in util.items()}, "{:.1f}")):
            print(paired.line(f"{phase} {label}", values, timed.ratio(), fmt))
        figures[phase] = {"seconds": timed.seconds, "examples_per_s": ex, "tokens_per_s": tok, "utilisation": util,
                          "ratio_median_of_rounds": timed.ratio()}
    ceiling = res["ceiling_gflops"]
    print(f"ceiling: the step's encoder matmuls alone, same shapes, back to back: {ceiling:.0f} GFLOP/s = "
          f"{100 * ceiling / peak:.1f}% of the matmul peak (no implementation of these batches exceeds it)")
    figures["ceiling"] = {"gflops": ceiling, "utilisation": ceiling / peak}
    return figures


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
        shown = (f"{value:.2f}x", f">= {threshold:.1f}x") if unit == "x" else \
            (f"{100 * value:.0f}%", f">= {100 * threshold:.0f}%")
        print(f"  {label:34s}{shown[0]:>8s}  {shown[1]:>8s}  {'met' if value >= threshold else 'NOT MET'}")
    return [{"target": label, "value": value, "threshold": threshold, "met": value >= threshold}
            for label, value, threshold, unit in rows]


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.throughput")

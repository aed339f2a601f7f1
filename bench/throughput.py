"""Training and evaluation throughput of minBERT against transformers.BertModel on this machine.

    python -m bench.throughput [--model minilm] [--precision bf16|fp32] [--batch-size 32]
                               [--steps N] [--warmup N] [--task sst|quora|both]

Each model runs in its own worker process, so each peak RSS is its own. Both
workers build the same batches (the parent checks their digests), and it alternates them
round by round (A B, B A, A B, ...): this 2-core machine is shared with other
jobs whose load changes within seconds, so only interleaved, paired timings
give a ratio that means something. Throughputs are totals over all rounds;
ratios are the median of the per-round ratios.

Training times the batches as cut; evaluation times the same examples as the trainer
evaluates them: sorted by length, in batches of --eval-batch-size, under inference mode. The
last lines print the speed targets, each `met` or `NOT MET`.

FLOPs are counted on real (non-padding) tokens, the work the batch asks for,
identically for both models:
    train step = 6 * P_enc * tokens + 6 * (P_pooler + P_head) * examples + 12 * L * H * sum(len_i ** 2)
    eval       = one third of that
where P_enc are the encoder's matrix parameters (embedding tables excluded),
L the layers, H the hidden size and len_i each example's real length.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import DATA_DIR_HELP, data_dir
from tasks.data import read_split, split_path
from tasks.encoded import encode_split, make_batch
from tasks.registry import get_task
from tasks.training import build_sampler

WORKERS = ("minbert", "transformers")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="minilm", help="checkpoint name or folder (default: %(default)s)")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--bf16-mode", choices=("autocast", "weights"), default="autocast",
                   help="bf16 as torch.autocast over fp32 weights, or bf16 weights with fp32 master "
                        "copies in the optimizer step (applied to both models)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=128,
                   help="evaluation as the trainer evaluates: the timed examples sorted by length, in "
                        "batches of this size, under inference mode (default: %(default)s, the trainer's)")
    p.add_argument("--steps", type=int, default=24, help="timed steps per model, task and phase")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default: %(default)s)")
    p.add_argument("--no-prime", dest="prime", action="store_false",
                   help="skip the untimed forward/backward over the timed batches. By default every "
                        "batch shape is seen once before timing, as in a long run: oneDNN JIT-compiles "
                        "a bf16 matmul kernel per new shape (~4 ms each), which would otherwise be timed")
    p.add_argument("--rounds", type=int, default=6, help="the timed steps are split into this many "
                   "alternating rounds (default: %(default)s)")
    p.add_argument("--task", choices=("sst", "quora", "both"), default="both")
    p.add_argument("--order", choices=("shuffled", "bucketed"), default="shuffled",
                   help="shuffled batches, or the trainer's own length-bucketed batches for the task "
                        "(its default sampler, epoch 0: less padding)")
    p.add_argument("--optimizer", choices=("fused", "foreach"), default="fused",
                   help="torch.optim.AdamW implementation, the same for both (default: %(default)s)")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--omp-wait", choices=("passive", "active", "inherit"), default="passive",
                   help="OMP_WAIT_POLICY of the workers; passive keeps a shared machine from stalling "
                        "(default: %(default)s)")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write every figure to this file")
    p.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.warmup < 0 or args.rounds < 1:
        p.error("--steps, --batch-size and --rounds must be positive, --warmup non-negative")
    args.rounds = min(args.rounds, args.steps)
    return args


def head_classes(task: str) -> int:
    """Outputs of the linear head timed for `task`.

    The trainer's "binary" head is one logit under BCE; it is timed as two logits
    under cross-entropy, the same model (sigmoid(x) = softmax([0, x])[1]), so
    every task runs the same loss.
    """
    cfg = get_task(task)
    return cfg.num_classes if cfg.kind.has_classes else 2


def trainer_sampler() -> str:
    """The trainer's default --sampler: with one task it decides the order of the epoch's batches."""
    from tasks.training import add_training_args
    return add_training_args(argparse.ArgumentParser()).get_default("sampler")


def build_batches(args, task: str, tokenizer, warn=None) -> tuple:
    """The warm-up then the timed training batches of `task`, and the evaluation batches: the same
    in every process that builds them.

    Training rows are read and tokenised as the trainer does (`tasks.data`,
    `tasks.encoded`, cross-encoded pairs, the task's max length). `shuffled`:
    a seeded shuffle cut into full batches, tokenising only those rows;
    `bucketed`: the first batches of the trainer's own plan for this task alone.
    """
    dataset = read_split(data_dir(args.data_dir), task, "train", warn=warn)
    count = args.warmup + args.steps
    max_length = min(get_task(task).max_length, tokenizer.max_length)
    if args.order == "bucketed":  # the sampler bucketing needs every example's length
        split = encode_split(dataset, tokenizer, "cross", max_length)
        sampler = build_sampler(trainer_sampler(), {task: split.lengths}, args.batch_size, args.seed)
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


def memory_mib() -> dict:
    """VmRSS/VmHWM of this process; ru_maxrss as a cross-check (KiB on Linux)."""
    out = {"ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


# ------------------------------------------------------------------------------------------ worker

class Worker:
    """One model, its batches, heads and optimiser; answers the parent's commands on stdin/stdout."""

    def __init__(self, args):
        import torch
        import transformers

        import minbert
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
        self.torch, self.args = torch, args
        if args.threads:
            torch.set_num_threads(args.threads)
        folder, _ = minbert.resolve(args.model)
        self.tokenizer = minbert.Tokenizer.from_folder(folder)
        if args.worker == "minbert":
            self.model = minbert.from_pretrained(str(folder))
        else:
            self.model = transformers.BertModel.from_pretrained(str(folder), attn_implementation="sdpa")
        self.config = self.model.config
        self.bf16_weights = args.precision == "bf16" and args.bf16_mode == "weights"
        if self.bf16_weights:
            self.model.to(torch.bfloat16)
        self.batches, self.task = {}, None

    def prepare(self, task: str) -> dict:
        """Batches, a fresh head and optimiser for this task, and the warm-up steps."""
        torch, args = self.torch, self.args
        # Skipped rows are reported once, by the parent, which builds the same batches.
        self.batches, self.eval_batches = build_batches(args, task, self.tokenizer, warn=lambda message: None)
        self.task = task
        torch.manual_seed(args.seed)
        self.head = torch.nn.Linear(self.config.hidden_size, head_classes(task))
        if self.bf16_weights:
            self.head.to(torch.bfloat16)
        self.params = [p for p in list(self.model.parameters()) + list(self.head.parameters())]
        if self.bf16_weights:
            self.master = [p.detach().float().clone().requires_grad_() for p in self.params]
            trained = self.master
        else:
            trained = self.params
        fused = args.optimizer == "fused"
        self.optimizer = torch.optim.AdamW(trained, lr=2e-5, weight_decay=0.01, fused=fused, foreach=not fused)
        torch.manual_seed(args.seed + 1)
        for b in self.batches[:args.warmup]:
            self.train_step(b)
        self.model.eval()
        for b in self.eval_batches[:1]:
            self.eval_step(b)
        if args.prime:  # forward and backward once on every timed batch: steady-state kernels
            for b in self.batches[args.warmup:]:
                self.train_step(b, update=False)
            for b in self.eval_batches:
                self.eval_step(b)
        digest = hashlib.sha256()
        for b in self.batches:
            digest.update(b["input_ids"].numpy().tobytes() + b["attention_mask"].numpy().tobytes())
        return {"batches": digest.hexdigest(), "train_batches": len(self.batches) - args.warmup,
                "eval_batches": len(self.eval_batches)}

    def autocast(self):
        return self.torch.autocast("cpu", dtype=self.torch.bfloat16,
                                   enabled=self.args.precision == "bf16" and not self.bf16_weights)

    def logits(self, batch):
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"])
        return self.head(out.pooler_output)

    def train_step(self, batch, update: bool = True):
        torch = self.torch
        self.model.train()
        with self.autocast():
            loss = torch.nn.functional.cross_entropy(self.logits(batch).float(), batch["labels"])
        loss.backward()
        if not update:
            self.optimizer.zero_grad(set_to_none=True)
            for p in self.params:
                p.grad = None
            return loss
        if self.bf16_weights:
            for p, m in zip(self.params, self.master):
                m.grad = p.grad.float()
                p.grad = None
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.bf16_weights:
            with torch.no_grad():
                torch._foreach_copy_(self.params, self.master)
        return loss

    def eval_step(self, batch):
        with self.torch.inference_mode(), self.autocast():
            return self.logits(batch).argmax(-1)

    def timed(self, phase: str, start: int, count: int) -> float:
        if phase == "train":
            batches = self.batches[self.args.warmup + start: self.args.warmup + start + count]
            t = time.perf_counter()
            for b in batches:
                self.train_step(b)
        else:
            batches = self.eval_batches[start:start + count]
            self.model.eval()
            t = time.perf_counter()
            for b in batches:
                self.eval_step(b)
        return time.perf_counter() - t

    def matmul_peak(self) -> float:
        """Best GFLOP/s of large square matmuls in the run's precision."""
        torch = self.torch
        dtype = torch.bfloat16 if self.args.precision == "bf16" else torch.float32
        best = 0.0
        for n in (2048, 3072, 4096):
            a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
            a @ b
            reps = 4 if dtype == torch.bfloat16 else 2
            for _ in range(reps):
                t = time.perf_counter()
                a @ b
                best = max(best, 2 * n ** 3 / (time.perf_counter() - t) / 1e9)
        return best

    def matmul_ceiling(self) -> float:
        """GFLOP/s of a training step's encoder matmuls alone, at the timed batches' own shapes.

        Per layer and batch: the forward (tokens x in) @ (in x out) and the backward's
        two products (input gradient and weight gradient) of the Q/K/V, attention-output,
        FFN-up and FFN-down projections, on plain tensors, back to back, with nothing else
        in between. No implementation of this step can use the peak better than this.
        """
        torch, c = self.torch, self.config
        dtype = torch.bfloat16 if self.args.precision == "bf16" else torch.float32
        h, inter = c.hidden_size, c.intermediate_size
        shapes = [(h, 3 * h), (h, h), (h, inter), (inter, h)]
        weights = [torch.randn(i, o).to(dtype) for i, o in shapes]
        tokens = [int(b["attention_mask"].sum()) for b in self.batches[self.args.warmup:]]

        # Operands made before the clock starts: their random fill is not matmul work.
        longest = max(tokens)
        xs = {i: torch.randn(longest, i).to(dtype) for i in (h, inter)}
        gs = {o: torch.randn(longest, o).to(dtype) for o in (h, 3 * h, inter)}

        def one_pass():
            flops = 0
            for t in tokens:
                for _ in range(c.num_hidden_layers):
                    for (i, o), w in zip(shapes, weights):
                        x, g = xs[i][:t], gs[o][:t]
                        x @ w                     # forward
                        g @ w.t()                 # input gradient
                        x.t() @ g                 # weight gradient
                        flops += 6 * t * i * o
            return flops

        one_pass()  # kernels for every shape first
        start = time.perf_counter()
        flops = one_pass()
        return flops / (time.perf_counter() - start) / 1e9

    def describe(self) -> dict:
        import minbert
        c = self.config
        total = sum(p.numel() for p in self.model.parameters())
        embeddings = sum(p.numel() for n, p in self.model.named_parameters() if n.startswith("embeddings."))
        pooler = sum(p.numel() for n, p in self.model.named_parameters() if n.startswith("pooler."))
        matrices = sum(p.numel() for n, p in self.model.named_parameters()
                       if n.startswith("encoder.") and p.dim() == 2)
        return {"layers": c.num_hidden_layers, "hidden": c.hidden_size, "params": total,
                "non_embedding": total - embeddings, "encoder_matrices": matrices, "pooler": pooler,
                "torch": self.torch.__version__, "threads": self.torch.get_num_threads(),
                "native_bf16": minbert.native_bf16("cpu")}

    def serve(self):
        reply(self.describe())
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd["op"]
            if op == "prepare":
                reply(self.prepare(cmd["task"]))
            elif op in ("train", "eval"):
                reply({"seconds": self.timed(op, cmd["start"], cmd["count"])})
            elif op == "matmul":
                reply({"gflops": self.matmul_peak()})
            elif op == "ceiling":
                reply({"gflops": self.matmul_ceiling()})
            elif op == "memory":
                reply(memory_mib())
            elif op == "quit":
                return


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------ parent

class Remote:
    """A worker process (`python -m MODULE --worker NAME ARGV`) the parent talks to in JSON lines."""

    def __init__(self, name: str, argv: list, env: dict, module: str = "bench.throughput"):
        self.name = name
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--worker", name, *argv],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=Path(__file__).resolve().parents[1])

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"bench: the {self.name} worker died (exit code {self.proc.wait()})")
        return json.loads(line)

    def ask(self, **cmd) -> dict:
        self.send(**cmd)
        return self.receive()


def batch_stats(args, task: str) -> dict:
    """Token counts of the timed batches, rebuilt here exactly as the workers build them."""
    import minbert
    folder, _ = minbert.resolve(args.model)
    batches = build_batches(args, task, minbert.Tokenizer.from_folder(folder))[0][args.warmup:args.warmup + args.steps]
    lengths = [int(n) for b in batches for n in b["attention_mask"].sum(1)]
    return {"examples": len(lengths), "tokens": sum(lengths), "padded": sum(b["input_ids"].numel() for b in batches),
            "sum_len_sq": sum(n * n for n in lengths), "mean_len": sum(lengths) / len(lengths),
            "mean_padded_len": sum(b["input_ids"].shape[1] for b in batches) / len(batches)}


def step_flops(info: dict, stats: dict, classes: int) -> float:
    """Training FLOPs of all the timed steps (see the module docstring)."""
    head = info["hidden"] * classes + classes
    return (6 * info["encoder_matrices"] * stats["tokens"] + 6 * (info["pooler"] + head) * stats["examples"]
            + 12 * info["layers"] * info["hidden"] * stats["sum_len_sq"])


def measure(workers: dict, phase: str, count: int, args) -> dict:
    """Alternate the workers round by round over the same `count` batches; seconds per round per worker."""
    names = list(workers)
    rounds = min(args.rounds, count)
    per_round = [count // rounds + (r < count % rounds) for r in range(rounds)]
    seconds = {n: [] for n in names}
    start = 0
    for r, count in enumerate(per_round):
        for name in (names if r % 2 == 0 else names[::-1]):
            seconds[name].append(workers[name].ask(op=phase, start=start, count=count)["seconds"])
        start += count
    return {"seconds": seconds, "steps": per_round}


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        Worker(args).serve()
        return 0
    tasks = ["sst", "quora"] if args.task == "both" else [args.task]
    for task in tasks:  # before any worker starts: a wrong folder is one line, not a dead worker
        path = split_path(data_dir(args.data_dir), task, "train")
        if not path.exists():
            sys.exit(f"bench: {path} not found (pass --data-dir or set MINBERT_DATA_DIR)")
    env = dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1", TOKENIZERS_PARALLELISM="false")
    if args.omp_wait != "inherit":
        env["OMP_WAIT_POLICY"] = args.omp_wait.upper()
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])]
    began, load_before = time.time(), os.getloadavg()
    workers = {name: Remote(name, passthrough, env) for name in WORKERS}
    info = {name: w.receive() for name, w in workers.items()}
    peaks = [workers["minbert"].ask(op="matmul")["gflops"]]
    results = {}
    for task in tasks:
        for w in workers.values():  # both warm up at once: nothing is timed yet
            w.send(op="prepare", task=task)
        built = {name: w.receive() for name, w in workers.items()}
        if len({(b["batches"], b["train_batches"], b["eval_batches"]) for b in built.values()}) != 1:
            sys.exit("bench: the workers built different batches")
        counts = built["minbert"]
        if counts["train_batches"] < 1:
            sys.exit(f"bench: {task} has too few training rows for --warmup {args.warmup} and a timed step")
        results[task] = {"stats": batch_stats(args, task),
                         "train": measure(workers, "train", counts["train_batches"], args),
                         "eval": measure(workers, "eval", counts["eval_batches"], args),
                         "ceiling_gflops": workers["minbert"].ask(op="ceiling")["gflops"]}
        peaks.append(workers[WORKERS[len(peaks) % 2]].ask(op="matmul")["gflops"])
    memory = {name: w.ask(op="memory") for name, w in workers.items()}
    for w in workers.values():
        w.send(op="quit")
        w.proc.wait()
    report(args, info, results, max(peaks), memory, (load_before, os.getloadavg()), time.time() - began)
    return 0


def report(args, info, results, peak, memory, loads, wall):
    mine = info["minbert"]
    precision = args.precision if args.precision == "fp32" else f"bf16 ({args.bf16_mode})"
    print(f"model {args.model}: {mine['layers']} layers x {mine['hidden']}, {mine['params'] / 1e6:.1f}M parameters "
          f"({mine['non_embedding'] / 1e6:.1f}M non-embedding)  precision {precision}  batch {args.batch_size}  "
          f"AdamW {args.optimizer}  batches {args.order}")
    print(f"machine: {os.cpu_count()} CPUs, torch {mine['torch']}, {mine['threads']} threads, "
          f"OMP_WAIT_POLICY={args.omp_wait}; load average {loads[0][0]:.1f} -> {loads[1][0]:.1f} "
          f"(shared machine: rounds alternate, ratios are medians of per-round ratios)")
    print(f"matmul peak ({args.precision}, square 2048-4096, best of the run): {peak:.0f} GFLOP/s")
    print("FLOPs per train step = 6*P_enc*tokens + 6*(P_pooler+P_head)*examples + 12*layers*hidden*sum(len^2), "
          "eval = 1/3; real tokens; "
          f"P_enc = {mine['encoder_matrices'] / 1e6:.2f}M")
    out = {"args": vars(args), "info": info, "matmul_peak_gflops": peak, "memory_mib": memory,
           "load_average": loads, "tasks": {}}
    ratios_line = []
    for task, res in results.items():
        s = res["stats"]
        print(f"\n[{task}] {sum(res['train']['steps'])} timed steps x {args.batch_size} = {s['examples']} examples, "
              f"{s['tokens']} real tokens (mean length {s['mean_len']:.1f}, padded to {s['mean_padded_len']:.1f})")
        flops = step_flops(mine, s, head_classes(task))
        rows, ratios, figures = [], [], {}
        for phase in ("train", "eval"):
            sec = res[phase]["seconds"]
            total = {n: sum(v) for n, v in sec.items()}
            per_round = statistics.median(b / a for a, b in zip(sec["minbert"], sec["transformers"]))
            work = flops if phase == "train" else flops / 3
            ex = {n: s["examples"] / t for n, t in total.items()}
            tok = {n: s["tokens"] / t for n, t in total.items()}
            util = {n: work / t / 1e9 / peak for n, t in total.items()}
            rows += [(f"{phase} examples/s", ex, "{:.1f}", per_round),
                     (f"{phase} real tokens/s", tok, "{:.0f}", per_round),
                     (f"{phase} GFLOP/s", {n: work / t / 1e9 for n, t in total.items()}, "{:.0f}", per_round),
                     (f"{phase} % of matmul peak", {n: 100 * u for n, u in util.items()}, "{:.1f}", per_round)]
            ratios.append(f"{phase} ex/s {per_round:.2f} tok/s {per_round:.2f} util {per_round:.2f}")
            figures[phase] = {"seconds": sec, "examples_per_s": ex, "tokens_per_s": tok, "utilisation": util,
                              "ratio_median_of_rounds": per_round}
        print(f"{'':28s}{'minbert':>12s}{'transformers':>14s}{'ratio':>8s}")
        for label, values, fmt, ratio in rows:
            print(f"{label:28s}{fmt.format(values['minbert']):>12s}{fmt.format(values['transformers']):>14s}"
                  f"{ratio:8.2f}")
        spread = {n: f"{min(v) / max(v):.2f}" for n, v in
                  ((n, [c / t for c, t in zip(res['train']['steps'], res['train']['seconds'][n])])
                   for n in WORKERS)}
        print(f"{'(train: slowest/fastest round)':28s}{spread['minbert']:>12s}{spread['transformers']:>14s}")
        ceiling = res["ceiling_gflops"]
        print(f"ceiling: the step's encoder matmuls alone, same shapes, back to back: {ceiling:.0f} GFLOP/s = "
              f"{100 * ceiling / peak:.1f}% of the matmul peak (no implementation of these batches exceeds it)")
        figures["ceiling"] = {"gflops": ceiling, "utilisation": ceiling / peak}
        ratios_line.append(f"{task}: " + ", ".join(ratios))
        out["tasks"][task] = {"stats": s, **figures}
    peak_rss = {n: memory[n].get("VmHWM", memory[n]["ru_maxrss"]) for n in WORKERS}
    print(f"\npeak resident memory (VmHWM, MiB; ru_maxrss agrees)  minbert {peak_rss['minbert']:.0f}  "
          f"transformers {peak_rss['transformers']:.0f}  ratio {peak_rss['minbert'] / peak_rss['transformers']:.2f}")
    print(f"wall time {wall:.0f} s")
    out["targets"] = targets(args, mine, out["tasks"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"ratio minBERT/transformers ({precision}): " + "; ".join(ratios_line)
          + f"; peak RSS {peak_rss['minbert'] / peak_rss['transformers']:.2f}")


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


if __name__ == "__main__":
    sys.exit(main())

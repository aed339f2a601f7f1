"""Training and evaluation throughput of minBERT against transformers.BertModel on this machine.

    python -m bench throughput [--model embedded|bert-base|FOLDER] [--precision bf16|fp32] [--batch-size 32]
                               [--steps N] [--warmup N] [--task sst|quora|both]

Each model runs in its own worker process (bench/paired.py): both build the same batches (the parent checks
their digests) and the parent alternates them round by round. Throughputs are totals over all rounds; ratios
are the median of the per-round ratios. `--model bert-base` is bert-base's shape with random weights
(bench/common.py's bert_base_shaped): speed depends on the shape, not the weights.

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
import os
import random
import sys
import time

from bench import paired
from bench.common import DATA_DIR_HELP, data_dir, model_folder
from bench.throughput_report import head_classes, report
from tasks.data import read_split, split_path
from tasks.encoded import encode_split, make_batch
from tasks.registry import get_task
from tasks.training import build_sampler

WORKERS = ("minbert", "transformers")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench throughput", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded", help="embedded, bert-base (its shape, random weights), or a "
                                                        "checkpoint name or folder (default: %(default)s)")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
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
        folder, _ = minbert.resolve(model_folder(args.model))
        self.tokenizer = minbert.Tokenizer.from_folder(folder)
        if args.worker == "minbert":
            self.model = minbert.from_pretrained(str(folder))
        else:
            self.model = transformers.BertModel.from_pretrained(str(folder), attn_implementation="sdpa")
        self.config = self.model.config
        self.batches, self.task = {}, None

    def prepare(self, task: str) -> dict:
        """Batches, a fresh head and optimiser for this task, and the warm-up steps."""
        torch, args = self.torch, self.args
        # Skipped rows are reported once, by the parent, which builds the same batches.
        self.batches, self.eval_batches = build_batches(args, task, self.tokenizer, warn=lambda message: None)
        self.task = task
        torch.manual_seed(args.seed)
        self.head = torch.nn.Linear(self.config.hidden_size, head_classes(task))
        self.params = [p for p in list(self.model.parameters()) + list(self.head.parameters())]
        fused = args.optimizer == "fused"
        self.optimizer = torch.optim.AdamW(self.params, lr=2e-5, weight_decay=0.01, fused=fused, foreach=not fused)
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
                                   enabled=self.args.precision == "bf16")

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
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
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
        paired.serve(self.describe(), {
            "prepare": self.prepare, "train": lambda start, count: {"seconds": self.timed("train", start, count)},
            "eval": lambda start, count: {"seconds": self.timed("eval", start, count)},
            "matmul": lambda: {"gflops": self.matmul_peak()}, "ceiling": lambda: {"gflops": self.matmul_ceiling()}})


# ------------------------------------------------------------------------------------------ parent

def batch_stats(args, task: str) -> dict:
    """Token counts of the timed batches, rebuilt here exactly as the workers build them."""
    import minbert
    folder, _ = minbert.resolve(model_folder(args.model))
    batches = build_batches(args, task, minbert.Tokenizer.from_folder(folder))[0][args.warmup:args.warmup + args.steps]
    lengths = [int(n) for b in batches for n in b["attention_mask"].sum(1)]
    return {"examples": len(lengths), "tokens": sum(lengths), "padded": sum(b["input_ids"].numel() for b in batches),
            "sum_len_sq": sum(n * n for n in lengths), "mean_len": sum(lengths) / len(lengths),
            "mean_padded_len": sum(b["input_ids"].shape[1] for b in batches) / len(batches)}


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
    env = {"HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if args.omp_wait != "inherit":
        env["OMP_WAIT_POLICY"] = args.omp_wait.upper()
    began, load_before = time.time(), os.getloadavg()
    workers, info = paired.start("throughput", WORKERS, list(argv if argv is not None else sys.argv[1:]), **env)
    peaks = [workers["minbert"].ask(op="matmul")["gflops"]]
    results = {}
    for task in tasks:
        built = paired.ask_all(workers, op="prepare", task=task)
        if len({(b["batches"], b["train_batches"], b["eval_batches"]) for b in built.values()}) != 1:
            sys.exit("bench: the workers built different batches")
        counts = built["minbert"]
        if counts["train_batches"] < 1:
            sys.exit(f"bench: {task} has too few training rows for --warmup {args.warmup} and a timed step")
        results[task] = {"stats": batch_stats(args, task),
                         "train": paired.alternate(workers, "train", counts["train_batches"], args.rounds),
                         "eval": paired.alternate(workers, "eval", counts["eval_batches"], args.rounds),
                         "ceiling_gflops": workers["minbert"].ask(op="ceiling")["gflops"]}
        peaks.append(workers[WORKERS[len(peaks) % 2]].ask(op="matmul")["gflops"])
    memory = paired.finish(workers)
    report(args, info, results, max(peaks), memory, (load_before, os.getloadavg()), time.time() - began)
    return 0

"""One masked-language-model pretraining step of minBERT against transformers' BertForMaskedLM on this machine.

    python -m bench pretrain [--size mini|base|...] [--batch-size 64] [--length 128] [--steps N]
                             [--precision auto|bf16|fp32]

A step is forward, MLM loss, backward and torch's fused AdamW step, both models with the same seeded random
weights and bert-base-uncased's vocabulary, on full sequences masked by pretraining's own masking. Each model
runs in its own worker process, rounds alternated (bench/paired.py); both build the same batches and report
their loss on the first one before any update (they agree to the precision's rounding). The last line says
whether the target, minBERT >= 2x transformers' tokens/s, is met. The method: bench/README.md.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse

from bench import paired
from bench.common import arguments, write_json

SIZES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768)}
VOCAB_SIZE = 30522  # bert-base-uncased's word pieces, the embedded model's vocabulary
TARGET_RATIO = 2.0


def parse_args(argv=None):
    p = arguments("pretrain", __doc__, "json")
    shape = p.add_argument_group("what is timed")
    shape.add_argument("--size", choices=tuple(SIZES), default="mini", help="layers x hidden: " + ", ".join(
        f"{k} {n}x{h}" for k, (n, h) in SIZES.items()) + "; base takes about ten times as long as mini")
    shape.add_argument("--batch-size", type=int, default=64, help="sequences per step")
    shape.add_argument("--length", type=int, default=128, help="word pieces per sequence")
    shape.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                       help="both models' precision; auto: bf16 autocast where the CPU computes bf16 natively, "
                            "else fp32 (minbert.resolve_precision)")
    timing = p.add_argument_group("how it is timed")
    timing.add_argument("--steps", type=int, default=6, help="timed steps per model")
    timing.add_argument("--warmup", type=int, default=2, help="untimed steps first, on their own batches")
    timing.add_argument("--rounds", type=int, default=3, help="the timed steps are cut into this many rounds")
    timing.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", choices=paired.WORKERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if min(args.steps, args.batch_size, args.rounds) < 1 or args.warmup < 0 or not 8 <= args.length <= 512:
        p.error("--steps, --batch-size and --rounds must be positive, --warmup non-negative, --length in 8..512")
    args.rounds = min(args.rounds, args.steps)
    return args


def build_batches(args) -> list:
    """Warm-up then timed batches, each {"input_ids", "attention_mask", "token_type_ids", "labels"}, the same in
    every process: random words of the embedded model's vocabulary (bert-base-uncased's) between [CLS] and [SEP],
    masked by pretraining's own masking (`tasks.pretraining.masking`, stream 0, the sequence's index)."""
    import numpy as np

    import minbert
    from tasks.pretraining.masking import Masking, masked_batch
    tokenizer = minbert.Tokenizer.from_folder(minbert.resolve("minilm")[0])
    masking = Masking.for_tokenizer(tokenizer, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    count = (args.warmup + args.steps) * args.batch_size
    words = rng.choice(masking.random_ids, size=(count, args.length - 2))
    sequences = [np.concatenate([[tokenizer.cls_id], row, [tokenizer.sep_id]]) for row in words]
    return [masked_batch(sequences, [(i, 0) for i in range(start, start + args.batch_size)], masking,
                         tokenizer.pad_id, "cpu") for start in range(0, count, args.batch_size)]


# ------------------------------------------------------------------------------------------ worker

class Worker:
    """One model, the batches and its optimiser; answers the parent's commands on stdin/stdout."""

    def __init__(self, args):
        import torch

        import minbert
        self.torch, self.args = torch, args
        self.precision = minbert.resolve_precision(args.precision, "cpu")
        layers, hidden = SIZES[args.size]
        config = minbert.BertConfig(vocab_size=VOCAB_SIZE, hidden_size=hidden, num_hidden_layers=layers,
                                    num_attention_heads=hidden // 64, intermediate_size=4 * hidden,
                                    max_position_embeddings=512)
        torch.manual_seed(args.seed)
        self.model = minbert.build_mlm_model(config)  # the default implementation: what pretraining runs
        if args.worker == "transformers":
            self.model = self.transformers_twin(config, self.model.state_dict())
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=1e-4,
                                           weight_decay=0.01, fused=True)
        self.batches = build_batches(args)

    @staticmethod
    def transformers_twin(config, state: dict):
        """transformers' BertForMaskedLM with the same weights (it has no pooler: those tensors are left out)."""
        import transformers
        transformers.utils.logging.set_verbosity_error()
        ours = {k: v for k, v in config.to_dict().items() if k != "implementation"}
        model = transformers.BertForMaskedLM(transformers.BertConfig(**ours, attn_implementation="sdpa"))
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not missing and all(k.startswith("bert.pooler.") for k in unexpected), (missing, unexpected)
        return model

    def loss(self, batch):
        inputs = (batch["input_ids"], batch["attention_mask"])
        with self.torch.autocast("cpu", dtype=self.torch.bfloat16, enabled=self.precision == "bf16"):
            if self.args.worker == "minbert":
                return self.model.compute_loss(*inputs, batch["labels"]).loss
            return self.model(input_ids=inputs[0], attention_mask=inputs[1], labels=batch["labels"]).loss

    def step(self, batch):
        self.model.train()
        self.loss(batch).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def prepare(self) -> dict:
        """The first timed batch's loss before any update (no dropout), the warm-up steps, the batches' digest."""
        self.model.eval()
        with self.torch.no_grad():
            first_loss = float(self.loss(self.batches[self.args.warmup]))
        for batch in self.batches[:self.args.warmup]:
            self.step(batch)
        return {"batches": paired.digest(self.batches, ("input_ids", "labels")), "first_loss": first_loss}

    def serve(self):
        timed = self.batches[self.args.warmup:]
        paired.serve({"params": sum(p.numel() for p in self.model.parameters()), "precision": self.precision,
                      "class": type(self.model).__name__, **paired.describe(self.torch)},
                     {"prepare": self.prepare,
                      "train": lambda start, count: paired.timed(self.step, timed[start:start + count])})


# ------------------------------------------------------------------------------------------ parent

def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        Worker(args).serve()
        return 0
    return report(args, paired.compare("pretrain", argv, lambda workers: {
        "prepared": paired.prepare_all(workers),
        "timed": paired.alternate(workers, "train", args.steps, args.rounds)}))


def report(args, run: paired.Paired) -> int:
    layers, hidden = SIZES[args.size]
    mine, prepared, timed = run.info["minbert"], run.figures["prepared"], run.figures["timed"]
    tokens = args.steps * args.batch_size * args.length
    rate = {n: tokens / timed.total(n) for n in paired.WORKERS}
    ratio = timed.ratio()
    print(f"MLM pretraining step, {args.size} ({layers} x {hidden}, vocabulary {VOCAB_SIZE}, "
          f"{mine['params'] / 1e6:.1f}M parameters), precision {mine['precision']}, batch {args.batch_size} x "
          f"{args.length}, 15% masked (80/10/10), torch AdamW fused")
    print(run.machine())
    first = {n: prepared[n]["first_loss"] for n in paired.WORKERS}
    print(f"loss on the first timed batch before any update, no dropout: minbert {first['minbert']:.4f}  "
          f"transformers {first['transformers']:.4f}  (same weights and masking)")
    print(f"{'':28s}{'minbert':>12s}{'transformers':>14s}{'ratio':>8s}")
    print(paired.line("tokens/s", rate, ratio))
    print(run.memory_line())
    spread = {n: min(timed.seconds[n]) / max(timed.seconds[n]) for n in paired.WORKERS}
    print(f"{'(fastest/slowest round)':28s}{spread['minbert']:12.2f}{spread['transformers']:14.2f}")
    print(f"wall time {run.wall_s:.0f} s; {sum(timed.steps)} timed steps in {len(timed.steps)} rounds, "
          f"{args.warmup} warm-up steps each")
    verdict = "met" if ratio >= TARGET_RATIO else "NOT MET"
    print(f"target: minBERT tokens/s >= {TARGET_RATIO:.1f}x transformers': {ratio:.2f}x {verdict}")
    write_json(args.json, {
        "args": vars(args), "cpu": run.cpu, "info": run.info, "first_loss": first, "seconds": timed.seconds,
        "steps": timed.steps, "tokens": tokens, "tokens_per_s": rate, "ratio_median_of_rounds": ratio,
        "peak_rss_mib": run.memory, "load_average": run.loads,
        "target": {"ratio": TARGET_RATIO, "met": ratio >= TARGET_RATIO}})
    return 0


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.pretrain")

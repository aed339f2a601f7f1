"""`bench.gpu`'s comparison: one optimiser step and an evaluation forward, minBERT against transformers.

For minBERT (`minbert.from_pretrained`, the implementation `auto` picks on CUDA) and
`transformers.BertModel(attn_implementation="sdpa")`, same checkpoint, same batches (bench.throughput's: a
seeded shuffle of SST's and Quora's training rows, cross-encoded, cut into batches of --batch-size), same
precision, in one process: an optimiser step (forward, a linear head on the pooled output, cross-entropy,
backward, fused AdamW) and an evaluation forward. The two models alternate round by round; every round ends
with `torch.cuda.synchronize()`; ratios are the median of the per-round ratios. fp16 runs under a GradScaler
as the trainer's fp16 does; fp32 runs in the process's matmul precision (bench.gpu sets TF32 as the trainer
does, unless --no-tf32). Peak memory is `torch.cuda.max_memory_allocated` over that model's steps.
"""
import statistics
import time

from bench.throughput import build_batches, head_classes


class Timed:
    """One model on the GPU with its head and optimiser, for one task and precision."""

    def __init__(self, torch, model, hidden: int, classes: int, precision: str, device):
        self.torch, self.model, self.precision, self.device = torch, model, precision, device
        torch.manual_seed(0)
        self.head = torch.nn.Linear(hidden, classes).to(device)
        params = list(model.parameters()) + list(self.head.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01, fused=True)
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def autocast(self):
        return self.torch.autocast(self.device.type, dtype=self.dtype or self.torch.float32,
                                   enabled=self.dtype is not None)

    def logits(self, batch):
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"])
        return self.head(out.pooler_output)

    def train(self, batches) -> None:
        F = self.torch.nn.functional
        self.model.train()
        for b in batches:
            with self.autocast():
                loss = F.cross_entropy(self.logits(b).float(), b["labels"])
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)

    def evaluate(self, batches) -> None:
        self.model.eval()
        with self.torch.inference_mode(), self.autocast():
            for b in batches:
                self.logits(b).argmax(-1)


def load_models(torch, folder: str, device):
    import transformers

    import minbert
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    ours = minbert.from_pretrained(folder).to(device)
    theirs = transformers.BertModel.from_pretrained(folder, attn_implementation="sdpa").to(device)
    return {"minbert": ours, "transformers": theirs}


def time_models(torch, args, folder: str, precision: str, task: str, tokenizer) -> dict:
    """Both models, fresh from the checkpoint, on the same batches; rounds alternate A B, B A, ..."""
    device = torch.device(args.device)
    train, evals = build_batches(args, task, tokenizer, warn=lambda message: None)
    train = [{k: v.to(device) for k, v in b.items()} for b in train]
    for b in train:
        b["labels"] = b["labels"].long()
    evals = [{k: v.to(device) for k, v in b.items()} for b in evals]
    models = load_models(torch, folder, device)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda device: None)  # a CPU run: a smoke of this script
    timed = {name: Timed(torch, m, m.config.hidden_size, head_classes(task), precision, device)
             for name, m in models.items()}
    peaks = {}
    for name, t in timed.items():
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        t.train(train[:args.warmup])
        t.evaluate(evals[:1])
        sync(device)
        peaks[name] = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else float("nan")
    timed_train = train[args.warmup:]
    per_round = max(1, len(timed_train) // args.rounds)
    seconds = {(name, phase): [] for name in timed for phase in ("train", "eval")}
    for r in range(args.rounds):
        order = list(timed) if r % 2 == 0 else list(reversed(timed))
        for name in order:
            for phase, work in (("train", timed_train[r * per_round:(r + 1) * per_round]),
                                ("eval", evals)):
                sync(device)
                start = time.perf_counter()
                (timed[name].train if phase == "train" else timed[name].evaluate)(work)
                sync(device)
                seconds[name, phase].append(time.perf_counter() - start)
    examples = {"train": per_round * args.batch_size, "eval": sum(len(b["input_ids"]) for b in evals)}
    out = {"task": task, "precision": precision, "peak_mib": peaks}
    for phase in ("train", "eval"):
        for name in timed:
            out[f"{name}_{phase}_examples_per_s"] = examples[phase] * args.rounds / sum(seconds[name, phase])
        out[f"{phase}_ratio"] = statistics.median(t / m for m, t in zip(seconds["minbert", phase],
                                                                        seconds["transformers", phase]))
    del timed, models
    if cuda:
        torch.cuda.empty_cache()
    return out

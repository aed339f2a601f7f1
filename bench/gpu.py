"""What one CUDA GPU does with this project, in a few minutes: minBERT against transformers, and the trainer.

    python -m bench.gpu [--model PATH] [--precisions bf16,fp16,fp32] [--steps N] [--trainer-steps A,B]

Part 1, the model: one optimiser step (forward, a linear head on the pooled output, cross-entropy,
backward, fused AdamW) and an evaluation forward, for minBERT (`minbert.from_pretrained`, the
implementation `auto` picks on CUDA) and `transformers.BertModel(attn_implementation="sdpa")`, same
checkpoint, same batches (bench.throughput's: a seeded shuffle of SST's and Quora's training rows,
cross-encoded, cut into batches of --batch-size), same precision, in one process. The two models
alternate round by round; every round ends with `torch.cuda.synchronize()`; ratios are the median of
the per-round ratios. fp16 runs under a GradScaler as the trainer's fp16 does; fp32 is true fp32
(TF32 off, torch's default and the trainer's). Peak memory is `torch.cuda.max_memory_allocated`
over that model's steps.

Part 2, the trainer: `train_multitask.py --device cuda --max-steps A` and `--max-steps B` for each
setting (default, fp16, SMART, gradient surgery) in its own process; (wall(B) - wall(A)) / (B - A) is
the time of one of the trainer's own steps, start-up and the final evaluation cancelled out.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import DATA_DIR_HELP
from bench.throughput import build_batches, head_classes

TRAINER_SETTINGS = {            # label: extra train_multitask.py arguments
    "default (auto precision)": [],
    "fp16": ["--precision", "fp16"],
    "SMART": ["--smart"],
    "surgery pcgrad": ["--surgery", "pcgrad"],
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="minilm", help="checkpoint name or folder (default: %(default)s)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--precisions", default="bf16,fp16,fp32",
                   help="comma-separated; none skips part 1 (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=24, help="timed steps per model, task and phase")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--tasks", default="sst,quora")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trainer-steps", default="20,120",
                   help="A,B: the trainer's --max-steps of the short and the long run; 0 skips part 2")
    p.add_argument("--trainer-settings", default=",".join(TRAINER_SETTINGS),
                   help="which of: " + ", ".join(TRAINER_SETTINGS))
    p.add_argument("--json", default=None, help="also write every figure to this file")
    args = p.parse_args(argv)
    args.order, args.prime = "shuffled", False  # what build_batches reads
    return args


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


def trainer_step_seconds(args, folder: str, label: str, short: int, long: int) -> dict:
    """The trainer's own step, from two runs that differ only in --max-steps."""
    walls = {}
    for steps in (short, long):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "train_multitask.py", "--model", folder, "--device", args.device,
                   "--max-steps", str(steps), "--out", str(Path(tmp) / "run"), "--seed", str(args.seed),
                   *TRAINER_SETTINGS[label]] + (["--data-dir", args.data_dir] if args.data_dir else [])
            start = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            walls[steps] = time.perf_counter() - start
            if done.returncode != 0:
                return {"setting": label, "error": done.stderr.strip().splitlines()[-1:]}
            config = json.loads((Path(tmp) / "run" / "config.json").read_text())
    per_step = (walls[long] - walls[short]) / (long - short)
    return {"setting": label, "precision": config.get("precision", {}).get("used"),
            "implementation": config.get("implementation", {}).get("used"),
            "step_ms": 1000 * per_step, "wall_s": walls}


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    import minbert
    device = torch.device(args.device)
    folder = str(minbert.resolve(args.model)[0])
    tokenizer = minbert.Tokenizer.from_folder(folder)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name}; torch {torch.__version__}; model {folder}", flush=True)
    results = {"device": name, "torch": torch.__version__, "model": folder, "models": [], "trainer": []}
    print(f"{'task':6} {'prec':5} {'minbert ex/s':>13} {'transformers':>13} {'ratio':>6} | "
          f"{'eval ex/s':>10} {'transformers':>13} {'ratio':>6} | peak MiB (minbert / transformers)")
    for precision in (p for p in args.precisions.split(",") if p not in ("", "none")):
        if precision == "bf16" and not minbert.native_bf16(device):
            print(f"{precision}: not native on this device, skipped")
            continue
        for task in args.tasks.split(","):
            r = time_models(torch, args, folder, precision, task, tokenizer)
            results["models"].append(r)
            print(f"{task:6} {precision:5} {r['minbert_train_examples_per_s']:13.0f} "
                  f"{r['transformers_train_examples_per_s']:13.0f} {r['train_ratio']:6.2f} | "
                  f"{r['minbert_eval_examples_per_s']:10.0f} {r['transformers_eval_examples_per_s']:13.0f} "
                  f"{r['eval_ratio']:6.2f} | {r['peak_mib']['minbert']:.0f} / {r['peak_mib']['transformers']:.0f}",
                  flush=True)
    short, long = (int(x) for x in args.trainer_steps.split(",")) if args.trainer_steps != "0" else (0, 0)
    for label in (s for s in args.trainer_settings.split(",") if long > short):
        r = trainer_step_seconds(args, folder, label, short, long)
        results["trainer"].append(r)
        print("trainer " + (f"{label}: {r['error']}" if "error" in r else
                            f"{label}: {r['step_ms']:.1f} ms/step ({r['precision']}, {r['implementation']}; "
                            f"walls {r['wall_s'][short]:.1f}s / {r['wall_s'][long]:.1f}s)"), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

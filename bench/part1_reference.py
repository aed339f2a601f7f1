"""Reference for Part 1 of the CS224N default project: sentiment classification on SST-5 and CFIMDB.

    python -m bench part1-reference --option pretrain|finetune [--tasks sst,cfimdb] [--epochs N]
                                    [--lr X] [--batch-size B] [--json OUT] ...

The same job as our `classifier.py`, done with Hugging Face `transformers`:
`BertForSequenceClassification` is the course's classifier (pooler output ->
dropout -> linear), loaded from the same checkpoint, trained on the same files
with the same budget. If our numbers land where these do, our BERT, optimiser
and loop are right; if they do not, the gap is ours to explain.

It follows the protocol of the course's classifier.py:
- `pretrain`: every parameter of the BERT (embeddings, encoder, pooler) is
  frozen, only the linear head trains; `finetune`: everything trains.
- the model is in train mode while training, in both options: the course's
  frozen BERT still runs its dropout, and so does this one.
- AdamW with a constant learning rate, no warm-up, no scheduler, no weight decay,
  eps 1e-6 (the defaults of the course's optimizer.py); loss = summed
  cross-entropy / batch size, as the course computes it.
- a fresh seeded shuffle every epoch, batches padded to their own longest
  sentence, dev accuracy after every epoch; the best epoch is the first one to
  reach the highest dev accuracy (the course keeps a checkpoint on `>`).
Sentences are read as the course reads them: lower-cased and stripped.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import contextlib
import csv
import hashlib
import json
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import minbert
from bench.common import DATA_DIR_HELP, data_dir

# classifier.py's per-mode epochs and learning rates: by default the reference runs on the same budget.
from tasks.course.part1 import MODE_DEFAULTS, mode_defaults_text
from tasks.machine import cpu_model

TASKS = ("sst", "cfimdb")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench part1-reference", description=__doc__.split("\n\n")[0])
    p.add_argument("--option", choices=("pretrain", "finetune"), required=True,
                   help="pretrain: the BERT (pooler included) is frozen, only the classifier trains; "
                        "finetune: everything trains")
    p.add_argument("--tasks", default="sst,cfimdb", help="comma-separated, from sst and cfimdb (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=None,
                   help=f"(default: classifier.py's, {mode_defaults_text('epochs')})")
    p.add_argument("--lr", type=float, default=None,
                   help=f"constant learning rate (default: classifier.py's peak rate, {mode_defaults_text('lr')})")
    p.add_argument("--batch-size", type=int, default=8, help="training batch size (default: %(default)s)")
    p.add_argument("--eval-batch-size", type=int, default=32,
                   help="dev batches, length-sorted; changes speed, not accuracy (default: %(default)s)")
    p.add_argument("--hidden-dropout-prob", type=float, default=0.3,
                   help="dropout between the pooler and the linear layer, the course's flag of this name; "
                        "the BERT keeps its checkpoint's own dropout (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=512, help="tokenizer truncation (default: %(default)s)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay (default: %(default)s)")
    p.add_argument("--eps", type=float, default=1e-6,
                   help="AdamW eps; the course's optimizer.py defaults to 1e-6 (default: %(default)s)")
    p.add_argument("--head-init", choices=("linear", "bert"), default="linear",
                   help="linear: torch.nn.Linear's own initialisation, as a head built with nn.Linear gets; "
                        "bert: transformers' normal(0, 0.02) with zero bias (default: %(default)s)")
    p.add_argument("--seed", type=int, default=11711, help="(default: %(default)s, the course's)")
    p.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    p.add_argument("--model", default="minilm",
                   help="checkpoint folder or name, resolved as minBERT resolves it (default: %(default)s, "
                        "the embedded all-MiniLM-L6-v2)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16 = torch.autocast on CPU over fp32 weights; only worth it on CPUs with "
                        "bf16 units (default: %(default)s)")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop each task's training after this many optimiser steps, then evaluate "
                        "(0: no limit; for smoke runs)")
    p.add_argument("--train-fraction", type=float, default=1.0,
                   help="train on a seeded random subset of this fraction (for smoke runs)")
    p.add_argument("--dev-fraction", type=float, default=1.0,
                   help="evaluate on a seeded random subset of this fraction (for smoke runs)")
    p.add_argument("--json", default=None, metavar="OUT", help="write every figure and the settings here")
    args = p.parse_args(argv)

    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    for task in args.tasks:
        if task not in TASKS:
            p.error(f"--tasks: unknown task {task!r} (choose from {', '.join(TASKS)})")
    if args.lr is None:
        args.lr = MODE_DEFAULTS[args.option]["lr"]
    if args.epochs is None:
        args.epochs = MODE_DEFAULTS[args.option]["epochs"]
    for name in ("epochs", "batch_size", "eval_batch_size", "max_length"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("train_fraction", "dev_fraction"):
        if not 0 < getattr(args, name) <= 1:
            p.error(f"--{name.replace('_', '-')} must be in (0, 1]")
    if not 0 <= args.hidden_dropout_prob < 1:
        p.error("--hidden-dropout-prob must be in [0, 1)")
    return args


def read_split(path: Path) -> list:
    """(sentence, label) pairs, read the way the course's load_data reads them."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found (pass --data-dir or set MINBERT_DATA_DIR)")
    examples = []
    with open(path, encoding="utf-8", newline="") as f:
        for record in csv.DictReader(f, delimiter="\t"):
            examples.append((record["sentence"].lower().strip(), int(record["sentiment"].strip())))
    if not examples:
        raise ValueError(f"{path}: no rows")
    return examples


def subsample(examples: list, fraction: float, seed: int) -> list:
    """A seeded subset in file order; at least one example so a smoke run always has work."""
    if fraction >= 1:
        return examples
    keep = max(1, round(len(examples) * fraction))
    chosen = sorted(random.Random(seed).sample(range(len(examples)), keep))
    return [examples[i] for i in chosen]


def seed_everything(seed: int) -> None:
    # As the course does, so the head's initialisation and the dropout masks repeat run to run.
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def digest(module: torch.nn.Module) -> str:
    """sha256 over every parameter's name and raw bytes, in name order: equal means bit-identical."""
    h = hashlib.sha256()
    for name, param in sorted(module.named_parameters(), key=lambda item: item[0]):
        h.update(name.encode())
        h.update(param.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def pad(sequences: list, pad_id: int) -> tuple:
    """Pad to the longest sequence of this batch, not to --max-length, as the course's collate does."""
    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, :len(seq)] = 1
    return ids, mask


def load_model(folder: Path, num_labels: int, args):
    from transformers import BertForSequenceClassification
    from transformers.utils import logging as hf_logging
    # Its load report always lists the new head as missing; we check the keys ourselves below instead.
    # Quiet for this call only: in-process callers (the tests) keep their own transformers logging.
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        # classifier_dropout is the dropout before the linear layer only: the course's --hidden_dropout_prob
        # drives that one, while its BERT keeps the checkpoint's config (hidden and attention dropout).
        model, info = BertForSequenceClassification.from_pretrained(
            str(folder), num_labels=num_labels, classifier_dropout=args.hidden_dropout_prob,
            output_loading_info=True)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    # A checkpoint without pooler weights would leave a random pooler, frozen in pretrain mode: refuse it.
    missing = [k for k in info.get("missing_keys", []) if not k.startswith("classifier.")]
    if missing:
        raise ValueError(f"{folder}: checkpoint lacks {', '.join(sorted(missing)[:5])}"
                         f"{' ...' if len(missing) > 5 else ''}")
    if args.head_init == "linear":
        model.classifier.reset_parameters()
    return model.float()


def evaluate(model, encoded: list, labels: list, args, autocast) -> tuple:
    """Dev accuracy in eval mode; batches cut from the length-sorted dev set, so little padding."""
    model.eval()
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    correct = 0
    start = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(order), args.eval_batch_size):
            idx = order[first:first + args.eval_batch_size]
            ids, mask = pad([encoded[i] for i in idx], args.pad_id)
            with autocast():
                logits = model(input_ids=ids, attention_mask=mask).logits
            predicted = logits.float().argmax(dim=-1)
            correct += int((predicted == torch.tensor([labels[i] for i in idx])).sum())
    return correct / len(order), time.perf_counter() - start


def task_data(task: str, tokenizer, args) -> tuple:
    """(labels in the task, train ids, train labels, dev ids, dev labels), tokenised once, unpadded."""
    data = data_dir(args.data_dir)
    train = read_split(data / f"ids-{task}-train.csv")
    dev = read_split(data / f"ids-{task}-dev.csv")
    # The course counts the distinct labels of the whole training file, before any smoke-run subset.
    num_labels = len({label for _, label in train})
    for split, examples in (("train", train), ("dev", dev)):
        bad = sorted({label for _, label in examples if not 0 <= label < num_labels})
        if bad:
            raise ValueError(f"{task} {split}: labels {bad} outside 0..{num_labels - 1}")
    train = subsample(train, args.train_fraction, args.seed)
    dev = subsample(dev, args.dev_fraction, args.seed + 1)

    # Tokenise once, unpadded: the timed loop then measures the model, not the tokenizer.
    def encode(examples):
        return tokenizer([s for s, _ in examples], truncation=True, max_length=args.max_length)["input_ids"]
    return num_labels, encode(train), [y for _, y in train], encode(dev), [y for _, y in dev]


def train_epoch(model, optimizer, batches: list, args, autocast, seen: dict) -> tuple:
    """One epoch's `batches` of (ids, mask, labels); `seen` counts steps, examples and tokens. (Mean loss, steps.)"""
    loss_sum, done = 0.0, 0
    for ids, mask, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            logits = model(input_ids=ids, attention_mask=mask).logits
        # The course divides the summed loss by the nominal batch size, so a short last batch weighs less.
        loss = F.cross_entropy(logits.float(), labels, reduction="sum") / args.batch_size
        loss.backward()
        optimizer.step()
        loss_sum, done = loss_sum + loss.item(), done + 1
        seen.update(steps=seen["steps"] + 1, examples=seen["examples"] + len(labels),
                    tokens=seen["tokens"] + int(mask.sum()))
        if args.max_steps and seen["steps"] >= args.max_steps:
            break
    return loss_sum / done, done


def run_task(task: str, folder: Path, tokenizer, args) -> dict:
    num_labels, train_ids, train_labels, dev_ids, dev_labels = task_data(task, tokenizer, args)
    seed_everything(args.seed)
    model = load_model(folder, num_labels, args)
    if args.option == "pretrain":
        for param in model.bert.parameters():
            param.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    bert_before, head_before = digest(model.bert), digest(model.classifier)
    # Frozen parameters get no gradient, so AdamW would skip them anyway; passing only the head says so.
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, betas=(0.9, 0.999), eps=args.eps,
                                  weight_decay=args.weight_decay)
    autocast = ((lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.precision == "bf16"
                else contextlib.nullcontext)
    shuffler = torch.Generator().manual_seed(args.seed)

    seen, train_s, eval_s, dev_accs, losses = {"steps": 0, "examples": 0, "tokens": 0}, 0.0, 0.0, [], []
    for epoch in range(args.epochs):
        model.train()  # also the frozen BERT in pretrain mode: its dropout runs, as in the course
        order = torch.randperm(len(train_ids), generator=shuffler).tolist()
        start = time.perf_counter()  # padding timed too, as the course's loop pads inside it
        batches = [(*pad([train_ids[i] for i in idx], args.pad_id), torch.tensor([train_labels[i] for i in idx]))
                   for idx in (order[k:k + args.batch_size] for k in range(0, len(order), args.batch_size))]
        loss, steps = train_epoch(model, optimizer, batches, args, autocast, seen)
        train_s += time.perf_counter() - start
        losses.append(loss)
        acc, seconds = evaluate(model, dev_ids, dev_labels, args, autocast)
        eval_s += seconds
        dev_accs.append(acc)
        print(f"  {task} epoch {epoch + 1}: train loss {losses[-1]:.4f}, dev acc {acc:.4f} "
              f"({steps} steps)", file=sys.stderr, flush=True)
        if args.max_steps and seen["steps"] >= args.max_steps:
            break

    best = max(range(len(dev_accs)), key=lambda e: (dev_accs[e], -e))  # first epoch at the maximum
    return {
        "task": task, "option": args.option, "num_labels": num_labels,
        "train_examples": len(train_ids), "dev_examples": len(dev_ids),
        "epochs_run": len(dev_accs), "steps": seen["steps"],
        "dev_acc_per_epoch": dev_accs, "train_loss_per_epoch": losses,
        "dev_acc_final": dev_accs[-1], "dev_acc_best": dev_accs[best], "best_epoch": best + 1,
        "train_s": train_s, "eval_s": eval_s,
        "train_examples_per_s": seen["examples"] / train_s if train_s > 0 else None,
        "train_tokens_per_s": seen["tokens"] / train_s if train_s > 0 else None,
        "eval_examples_per_s": len(dev_ids) * len(dev_accs) / eval_s if eval_s > 0 else None,
        "trainable_parameters": sum(p.numel() for p in trainable),
        "bert_sha256_before": bert_before, "bert_sha256_after": digest(model.bert),
        "classifier_sha256_before": head_before, "classifier_sha256_after": digest(model.classifier),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import transformers
        from transformers import AutoTokenizer
    except ImportError:
        print("error: this benchmark needs transformers (pip install -r requirements-dev.txt)", file=sys.stderr)
        return 2
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    try:
        folder, resolved_from = minbert.resolve(args.model)
    except minbert.CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    args.pad_id = tokenizer.pad_token_id

    results = {}
    for task in args.tasks:
        try:
            r = run_task(task, folder, tokenizer, args)
        except (FileNotFoundError, ValueError, KeyError) as e:
            # KeyError: a csv without the course's sentence/sentiment columns.
            print(f"error: {task}: {e}", file=sys.stderr)
            return 2
        results[task] = r
        speed = "n/a" if r["train_examples_per_s"] is None else f"{r['train_examples_per_s']:.2f}"
        print(f"task={task} option={args.option} epochs={r['epochs_run']} "
              f"dev_acc_final={r['dev_acc_final']:.4f} dev_acc_best={r['dev_acc_best']:.4f} "
              f"(epoch {r['best_epoch']}) train_s={r['train_s']:.1f} eval_s={r['eval_s']:.1f} "
              f"examples/s={speed}", flush=True)

    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "pad_id")}
        settings["data_dir"] = str(data_dir(args.data_dir))
        report = {
            "reference": "transformers.BertForSequenceClassification, course classifier.py protocol",
            "settings": settings,
            "model": {"requested": args.model, "folder": str(folder), "resolved_from": resolved_from},
            "machine": {"cpu": cpu_model(), "threads": torch.get_num_threads(),
                        "torch": torch.__version__, "transformers": transformers.__version__,
                        "python": platform.python_version()},
            "tasks": results,
        }
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0

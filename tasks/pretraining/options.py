"""pretrain.py's command line: the flags, their help (the command's documentation) and their checks. The flags
the training command also has keep its names and meanings (--lr, --warmup, --batch-size, --precision,
--seed, --resume, --implementation, --checkpoint-every ...)."""
from __future__ import annotations

import argparse
import re

from minbert import IMPLEMENTATION_CHOICES, PRECISIONS, UserError

from ..data import DATA_DIR_ENV
from ..schedules import SCHEDULES, schedules_help
from ..training import IMPLEMENTATION_HELP, LOG_EVERY_HELP, PRECISION_HELP, TF32_HELP, add_optimizer_arg
from .models import DEFAULT_VOCABULARY, SIZES
from .tokenised import CACHE_ENV

DESCRIPTION = """Masked-language-model pretraining of a BERT: continued from a checkpoint (--from) or from
scratch (--init-config), on plain text (--corpus) and/or the training sentences of the project's tasks
(--tasks: task-adaptive pretraining, Gururangan et al. 2020). The final model is RUN/model/, a Hugging Face
BertForMaskedLM folder that transformers (fill-mask) and every command of this project (--model) load.

Objective: BERT's masked tokens only. 15% of the tokens are chosen, anew each time a sequence is seen
(RoBERTa's dynamic masking); of them 80% become [MASK], 10% a random token, 10% stay; special tokens are
never chosen. There is no next-sentence objective: RoBERTa (Liu et al. 2019) found that dropping it
matches or improves downstream results, and a packed sequence here is one stretch of a single document,
not a pair of segments to classify.

Example, task-adaptive pretraining of the embedded model, then fine-tuning it:
  python pretrain.py --from minilm --tasks sst,quora,sts --tokens 5M --out runs/tapt
  python train_multitask.py --model runs/tapt/model
Docs: docs/pretraining.md"""

TOKENS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kKmMgGbB]?)\s*$")
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}


def token_count(text: str, least: int = 1) -> int:
    """A number of tokens: 5000000, 5M, 2.5e6, 500k, 1G (or 1B)."""
    found = TOKENS.match(text)
    if not found:
        raise argparse.ArgumentTypeError(f"expected a number of tokens like 5000000, 5M or 500k, got {text!r}")
    value = float(found.group(1)) * _SCALE[found.group(2).lower()]
    if value < least:
        raise argparse.ArgumentTypeError(f"a number of tokens must be >= {least}, got {text!r}")
    return int(round(value))


def ladder_budget(text: str) -> int:
    """--save-at's budgets: 0 (the weights before the first step) is one."""
    return token_count(text, least=0)


def pretrain_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    for adder in (_model_flags, _corpus_flags, _budget_flags, _training_flags, _compute_flags, _output_flags):
        adder(parser)
    return parser


def _model_flags(parser):
    model = parser.add_argument_group("model (one of --from and --init-config)")
    model.add_argument("--from", dest="from_model", metavar="MODEL",
                       help="continue MLM pretraining of a checkpoint: a folder (a run's RUN/model too), a Hugging "
                            "Face name, or 'minilm' (the embedded all-MiniLM-L6-v2); its MLM head is loaded where "
                            "it has one, else drawn as BERT initialises it")
    model.add_argument("--init-config", metavar="SIZE|FILE",
                       help=f"pretrain a new model from scratch: {_sizes()} "
                            f"(layers x hidden; Turc et al. 2019's BERT-Tiny..Medium and BERT-Base; heads = "
                            f"hidden/64, feed-forward 4 x hidden), or a config.json file")
    model.add_argument("--vocab", metavar="MODEL", default=DEFAULT_VOCABULARY,
                       help="with --init-config: the checkpoint whose vocabulary and tokenizer the new model takes "
                            "(default: %(default)s, whose vocabulary is bert-base-uncased's)")
    model.add_argument("--max-length", type=int, default=128,
                       help="tokens per packed sequence, [CLS] and [SEP] included (default: %(default)s)")


def _sizes() -> str:
    return ", ".join(f"{name} {layers}x{hidden}" for name, (layers, hidden) in SIZES.items())


def _corpus_flags(parser):
    corpus = parser.add_argument_group("corpus (--corpus and/or --tasks)")
    corpus.add_argument("--corpus", nargs="+", metavar="FILE", default=[],
                        help="plain UTF-8 text files: one sentence or paragraph a line, a blank line between "
                             "documents; a packed sequence never crosses a document's end")
    corpus.add_argument("--tasks", default=None,
                        help="comma-separated tasks (sst,quora,sts, ... or declared in --task-file) whose TRAINING "
                             "sentences are added, never their dev or test sentences, which the studies score on")
    corpus.add_argument("--task-file", metavar="FILE", help="a JSON file declaring your own tasks (docs/own-tasks.md)")
    corpus.add_argument("--data-dir", help=f"folder with the course's csv files (default: ${DATA_DIR_ENV}, else data/)")
    corpus.add_argument("--held-out", type=float, default=0.01, metavar="FRACTION",
                        help="share of the packed sequences set apart (seeded by --seed) for the held-out masked-"
                             "token loss and accuracy (default: %(default)s)")
    corpus.add_argument("--cache-dir", metavar="DIR",
                        help=f"where tokenised sources are kept, by the hash of their text and tokenizer, for every "
                             f"later run (default: ${CACHE_ENV}/pretraining, else ~/.cache/minbert/pretraining)")
    corpus.add_argument("--no-cache", action="store_true", help="tokenise without reading or writing the cache")
    corpus.add_argument("--whole-word", action="store_true",
                        help="whole-word masking: a word's ## pieces are chosen together with it")
    corpus.add_argument("--mask-rate", type=float, default=0.15, help="share of tokens chosen (default: %(default)s)")


def _budget_flags(parser):
    budget = parser.add_argument_group("budget (default: one pass over the training sequences)")
    budget.add_argument("--tokens", type=token_count, metavar="N",
                        help="train until N tokens (padding not counted) have been seen: 5000000, 5M, 500k")
    budget.add_argument("--max-steps", type=int, metavar="N", help="train N optimizer steps")


def _training_flags(parser):
    train = parser.add_argument_group("training (the training command's flags)")
    train.add_argument("--lr", type=float, default=None,
                       help="peak learning rate (default: 5e-4 from scratch, 1e-4 continued)")
    train.add_argument("--warmup", type=float, default=0.06,
                       help="fraction of steps of linear warm-up before the decay (default: %(default)s)")
    train.add_argument("--lr-schedule", choices=tuple(SCHEDULES), default="linear",
                       help=schedules_help() + " (default: %(default)s)")
    train.add_argument("--weight-decay", type=float, default=0.01, help="(default: %(default)s)")
    train.add_argument("--batch-size", type=int, default=64, help="sequences per step (default: %(default)s)")
    train.add_argument("--seed", type=int, default=0,
                       help="the new model's weights, the held-out share, the order and the masks (default: 0)")
    add_optimizer_arg(train, "torch")
    train.add_argument("--max-grad-norm", type=float, default=1.0, help="(default: %(default)s)")
    train.add_argument("--dropout", type=float, default=None, metavar="P",
                       help="every dropout probability (default: the model's config, 0.1)")
    train.add_argument("--skip-nonfinite", action="store_true",
                       help="skip (and count) batches whose loss is NaN/inf instead of stopping")
    train.add_argument("--log-every", type=int, default=50, metavar="N", help=LOG_EVERY_HELP + " (default: 50)")


def _compute_flags(parser):
    compute = parser.add_argument_group("where and how it computes")
    compute.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (default: auto)")
    compute.add_argument("--precision", choices=PRECISIONS, default="auto",
                         help=PRECISION_HELP + " (default: %(default)s)")
    compute.add_argument("--implementation", choices=IMPLEMENTATION_CHOICES, default="auto",
                         help=IMPLEMENTATION_HELP + " (default: %(default)s)")
    compute.add_argument("--no-tf32", action="store_true", help=TF32_HELP)


def _output_flags(parser):
    out = parser.add_argument_group("output")
    out.add_argument("--out", help="run folder (default: runs/pretrain-<date-time>)")
    out.add_argument("--save-at", nargs="+", type=ladder_budget, default=[], metavar="TOKENS",
                     help="also write RUN/model-at-<tokens>/ once that many tokens are trained on, for each "
                          "budget given: a ladder of models of one run (e.g. --save-at 0 1M 2M 4M; 0 = the "
                          "weights before the first step, the same architecture untrained)")
    out.add_argument("--checkpoint-every", type=int, default=500,
                     help="checkpoint every N steps, and at every pass's end (default: %(default)s)")
    out.add_argument("--eval-every", type=int, default=500, metavar="N",
                     help="held-out evaluation every N steps and after the last one; 0 = at every pass's end "
                          "(default: %(default)s)")
    out.add_argument("--eval-batch-size", type=int, default=128, help="(default: %(default)s)")
    out.add_argument("--resume", metavar="RUN_DIR",
                     help="continue a killed or interrupted run from its last checkpoint, with the arguments "
                          "it was started with")


def check(args) -> None:
    """Reject what cannot run, before any work: one line naming the flag."""
    if not args.resume and bool(args.from_model) == bool(args.init_config):
        raise UserError("give one of --from MODEL (continue pretraining) and --init-config SIZE (from scratch)")
    if not args.corpus and not args.tasks:
        raise UserError("no text to pretrain on: give --corpus FILE... and/or --tasks")
    if args.tokens is not None and args.max_steps is not None:
        raise UserError("give one budget: --tokens or --max-steps")
    checks = [(args.max_length >= 8, f"--max-length must be >= 8, got {args.max_length}"),
              (0 < args.held_out < 0.5, f"--held-out must be in (0, 0.5), got {args.held_out}"),
              (0 < args.mask_rate < 1, f"--mask-rate must be in (0, 1), got {args.mask_rate}"),
              (args.max_steps is None or args.max_steps >= 1, f"--max-steps must be >= 1, got {args.max_steps}"),
              (args.lr is None or args.lr > 0, f"--lr must be > 0, got {args.lr}"),
              (0 <= args.warmup < 1, f"--warmup must be in [0, 1), got {args.warmup}"),
              (args.weight_decay >= 0, f"--weight-decay must be >= 0, got {args.weight_decay}"),
              (args.batch_size >= 1, f"--batch-size must be >= 1, got {args.batch_size}"),
              (args.eval_batch_size >= 1, f"--eval-batch-size must be >= 1, got {args.eval_batch_size}"),
              (args.seed >= 0, f"--seed must be >= 0, got {args.seed}"),
              (args.max_grad_norm > 0, f"--max-grad-norm must be > 0, got {args.max_grad_norm}"),
              (args.dropout is None or 0 <= args.dropout < 1, f"--dropout must be in [0, 1), got {args.dropout}"),
              (args.checkpoint_every >= 0, f"--checkpoint-every must be >= 0, got {args.checkpoint_every}"),
              (args.eval_every >= 0, f"--eval-every must be >= 0, got {args.eval_every}"),
              (args.tokens is None or not args.save_at or max(args.save_at) <= args.tokens,
               f"--save-at {max(args.save_at or [0]):,} is beyond the run's budget, --tokens {args.tokens or 0:,}")]
    for ok, message in checks:
        if not ok:
            raise UserError(message)

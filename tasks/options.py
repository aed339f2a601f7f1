"""Command-line options shared by `train_multitask.py` and `ablate.py`: same flags, same defaults."""
import argparse
import os
import sys

from minbert import DEFAULT_MODEL, PRECISIONS, RunFailure, UserError

from .data import DATA_DIR_ENV, TASKS
from .registry import REGISTRY
from .samplers import SAMPLERS
from .smart import SmartConfig
from .submission import PREDICTIONS_DIR_ENV

SAMPLER_HELP = """how tasks share the steps:
  round-robin   tasks take turns, one batch each; an epoch is one pass over the
                largest task's training set, smaller tasks cycle (reshuffled)
  proportional  MT-DNN: every task's batches for one pass pooled and drawn in
                random order; an epoch is one pass over every task
  annealed      each step draws a task with probability ~ n_batches^alpha,
                alpha = 1 - 0.8 * epoch / (epochs - 1): from proportional
                to nearly uniform; an epoch has as many steps as proportional
  union         examples drawn uniformly from the union of the tasks, each
                batch grouped by task (implied by --surgery)"""


def add_training_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    model = parser.add_argument_group("model")
    model.add_argument("--model", default=DEFAULT_MODEL,
                       help="checkpoint folder, Hugging Face name, or 'minilm' (the embedded "
                            "all-MiniLM-L6-v2); the default falls back to minilm when it cannot be had "
                            "(default: %(default)s)")
    model.add_argument("--pair-mode", choices=("cross", "siamese"), default="cross",
                       help="cross: one sequence [CLS] a [SEP] b [SEP]; siamese: each sentence encoded "
                            "alone (Sentence-BERT) (default: %(default)s)")
    model.add_argument("--pooling", choices=("cls", "mean", "first"), default="mean",
                       help="sentence vector for the heads: cls = the tanh pooler over [CLS], mean = the "
                            "mean of the token states, first = the raw [CLS] state (default: %(default)s)")
    model.add_argument("--max-length", type=int, default=None,
                       help="tokens per sequence; longer inputs are truncated (default: each task's own, "
                            + ", ".join(f"{t.name} {t.max_length}" for t in REGISTRY.values()) + ")")
    model.add_argument("--freeze-until", type=freeze_value, default=0, metavar="K",
                       help="freeze the embeddings and layers 0..K-1; negative K counts from the top "
                            "(-3 = all but the last three); 'all' freezes the whole encoder, pooler "
                            "included, so only the heads train (default: %(default)s, nothing frozen)")
    model.add_argument("--head-dropout", type=float, default=0.1,
                       help="dropout on the sentence vector before each head (default: %(default)s)")

    data = parser.add_argument_group("data")
    data.add_argument("--data-dir", default=None,
                      help=f"folder with the course's csv files (default: ${DATA_DIR_ENV}, else data/)")
    data.add_argument("--tasks", default=",".join(TASKS),
                      help=f"comma-separated tasks out of {','.join(REGISTRY)} (default: %(default)s)")
    data.add_argument("--data-fraction", type=float, default=1.0,
                      help="train on this seeded fraction of each training set, in (0, 1] (default: 1)")
    data.add_argument("--strict-data", action="store_true",
                      help="an unusable row is an error instead of a counted, skipped row")

    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=3, help="(default: %(default)s)")
    train.add_argument("--max-steps", type=int, default=None,
                       help="stop after this many optimizer steps (evaluates at the end)")
    train.add_argument("--lr", type=float, default=1e-4, help="peak learning rate (default: %(default)s)")
    train.add_argument("--warmup", type=float, default=0.06,
                       help="fraction of steps of linear warm-up before linear decay (default: %(default)s)")
    train.add_argument("--weight-decay", type=float, default=0.01, help="(default: %(default)s)")
    train.add_argument("--batch-size", type=int, default=32, help="(default: %(default)s)")
    train.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    train.add_argument("--sampler", choices=sorted(SAMPLERS), default="proportional", help=SAMPLER_HELP)
    train.add_argument("--no-bucketing", action="store_true",
                       help="plain shuffled batches instead of length-bucketed ones")
    train.add_argument("--surgery", choices=("none", "pcgrad", "dominant"), default="none",
                       help="gradient surgery between tasks on the shared encoder (uses the union "
                            "sampler): pcgrad projects away conflicting components; dominant keeps "
                            "only the largest-norm task gradient whole (default: %(default)s)")
    train.add_argument("--optimizer", choices=("minbert", "torch"), default="torch",
                       help="minbert: the from-scratch AdamW; torch: torch.optim.AdamW (fused, "
                            "faster) (default: %(default)s)")
    train.add_argument("--max-grad-norm", type=float, default=1.0, help="(default: %(default)s)")
    train.add_argument("--precision", choices=PRECISIONS, default="auto",
                       help="bf16 autocast (CPU and CUDA) or full fp32; auto = bf16 where the device "
                            "computes bf16 natively (CUDA from Ampere on, CPUs with AMX or AVX512-BF16), "
                            "else fp32, since emulated bf16 trains 2-3x slower (default: %(default)s)")
    train.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (default: auto)")
    train.add_argument("--dropout", type=float, default=None, metavar="P",
                       help="every dropout probability (encoder and heads); 0 makes a run deterministic "
                            "given its batches (default: the checkpoint's config.json, heads 0.1)")
    train.add_argument("--skip-nonfinite", action="store_true",
                       help="skip (and count) batches whose loss is NaN/inf instead of stopping")

    smart = parser.add_argument_group("SMART (Jiang et al. 2020)")
    smart.add_argument("--smart", action="store_true", help="add SMART's two regularisers")
    defaults = SmartConfig()
    for name, help_text in (("lambda_s", "weight of the smoothness term"), ("eps", "L-inf radius"),
                            ("sigma", "std of the random start"), ("eta", "ascent step size"),
                            ("steps", "projected ascent steps K"), ("mu", "weight of the proximal term"),
                            ("beta", "momentum of the proximal EMA copy")):
        value = getattr(defaults, name)
        smart.add_argument(f"--smart-{name.replace('_', '-')}", type=type(value), default=value,
                           help=f"{help_text} (default: {value})")

    out = parser.add_argument_group("output")
    out.add_argument("--out", default=None, help="run folder (default: runs/<date-time>)")
    out.add_argument("--checkpoint-every", type=int, default=500,
                     help="also checkpoint every N steps (default: %(default)s; 0 = only per epoch)")
    out.add_argument("--eval-batch-size", type=int, default=128, help="(default: %(default)s)")
    out.add_argument("--predictions-dir", default=None, metavar="DIR",
                     help=f"after a successful run, copy its prediction files into this course-level folder, "
                          f"which prepare_submit.py zips ('' = do not copy) (default: ${PREDICTIONS_DIR_ENV}, "
                          f"else predictions/)")
    parser.set_defaults(prediction_mode=None)  # Part 2 file names; classifier.py sets its Part-1 mode
    return parser


def freeze_value(text: str):
    """An integer K, or 'all'."""
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'all', got {text!r}") from None


def parse_tasks(text: str) -> tuple:
    tasks = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in tasks if t not in REGISTRY]
    if unknown or not tasks:
        raise UserError(f"--tasks: unknown task {unknown[0]!r}; choose from {', '.join(REGISTRY)}"
                        if unknown else "--tasks: no task given")
    if len(set(tasks)) != len(tasks):
        raise UserError(f"--tasks: a task is named twice in {text!r}")
    return tasks


def validate(args) -> None:
    """Reject out-of-range arguments before any work starts."""
    args.task_list = parse_tasks(args.tasks)
    checks = [
        (args.lr > 0, f"--lr must be > 0, got {args.lr}"),
        (0 < args.data_fraction <= 1, f"--data-fraction must be in (0, 1], got {args.data_fraction}"),
        (args.epochs >= 1, f"--epochs must be >= 1, got {args.epochs}"),
        (args.max_steps is None or args.max_steps >= 1, f"--max-steps must be >= 1, got {args.max_steps}"),
        (args.batch_size >= 1, f"--batch-size must be >= 1, got {args.batch_size}"),
        (args.eval_batch_size >= 1, f"--eval-batch-size must be >= 1, got {args.eval_batch_size}"),
        (0 <= args.warmup < 1, f"--warmup must be in [0, 1), got {args.warmup}"),
        (args.weight_decay >= 0, f"--weight-decay must be >= 0, got {args.weight_decay}"),
        (args.max_grad_norm > 0, f"--max-grad-norm must be > 0, got {args.max_grad_norm}"),
        (args.dropout is None or 0 <= args.dropout < 1, f"--dropout must be in [0, 1), got {args.dropout}"),
        (args.seed >= 0, f"--seed must be >= 0, got {args.seed}"),
        (args.max_length is None or args.max_length >= 8, f"--max-length must be >= 8, got {args.max_length}"),
        (0 <= args.head_dropout < 1, f"--head-dropout must be in [0, 1), got {args.head_dropout}"),
        (args.checkpoint_every >= 0, f"--checkpoint-every must be >= 0, got {args.checkpoint_every}"),
        (args.smart_eps >= 0 and args.smart_sigma >= 0 and args.smart_eta >= 0 and args.smart_steps >= 0
         and args.smart_lambda_s >= 0 and args.smart_mu >= 0 and 0 <= args.smart_beta <= 1,
         "--smart-*: constants must be >= 0 and --smart-beta in [0, 1]"),
        (args.surgery == "none" or len(args.task_list) > 1, "--surgery needs at least two tasks"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
    if args.data_dir is None and os.environ.get(DATA_DIR_ENV):
        args.data_dir = os.environ[DATA_DIR_ENV]
    if args.predictions_dir is None:
        args.predictions_dir = os.environ.get(PREDICTIONS_DIR_ENV) or "predictions"


def exit_status(error: Exception) -> int:
    """Print one line for an error a user can meet and return the command's exit status.

    UserError (bad input): 2. RunFailure (non-finite loss, disk full): 1.
    An interruption (SIGINT/SIGTERM, checkpoint saved): 128 + the signal.
    """
    print(f"error: {error}" if isinstance(error, (UserError, RunFailure)) else str(error), file=sys.stderr)
    if isinstance(error, UserError):
        return 2
    if isinstance(error, RunFailure):
        return 1
    return getattr(error, "exit_code", 1)

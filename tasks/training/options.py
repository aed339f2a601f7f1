"""Command-line options shared by `train_multitask.py` and `ablate.py`: same flags, same defaults (TrainConfig's),
but for the training command's own (--lr by the model's size, the EMA copy as the run's model)."""
import argparse

from minbert import IMPLEMENTATION_CHOICES, PRECISIONS

from ..config import (
    AVERAGE_KINDS,
    BERT_BASE_HIDDEN,
    BERT_BASE_LAYERS,
    BERT_BASE_LR,
    BETA_SCHEDULE,
    COMMAND_AVERAGE,
    COMPACT_LR,
    EARLY_BETA,
    EARLY_PERCENT,
    GRAPH_CHOICES,
    LATE_BETA,
    TOP_LAYERS,
    TOP_LAYERS_LR,
    TrainConfig,
    valid_beta,
)
from ..course.submission import PREDICTIONS_DIR_ENV
from ..data import DATA_DIR_ENV
from ..heads import HEAD_DESIGNS, POOLINGS
from ..registry import REGISTRY
from ..schedules import SCHEDULES, schedules_help
from .graphs import GRAPHS_HELP
from .samplers import SAMPLERS

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


def add_training_args(parser: argparse.ArgumentParser,
                      command_defaults: bool = False) -> argparse.ArgumentParser:
    """Every TrainConfig option as a flag, its default the dataclass's; `TrainConfig.from_args` reads them back.
    `command_defaults`: the training command's own, as train_multitask.py takes them: --lr left out is None,
    the rate then chosen by the model's size (tasks.config.lr_for_model), and the run's model is the EMA copy
    (tasks.config.COMMAND_AVERAGE); ablate.py's studies keep the fixed defaults their sweeps record."""
    D = TrainConfig(lr=None, average=COMMAND_AVERAGE) if command_defaults else TrainConfig()
    adders = (_model_flags, _data_flags, _training_flags, _compute_flags, _smart_flags, _keep_flags, _output_flags)
    groups = [adder(parser, D) for adder in adders]
    parser.set_defaults(prediction_mode=D.prediction_mode)  # Part 2 file names; classifier.py sets its Part-1 mode
    flags = {a.dest for g in groups for a in g._group_actions} | {"prediction_mode"}
    if flags != set(TrainConfig.names()):  # every flag is an option of TrainConfig, and the other way round
        raise TypeError(f"training flags and TrainConfig differ: {sorted(flags ^ set(TrainConfig.names()))}")
    return parser


def _model_flags(parser, D: TrainConfig):
    model = parser.add_argument_group("model")
    model.add_argument("--model", default=D.model,
                       help="checkpoint folder, Hugging Face name, or 'minilm' (the embedded "
                            "all-MiniLM-L6-v2); the default falls back to minilm when it cannot be had "
                            "(default: %(default)s)")
    model.add_argument("--pair-mode", choices=("cross", "siamese"), default=D.pair_mode,
                       help="cross: one sequence [CLS] a [SEP] b [SEP]; siamese: each sentence encoded "
                            "alone (Sentence-BERT) (default: %(default)s)")
    model.add_argument("--pooling", choices=POOLINGS, default=D.pooling,
                       help="sentence vector for the heads: mean = the mean of the token states, pooler = "
                            "BERT's pooler (a tanh layer over the [CLS] state, as the course's classifier), "
                            "cls-token = the raw [CLS] state (default: %(default)s)")
    model.add_argument("--task-heads", choices=HEAD_DESIGNS, default=D.task_heads,
                       help="default: a linear layer on the sentence vector (siamese pairs: [u, v, |u-v|, u*v], "
                            "STS the cosine); report: the CS224N report 'Freeze Your Layers': single sentences a "
                            "2-layer GELU MLP, paraphrase (W1 u + b)^T (W2 v + b), STS 5 * relu(cos(W1 u, W2 v)), "
                            "u and v each sentence's --pooling vector (needs --pair-mode siamese for pairs; the "
                            "report read the pooled [CLS]: --pooling pooler) (default: %(default)s)")
    model.add_argument("--max-length", type=int, default=D.max_length,
                       help="tokens per sequence; longer inputs are truncated (default: each task's own, "
                            + ", ".join(f"{t.name} {t.max_length}" for t in REGISTRY.values()) + ")")
    model.add_argument("--freeze-until", type=freeze_value, default=D.freeze_until, metavar="K",
                       help="freeze the embeddings and layers 0..K-1; negative K counts from the top "
                            "(-3 = all but the last three); 'all' freezes the whole encoder, pooler "
                            "included, and runs it without dropout, so only the heads train "
                            "(default: %(default)s, nothing frozen)")
    model.add_argument("--head-dropout", type=float, default=D.head_dropout,
                       help="dropout on the sentence vector before each head (default: %(default)s)")
    return model


def _data_flags(parser, D: TrainConfig):
    data = parser.add_argument_group("data")
    data.add_argument("--data-dir", default=D.data_dir,
                      help=f"folder with the course's csv files (default: ${DATA_DIR_ENV}, else data/)")
    data.add_argument("--tasks", default=D.tasks,
                      help=f"comma-separated tasks out of {','.join(REGISTRY)}, or declared in --task-file "
                           f"(default: %(default)s)")
    data.add_argument("--task-file", default=D.task_file, metavar="FILE",
                      help="a JSON file declaring your own tasks from GLUE-style TSV or CSV files (one or two "
                           "sentence columns and a label; classification or regression; metric accuracy, mcc, "
                           "f1, macro_f1, pearson or spearman), usable by name in --tasks: see "
                           "docs/own-tasks.md")
    data.add_argument("--data-fraction", type=float, default=D.data_fraction,
                      help="train on this seeded fraction of each training set, in (0, 1] (default: 1)")
    data.add_argument("--strict-data", action="store_true",
                      help="an unusable row is an error instead of a counted, skipped row")
    return data


def _training_flags(parser, D: TrainConfig):
    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=D.epochs, help="(default: %(default)s)")
    train.add_argument("--max-steps", type=int, default=D.max_steps,
                       help="stop after this many optimizer steps (evaluates at the end)")
    train.add_argument("--lr", type=float, default=D.lr, help=LR_HELP if D.lr is None else
                       "peak learning rate (default: %(default)s)")
    train.add_argument("--warmup", type=float, default=D.warmup,
                       help="fraction of steps of linear warm-up before linear decay (default: %(default)s)")
    train.add_argument("--lr-schedule", choices=tuple(SCHEDULES), default=D.lr_schedule,
                       help=schedules_help() + " (default: %(default)s)")
    train.add_argument("--weight-decay", type=float, default=D.weight_decay, help="(default: %(default)s)")
    train.add_argument("--batch-size", type=int, default=D.batch_size, help="(default: %(default)s)")
    train.add_argument("--grad-accum", type=int, default=D.grad_accum, metavar="N",
                       help="split each task's batch into N micro-batches, one forward and backward each, for one "
                            "optimizer step: the effective batch is N x --batch-size in the memory of one "
                            "--batch-size (default: %(default)s)")
    train.add_argument("--seed", type=int, default=D.seed, help="(default: %(default)s)")
    train.add_argument("--sampler", choices=sorted(SAMPLERS), default=D.sampler, help=SAMPLER_HELP)
    train.add_argument("--no-bucketing", action="store_true",
                       help="plain shuffled batches instead of length-bucketed ones")
    train.add_argument("--surgery", choices=("none", "pcgrad", "dominant"), default=D.surgery,
                       help="gradient surgery between tasks on the shared encoder (uses the union "
                            "sampler): pcgrad projects away conflicting components; dominant keeps "
                            "only the largest-norm task gradient whole (default: %(default)s)")
    add_optimizer_arg(train, D.optimizer)
    train.add_argument("--max-grad-norm", type=float, default=D.max_grad_norm, help="(default: %(default)s)")
    train.add_argument("--dropout", type=float, default=D.dropout, metavar="P",
                       help="every dropout probability (encoder and heads); 0 makes a run deterministic "
                            "given its batches (default: the checkpoint's config.json, heads 0.1)")
    train.add_argument("--skip-nonfinite", action="store_true",
                       help="skip (and count) batches whose loss is NaN/inf instead of stopping")
    return train


LR_HELP = (f"peak learning rate (default: by the model's size, recorded in config.json with its reason: "
           f"{BERT_BASE_LR:g} for {BERT_BASE_LAYERS} layers x {BERT_BASE_HIDDEN} wide or larger, bert-base's, after "
           f"Devlin et al. 2019, appendix A.3, and {TOP_LAYERS_LR:g} when --freeze-until leaves it only its top "
           f"{TOP_LAYERS} layers to train, after the report 'Freeze Your Layers'; {COMPACT_LR:g} for smaller models, "
           f"the embedded one's)")
PRECISION_HELP = ("bf16 or fp16 autocast (fp16 with a gradient scaler; CUDA only) or full fp32; auto = bf16 where "
                  "the device computes bf16 natively (CUDA from Ampere on, CPUs with AMX or AVX512-BF16), else fp16 "
                  "on a CUDA GPU with tensor cores (V100, T4), else fp32, since an emulated 16-bit format trains "
                  "2-3x slower")
TF32_HELP = ("on a CUDA GPU from Ampere on (A100, H100), keep fp32 matmuls in IEEE fp32; by default they run in "
             "TF32 (10-bit mantissa products, fp32 sums: tensor-core speed), which torch leaves off; recorded in "
             "config.json's precision")
LOG_EVERY_HELP = ("read the logged training values (losses, gradient norm) from the device every N steps and before "
                  "each checkpoint and evaluation, for the curves and the progress lines; every step's values are "
                  "kept")
IMPLEMENTATION_HELP = ("fast: minbert/fast.py (padding skipped, measured on CPUs only); reference: minbert/model.py "
                       "with torch's fused attention (SDPA); auto = fast on a CPU, the reference on a GPU, where "
                       "the fast path has not been benchmarked")


def _compute_flags(parser, D: TrainConfig):
    compute = parser.add_argument_group("where and how it computes")
    compute.add_argument("--device", default=D.device, help="auto, cpu, cuda, cuda:1 ... (default: auto)")
    compute.add_argument("--precision", choices=PRECISIONS, default=D.precision,
                         help=PRECISION_HELP + " (default: %(default)s)")
    compute.add_argument("--implementation", choices=IMPLEMENTATION_CHOICES, default=D.implementation,
                         help=IMPLEMENTATION_HELP + " (default: %(default)s)")
    compute.add_argument("--no-tf32", action="store_true", help=TF32_HELP)
    compute.add_argument("--compile", action="store_true",
                         help="torch.compile the encoder (in place: checkpoints and saved models unchanged); the "
                              "compile happens in the first steps and evaluations and is counted in the run's times; "
                              "measured not to pay on a CPU (docs/measurements/2026-11-26-compile-zen5.md)")
    compute.add_argument("--cuda-graphs", choices=GRAPH_CHOICES, default=D.cuda_graphs,
                         help=GRAPHS_HELP + " (default: %(default)s)")
    return compute


def _smart_flags(parser, D: TrainConfig):
    smart = parser.add_argument_group("SMART (Jiang et al. 2020)")
    smart.add_argument("--smart", action="store_true", help="add SMART's two regularisers")
    for name, help_text in (("lambda_s", "weight of the smoothness term (the paper's scale: the symmetric KL is "
                                          "KL(P||Q) + KL(Q||P))"), ("eps", "L-inf radius"),
                            ("sigma", "std of the random start"), ("eta", "ascent step size"),
                            ("steps", "projected ascent steps K"), ("mu", "weight of the proximal term")):
        value = getattr(D, f"smart_{name}")
        smart.add_argument(f"--smart-{name.replace('_', '-')}", type=type(value), default=value,
                           help=f"{help_text} (default: {value})")
    smart.add_argument("--smart-beta", type=smart_beta_value, default=D.smart_beta, metavar="BETA|schedule",
                       help=f"momentum of the proximal EMA copy: a fixed value in [0, 1], or the paper's schedule, "
                            f"{EARLY_BETA} for the first {EARLY_PERCENT}%% of the updates and {LATE_BETA} after "
                            f"(default: %(default)s)")
    return smart


AVERAGE_HELP = (f"copies of the weights to keep, a comma list of {', '.join(AVERAGE_KINDS)}: none = the trained "
                "weights, ema = their exponential moving average (--ema-decay), swa = their equal average over the "
                "last steps (--swa-start), both torch.optim.swa_utils.AveragedModel, updated after every optimizer "
                "step. The first is the run's model: its evaluations choose the best, and best.pt, predictions/ "
                "and model/ are its weights; the others are evaluated beside it at every evaluation and only "
                "recorded (metrics.json), a paired comparison over one training. Keeping an average changes "
                "nothing of the training (no RNG draw, no learning-rate change); each copy costs the trainable "
                "weights' memory once more and an evaluation each time one is due. train_multitask.py's "
                "default, ema, read +0.0018 [+0.0009, +0.0028] dev overall above none over three paired "
                "seeds of the embedded model's default run (docs/training.md, weight averaging)")
PER_TASK_BEST_HELP = ("keep, per task, the weights of the run's model at that task's best dev evaluation "
                      "(best-TASK.pt, one model's size on disk each) and write that task's predictions from them; "
                      "model/ stays the overall best. Needs several evaluations (--eval-every); the dev figures "
                      "are a maximum over them and flatter the run: the test score will be lower on average")


def _keep_flags(parser, D: TrainConfig):
    keep = parser.add_argument_group("what the run keeps: averaged weights, each task's best")
    keep.add_argument("--average", default=D.average, metavar="COPY[,COPY...]",
                      help=AVERAGE_HELP + " (default: %(default)s)")
    keep.add_argument("--ema-decay", type=float, default=D.ema_decay, metavar="D",
                      help="EMA's decay per step: the average's weights have a mean age of D / (1 - D) steps; "
                           "the default is sized for a run of about 2,000 steps (docs/training.md, weight averaging) "
                           "(default: %(default)s)")
    keep.add_argument("--swa-start", type=float, default=D.swa_start, metavar="FRACTION",
                      help="SWA averages the weights after every step past this fraction of the planned steps "
                           "(before, its copy is the trained weights) (default: %(default)s, the last quarter)")
    keep.add_argument("--per-task-best", action="store_true", help=PER_TASK_BEST_HELP)
    return keep


def _output_flags(parser, D: TrainConfig):
    out = parser.add_argument_group("output")
    out.add_argument("--out", default=D.out, help="run folder (default: runs/<date-time>)")
    out.add_argument("--checkpoint-every", type=int, default=D.checkpoint_every,
                     help="also checkpoint every N steps (default: %(default)s; 0 = only per epoch)")
    out.add_argument("--eval-every", type=int, default=D.eval_every, metavar="N",
                     help="evaluate on dev every N optimizer steps and after the last one, instead of at every "
                          "epoch's end; the best evaluation is kept as best (default: %(default)s = every epoch)")
    out.add_argument("--eval-batch-size", type=int, default=D.eval_batch_size, help="(default: %(default)s)")
    out.add_argument("--log-every", type=int, default=D.log_every, metavar="N",
                     help=LOG_EVERY_HELP + " (default: %(default)s)")
    out.add_argument("--predictions-dir", default=D.predictions_dir, metavar="DIR",
                     help=f"after a complete run (no --max-steps, all the data), copy its prediction files into "
                          f"this course-level folder, which prepare_submit.py zips; named here, even a smoke or "
                          f"partial run's files are copied ('' = do not copy) (default: ${PREDICTIONS_DIR_ENV}, "
                          f"else predictions/)")
    return out


def freeze_value(text: str):
    """An integer K, or 'all'."""
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'all', got {text!r}") from None


def smart_beta_value(text: str):
    """A momentum in [0, 1], or 'schedule'."""
    if text == BETA_SCHEDULE:
        return text
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not valid_beta(value):
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1] or {BETA_SCHEDULE!r}, got {text!r}")
    return value


OPTIMIZER_HELP = ("torch: torch.optim.AdamW, fused (the default: a whole step is 1.2-1.3x faster, "
                  "docs/measurements/2026-11-25-optimizer.md); minbert: the from-scratch AdamW a student reads "
                  "in minbert/adamw.py (optimizer.py for the course's check); both with gradient clipping at "
                  "--max-grad-norm")


def add_optimizer_arg(group, default: str = TrainConfig.optimizer):
    """--optimizer: in the training group, and alone for a command that does not take every training flag
    (classifier.py)."""
    group.add_argument("--optimizer", choices=("torch", "minbert"), default=default,
                       help=OPTIMIZER_HELP + " (default: %(default)s)")
    return group

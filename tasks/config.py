"""The training options as one frozen value, built once from the command line or a run's record.

`TrainConfig` holds every option `train_multitask.py`, `classifier.py` and `ablate.py` share, with
its default: the argparse flags (`tasks/training/options.py`) take their defaults from here, and a
trained run is rebuilt from the values it recorded (`TrainConfig.from_record`). SMART's constants
are options too (`SmartConfig`). A derived configuration (an ablation trial, one Part-1 task) is
`dataclasses.replace(config, ...)`, so a misspelt option is an error rather than a new attribute.
What a run resolves on its machine (the precision `auto` became, the device) belongs to the run's
inputs (`tasks.inputs.RunInputs`), not to the options.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from minbert import DEFAULT_IMPLEMENTATION, DEFAULT_MODEL, UserError

from .course.submission import course_predictions_dir
from .data import DATA_DIR_ENV, TASKS
from .heads import HEAD_DESIGNS, report_heads_problem
from .registry import REGISTRY
from .schedules import SCHEDULES
from .task_file import declare_tasks

# The paper's momentum schedule for the EMA (proximal) copy: 0.99 for the first 10% of the
# updates, then 0.999 (Jiang et al., Sec. 5, after Izmailov et al. 2018): the anchor first
# follows the fast-moving early model closely, then averages over ~1000 updates.
BETA_SCHEDULE = "schedule"
EARLY_BETA, LATE_BETA, EARLY_PERCENT = 0.99, 0.999, 10

# The learning rate train_multitask.py takes when --lr is not given, by the model's size (`lr_for_model`).
# Compact models keep this project's recipe, at which the embedded model (6 x 384) gives the README's dev
# figures; bert-base's size and larger take 2e-5, the lowest of Devlin et al. (2019, appendix A.3)'s fine-tuning
# grid (5e-5, 3e-5, 2e-5): the rate two of the layer studies' papers fine-tune bert-base at, nearest the course
# starter's 1e-5 (docs/training.md, "The learning rate").
COMPACT_LR, BERT_BASE_LR = 1e-4, 2e-5
BERT_BASE_LAYERS, BERT_BASE_HIDDEN = 12, 768
# A bert-base-sized model of which --freeze-until leaves only a few top layers to train takes the rate of the
# report that introduced that recipe: Gorti and Thiesmeyer, "Freeze Your Layers" (CS224N default project), "we
# froze all the layers of minBERT except the final three and the pooling layer. A learning rate of 1e-4 was
# used for 9 epochs." (/work/shared/papers/002_d220c808c256bba9.txt, docs/course.md). 2e-5 is a rate for moving
# every layer a little; a few top layers over frozen features move further.
TOP_LAYERS_LR, TOP_LAYERS = 1e-4, 3
LR_GIVEN = "given (--lr, or the command's own recipe)"
GRAPH_CHOICES = ("auto", "on", "off")   # --cuda-graphs (tasks/training/graphs.py decides what each means)

# --average: the copies of the weights a run keeps (tasks/training/averaging.py); the first named is the run's model.
AVERAGE_KINDS = ("none", "ema", "swa")  # none: the trained weights themselves
# EMA's decay, sized for a run of about 2,000 steps (the default run: 962 steps a pass, two passes): its weights
# have a mean age of d / (1 - d) = 199 steps, the last tenth of the run, and what is left of the starting weights
# after 2,000 steps is 0.995^2000 = 4e-5; at torch's default 0.999 it would be 0.999^2000 = 14%, untrained heads
# included.
EMA_DECAY = 0.995
# SWA's equal average over the last quarter of the planned steps: the linear schedule has fallen to about a quarter
# of its peak there, so the iterates averaged are the small-step ones near the end; from earlier on it would mix in
# weights far from where training ends. A choice, not a measured optimum (no SWALR: the schedule stays the run's).
SWA_START = 0.75
# The training command's model (train_multitask.py, multitask_classifier.py): the EMA copy. Over three paired
# seeds
# of the default run it read +0.0018 [+0.0009, +0.0028] dev overall above the trained weights, SWA +0.0015
# [-0.0034, +0.0063] (docs/measurements/2026-11-28-averages-and-search-epyc-avx2.md): only EMA's interval is
# above zero. TrainConfig keeps "none": the studies' sweeps record their protocol, trained weights.
COMMAND_AVERAGE = "ema"


@dataclass
class SmartConfig:
    """Defaults are the ones the SMART paper reports using (Sec. 5, "Implementation Details")."""

    lambda_s: float = 1.0   # smoothness weight; paper tunes it in {1, 3, 5}
    eps: float = 1e-5       # L-inf radius of the perturbation ball (paper: epsilon = 1e-5)
    sigma: float = 1e-5     # std of the Gaussian random start (paper: sigma = 1e-5)
    eta: float = 1e-3       # ascent step size (paper: eta = 1e-3)
    steps: int = 1          # projected ascent steps K (paper: T_x = 1)
    mu: float = 1.0         # proximal-point weight (paper: mu = 1)
    beta: Union[float, str] = BETA_SCHEDULE  # EMA momentum: a fixed value, or the paper's schedule

    def __post_init__(self):
        if self.lambda_s < 0 or self.mu < 0 or self.eps < 0 or self.sigma < 0 or self.eta < 0:
            raise ValueError("SMART weights, radius, noise and step size must be non-negative")
        if self.steps < 0:
            raise ValueError("SMART needs a non-negative number of ascent steps")
        if not valid_beta(self.beta):
            raise ValueError(f"EMA momentum must lie in [0, 1] or be {BETA_SCHEDULE!r}, got {self.beta!r}")

    def momentum(self, update: int, total_updates: int) -> float:
        """The EMA momentum after optimizer update `update` (1-based) of `total_updates`."""
        if self.beta != BETA_SCHEDULE:
            return float(self.beta)
        return EARLY_BETA if 100 * update <= EARLY_PERCENT * total_updates else LATE_BETA  # exact, no float


def valid_beta(beta) -> bool:
    return beta == BETA_SCHEDULE or (isinstance(beta, (int, float)) and 0.0 <= beta <= 1.0)


_SMART = SmartConfig()


@dataclass(frozen=True)
class TrainConfig:
    # model
    model: str = DEFAULT_MODEL
    pair_mode: str = "cross"
    pooling: str = "mean"
    task_heads: str = "default"               # or "report": the heads of the CS224N report "Freeze Your Layers"
    max_length: Optional[int] = None          # None: each task's own
    freeze_until: Union[int, str] = 0         # K, or "all"
    head_dropout: float = 0.1
    # data
    data_dir: Optional[str] = None
    tasks: str = ",".join(TASKS)
    task_file: Optional[str] = None           # a JSON file declaring the user's own tasks (tasks/task_file.py)
    data_fraction: float = 1.0
    strict_data: bool = False
    # training
    epochs: int = 2                           # as good on dev as 3 (docs/measurements), a third faster
    max_steps: Optional[int] = None
    lr: Optional[float] = COMPACT_LR          # None: by the model's size (lr_for_model), train_multitask.py's default
    warmup: float = 0.06
    lr_schedule: str = "linear"
    weight_decay: float = 0.01
    batch_size: int = 32
    grad_accum: int = 1                       # micro-batches per task batch; the sampler draws this x batch_size
    seed: int = 0
    sampler: str = "proportional"
    no_bucketing: bool = False
    surgery: str = "none"
    optimizer: str = "torch"
    max_grad_norm: float = 1.0
    precision: str = "auto"                   # as asked for; RunInputs.precision is the one used
    device: str = "auto"
    implementation: str = DEFAULT_IMPLEMENTATION  # as asked for; the encoder's config holds the one it runs
    dropout: Optional[float] = None
    skip_nonfinite: bool = False
    no_tf32: bool = False                     # CUDA from Ampere on: fp32 matmuls in IEEE fp32, not TF32
    compile: bool = False                     # torch.compile the encoder
    cuda_graphs: str = "auto"                 # the step as CUDA graphs: auto (eager until measured), on, off
    # SMART
    smart: bool = False
    smart_lambda_s: float = _SMART.lambda_s
    smart_eps: float = _SMART.eps
    smart_sigma: float = _SMART.sigma
    smart_eta: float = _SMART.eta
    smart_steps: int = _SMART.steps
    smart_mu: float = _SMART.mu
    smart_beta: Union[float, str] = _SMART.beta  # a fixed momentum, or "schedule" (the paper's)
    # output
    out: Optional[str] = None
    checkpoint_every: int = 500
    eval_every: int = 0                       # 0: evaluate at every epoch's end
    eval_batch_size: int = 128
    log_every: int = 50                       # steps between host reads of the logged values (tasks/training/reads.py)
    predictions_dir: Optional[str] = None
    # what the run keeps (tasks/training/averaging.py, and each task's best evaluation)
    average: str = "none"                     # a comma list of AVERAGE_KINDS; the first is the run's model
    ema_decay: float = EMA_DECAY
    swa_start: float = SWA_START              # the fraction of the planned steps after which SWA averages
    per_task_best: bool = False               # each task's predictions from the weights of its best evaluation
    prediction_mode: Optional[str] = None     # Part 2's file names; classifier.py sets its Part-1 mode

    @classmethod
    def names(cls) -> tuple:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_args(cls, namespace) -> "TrainConfig":
        """The options of a parsed command line (its other attributes are the command's own), with the
        data and predictions folders taken from the environment where not given."""
        return with_environment(cls(**{name: getattr(namespace, name) for name in cls.names()}))

    @classmethod
    def from_record(cls, arguments: dict) -> "TrainConfig":
        """The options a run recorded (config.json's "arguments"); an option it lacks (a run of an older
        version) takes its default."""
        arguments = upgraded_arguments(arguments)
        return cls(**{name: arguments[name] for name in cls.names() if name in arguments})

    @property
    def task_list(self) -> tuple:
        return parse_tasks(self.tasks)

    @property
    def average_list(self) -> tuple:
        """--average's copies, the run's model first."""
        return parse_averages(self.average)

    def smart_config(self) -> SmartConfig:
        return SmartConfig(lambda_s=self.smart_lambda_s, eps=self.smart_eps, sigma=self.smart_sigma,
                           eta=self.smart_eta, steps=self.smart_steps, mu=self.smart_mu, beta=self.smart_beta)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def upgraded_arguments(arguments: dict) -> dict:
    """A run's recorded "arguments" (config.json, a model folder's options) in today's names: runs before
    --pooling's names said what they are recorded pooler as "cls" and cls-token as "first"; runs before
    --average (fce00b0, 2026-11-28) kept no copy, so their model is the trained weights, whatever the
    command's default is now."""
    older = {"cls": "pooler", "first": "cls-token"}
    upgraded = {"average": "none", **arguments}
    if upgraded.get("pooling") in older:
        upgraded["pooling"] = older[upgraded["pooling"]]
    return upgraded


def with_environment(config: TrainConfig) -> TrainConfig:
    """--data-dir defaults to $MINBERT_DATA_DIR, --predictions-dir to $MINBERT_PREDICTIONS_DIR, else predictions/."""
    changes = {}
    if config.data_dir is None and os.environ.get(DATA_DIR_ENV):
        changes["data_dir"] = os.environ[DATA_DIR_ENV]
    if config.task_file:  # absolute, so that --resume from another folder finds it
        changes["task_file"] = str(Path(config.task_file).expanduser().resolve())
    if config.predictions_dir is None:
        changes["predictions_dir"] = course_predictions_dir()
    return dataclasses.replace(config, **changes)


def lr_for_model(lr: Optional[float], model_config, freeze_until: Union[int, str] = 0) -> tuple:
    """(the learning rate, why): `lr` when given; else by the size of the model `model_config` describes (its
    num_hidden_layers and hidden_size), bert-base's (12 x 768) or larger in both, or compact. `freeze_until`
    (--freeze-until): "all", or every encoder layer frozen, leaves only the heads to train, and the model's size
    does not count: the compact rate; a bert-base-sized model with only its top TOP_LAYERS layers training (bert-base
    --freeze-until 9) takes the rate of the report that trained so (TOP_LAYERS_LR)."""
    if lr is not None:
        return lr, LR_GIVEN
    layers, hidden = model_config.num_hidden_layers, model_config.hidden_size
    if freeze_until == "all" or freeze_until >= layers:
        return COMPACT_LR, (f"default when only the heads train (--freeze-until {freeze_until}; the model {layers} x "
                            f"{hidden}): this project's recipe")
    if layers >= BERT_BASE_LAYERS and hidden >= BERT_BASE_HIDDEN:
        if layers - freeze_until <= TOP_LAYERS:
            return TOP_LAYERS_LR, (f"default when only the top {layers - freeze_until} layers of a bert-base-sized "
                                   f"model train (--freeze-until {freeze_until}; {layers} x {hidden}): "
                                   f"Gorti and Thiesmeyer, 'Freeze Your Layers' (CS224N), the last three layers at "
                                   f"1e-4 for 9 epochs")
        return BERT_BASE_LR, (f"default for bert-base-sized models ({layers} x {hidden}: at least 12 x 768): "
                              f"Devlin et al. 2019, appendix A.3")
    return COMPACT_LR, (f"default for compact models ({layers} x {hidden}: under 12 layers or under 768 wide): "
                        f"this project's recipe, the embedded model's README figures")


def parse_tasks(text: str) -> tuple:
    return name_list(text, "--tasks", tuple(REGISTRY), "task", " (or declare your own with --task-file)")


def parse_averages(text: str) -> tuple:
    return name_list(text, "--average", AVERAGE_KINDS, "copy", ", a comma list whose first is the run's model")


def name_list(text: str, flag: str, choices: tuple, noun: str, hint: str) -> tuple:
    """`text`'s comma-separated names, each one of `choices` and none twice; else one line naming `flag`."""
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in names if t not in choices]
    if unknown or not names:
        raise UserError(f"{flag}: unknown {noun} {unknown[0]!r}; choose from {', '.join(choices)}{hint}" if unknown
                        else f"{flag}: no {noun} given")
    if len(set(names)) != len(names):
        raise UserError(f"{flag}: a {noun} is named twice in {text!r}")
    return names


def validate(c: TrainConfig) -> None:
    """Reject out-of-range options before any work starts; register the tasks --task-file declares (and only
    those: the declarations of an earlier command in this process go)."""
    declare_tasks(c.task_file)
    tasks = parse_tasks(c.tasks)
    averages = parse_averages(c.average)
    checks = [
        (c.lr is None or c.lr > 0, f"--lr must be > 0, got {c.lr}"),
        (c.lr_schedule in SCHEDULES, f"--lr-schedule must be one of {', '.join(SCHEDULES)}, got {c.lr_schedule!r}"),
        (0 < c.data_fraction <= 1, f"--data-fraction must be in (0, 1], got {c.data_fraction}"),
        (c.epochs >= 1, f"--epochs must be >= 1, got {c.epochs}"),
        (c.max_steps is None or c.max_steps >= 1, f"--max-steps must be >= 1, got {c.max_steps}"),
        (c.batch_size >= 1, f"--batch-size must be >= 1, got {c.batch_size}"),
        (c.grad_accum >= 1, f"--grad-accum must be >= 1, got {c.grad_accum}"),
        (c.log_every >= 1, f"--log-every must be >= 1, got {c.log_every}"),
        (c.eval_batch_size >= 1, f"--eval-batch-size must be >= 1, got {c.eval_batch_size}"),
        (0 <= c.warmup < 1, f"--warmup must be in [0, 1), got {c.warmup}"),
        (c.weight_decay >= 0, f"--weight-decay must be >= 0, got {c.weight_decay}"),
        (c.max_grad_norm > 0, f"--max-grad-norm must be > 0, got {c.max_grad_norm}"),
        (c.dropout is None or 0 <= c.dropout < 1, f"--dropout must be in [0, 1), got {c.dropout}"),
        (c.seed >= 0, f"--seed must be >= 0, got {c.seed}"),
        (c.max_length is None or c.max_length >= 8, f"--max-length must be >= 8, got {c.max_length}"),
        (0 <= c.head_dropout < 1, f"--head-dropout must be in [0, 1), got {c.head_dropout}"),
        (c.checkpoint_every >= 0, f"--checkpoint-every must be >= 0, got {c.checkpoint_every}"),
        (c.eval_every >= 0, f"--eval-every must be >= 0, got {c.eval_every}"),
        (c.cuda_graphs in GRAPH_CHOICES, f"--cuda-graphs must be one of {', '.join(GRAPH_CHOICES)}, got "
                                         f"{c.cuda_graphs!r}"),
        (c.smart_eps >= 0 and c.smart_sigma >= 0 and c.smart_eta >= 0 and c.smart_steps >= 0
         and c.smart_lambda_s >= 0 and c.smart_mu >= 0 and valid_beta(c.smart_beta),
         f"--smart-*: constants must be >= 0 and --smart-beta in [0, 1] or {BETA_SCHEDULE!r}"),
        (c.surgery == "none" or len(tasks) > 1, "--surgery needs at least two tasks"),
        (0 < c.ema_decay < 1, f"--ema-decay must be in (0, 1), got {c.ema_decay}"),
        (0 <= c.swa_start < 1, f"--swa-start must be in [0, 1), got {c.swa_start}"),
        (c.ema_decay == EMA_DECAY or "ema" in averages, "--ema-decay applies only with ema in --average"),
        (c.swa_start == SWA_START or "swa" in averages, "--swa-start applies only with swa in --average"),
        (not c.per_task_best or len(tasks) > 1, "--per-task-best needs at least two tasks: with one, the task's "
                                                "best evaluation is the run's best"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
    if c.task_heads not in HEAD_DESIGNS:
        raise UserError(f"--task-heads must be one of {', '.join(HEAD_DESIGNS)}, got {c.task_heads!r}")
    problem = report_heads_problem(tasks, c.pair_mode) if c.task_heads == "report" else None
    if problem:
        raise UserError(f"--task-heads report: {problem}")

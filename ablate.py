"""Ablation studies: change the pretrained model, then fine-tune (or probe) it exactly as
train_multitask.py would, and measure.

    python ablate.py --mode reinit --task sst --data-fractions 0.1 --seeds 0
    python ablate.py --mode reinit --block 2:2 --heads 3:*
    python ablate.py --mode permute --trials 5 --order 5,4,3,2,1,0
    python ablate.py --mode probe --task sst
    python ablate.py --mode transfer --data-fractions 0.1
    python ablate.py --mode dynamics --seeds 0,1
    python ablate.py --mode restore --task sst
    python ablate.py --mode methods --task all --methods smart,pcgrad,siamese
    python ablate.py --mode pretraining --ladder runs/ladder --task sst --data-fractions 0.1,1 --seeds 0,1,2
    CUDA_VISIBLE_DEVICES=1 python ablate.py --mode reinit --shard 2/4   # one of four GPUs or machines
    python ablate.py --mode reinit --summarize                          # merge the shards' results

The sweep folder (--out, default runs/ablate-MODE) receives results.jsonl (one
line per finished trial: rerunning the same command skips those and retries
failed ones), summary.csv (mean, std, n and 95% confidence interval over
seeds of the final evaluation, the best one's beside it, and the change from
the study's reference configuration paired by seed), plots/*.png and tensorboard/ (one run per trial, plots under
'summary'); dynamics also keeps each fine-tuned encoder in models/, transfer its
intermediate models (Hugging Face format) in intermediate/, and --export-models
every trial's model folder in models/TRIAL/.

Budget: a trial stops when its score on a held-out part of its own training data
(--plateau-holdout, drawn by its seed, never trained on; never dev) has not improved by
--plateau-tolerance for --plateau-patience evaluations in a row, or at --trial-steps
optimizer steps (the cap, default 1000) whatever its data fraction (as many passes over
its share of the data as that needs); dev and the held-out rows are evaluated every
--eval-every steps (default 50) and after the last step; the trial's result is its last
evaluation, the best one is kept beside it, and its results line records the steps it
trained and both learning curves. --plateau-patience 0 trains every trial the full cap;
--trial-steps 0 trains --epochs passes instead.

On a CPU the trials run side by side in worker processes of one thread each
(--workers, default: one per CPU); each running trial prints a progress line about
every 30 s.

--shard I/N runs the I-th of N disjoint shares of the trials (a trial's share
is a hash of its name), appending to results.shard-I-of-N.jsonl, so shards on
several GPUs or machines can share one folder; --summarize then merges every
results file there and writes the summary.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import sys

from minbert import UserError
from tasks.ablation import arguments, plateau, sweep
from tasks.ablation.config import (
    PLATEAU_SETTINGS,
    SWEEP_EPOCHS,
    TRIAL_EVAL_EVERY,
    TRIAL_STEPS,
    SweepConfig,
    task_names,
)
from tasks.ablation.studies import STUDIES
from tasks.cli import run_command
from tasks.config import TrainConfig
from tasks.distributed import launched_world_size
from tasks.registry import REGISTRY
from tasks.training import Interrupted, add_training_args


class _Parser(arguments.Parser):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.mode_options = {}  # mode -> its study's own options: given with another mode, they are a mistake


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_argument_group("sweep")
    group.add_argument("--mode", required=True, choices=tuple(STUDIES),
                       help="; ".join(f"{mode}: {study.summary}" for mode, study in STUDIES.items()))
    group.add_argument("--task", default=None, metavar="NAME",
                       help=f"shorthand for --tasks: one task ({', '.join(REGISTRY)}, or one declared in "
                            f"--task-file), or all = multitask fine-tuning on the course's three (default: --tasks)")
    group.add_argument("--seeds", type=arguments.int_list, default=None, metavar="S,...",
                       help="fine-tuning seeds; every configuration runs at each (default: --seed)")
    group.add_argument("--data-fractions", type=arguments.fraction_list, default=None, metavar="F,...",
                       help="seeded fractions of the training sets, each in (0, 1] (default: --data-fraction)")
    group.add_argument("--shard", type=arguments.shard, default=None, metavar="I/N",
                       help="run only shard I of N (1-based) of the trials: a trial's shard is a hash of its name, "
                            "so it stays put when seeds or fractions are added, and shards on several GPUs or "
                            "machines sharing --out never run or write the same trial; each appends to "
                            "results.shard-I-of-N.jsonl, skips trials finished in any results file there, and "
                            "writes the summary if it finishes the sweep (default: every trial, results.jsonl)")
    group.add_argument("--workers", type=arguments.positive_or_auto, default=None, metavar="N",
                       help="trials run side by side in N worker processes of one thread each (a CPU's threads "
                            "split between them), CPU only; auto = one per CPU on a CPU (two one-thread runs on "
                            "2 cores did 1.7x the work of one two-thread run), 1 on a GPU; 1 = one trial at a "
                            "time in this process. Recorded in each results line (default: auto)")
    group.add_argument("--summarize", action="store_true",
                       help="train nothing: merge every results file in --out (results.jsonl, "
                            "results.shard-*.jsonl), say how many trials are finished, missing and failed, and "
                            "write summary.csv, the plots and the summary TensorBoard run from the finished ones "
                            "(give the same sweep options as the runs)")
    group.add_argument("--export-models", action="store_true",
                       help="also write each trial's fine-tuned model, as a finished run's RUN_DIR/model/ (Hugging "
                            "Face format, heads, model card), to models/TRIAL/ in the sweep folder (default: off: "
                            "a model per trial fills the disk over a sweep)")
    add_budget_args(parser)
    for mode, study in STUDIES.items():
        group = parser.add_argument_group(study.title)
        study.add_arguments(group)
        parser.mode_options[mode] = tuple(action.dest for action in group._group_actions)

    add_training_args(parser)
    parser.set_defaults(epochs=None, eval_every=TRIAL_EVAL_EVERY)  # None: --epochs not given
    sweep_help = {"out": "sweep folder (default: runs/ablate-MODE)",  # the shared help describes train_multitask.py's
                  "epochs": f"passes over each trial's training data, with --trial-steps 0 only (default: "
                            f"{SWEEP_EPOCHS})",
                  "eval_every": "evaluate each trial on dev every N optimizer steps and after its last (0 = at "
                                "every epoch's end); the result is the last evaluation, the best is kept beside "
                                "it (default: %(default)s)"}
    for action in parser._actions:
        action.help = sweep_help.get(action.dest, action.help)
    return parser


def add_budget_args(parser):
    group = parser.add_argument_group("budget (docs/studies.md: the budget)")
    group.add_argument("--trial-steps", type=arguments.integer, default=TRIAL_STEPS, metavar="S",
                       help="the step cap: a trial takes at most S optimizer steps whatever its data fraction (as "
                            "many passes over its share of the training data as that needs, the last cut short; "
                            "the learning-rate schedule spans the S steps; --max-steps still caps it), fewer when "
                            "it stops on its held-out plateau; 0 = train --epochs passes instead, so small "
                            "fractions get few steps (default: %(default)s)")
    group.add_argument("--plateau-patience", type=arguments.integer, default=plateau.PATIENCE, metavar="N",
                       help="stop a trial after N evaluations in a row (every --eval-every steps) whose score on "
                            "its held-out training rows is not --plateau-tolerance above the best so far; 0 = off: "
                            "every trial trains the full --trial-steps (default: %(default)s)")
    group.add_argument("--plateau-tolerance", type=arguments.non_negative, default=plateau.TOLERANCE, metavar="T",
                       help="the smallest held-out improvement that counts, in the metric's units (the task's "
                            "metric for one task, the overall score for several) (default: %(default)s)")
    group.add_argument("--plateau-holdout", type=arguments.share, default=plateau.HOLDOUT_SHARE, metavar="SHARE",
                       help="share of each task's trial training rows (its --data-fractions share) held out for "
                            "the plateau, drawn by the trial's seed and never trained on (default: %(default)s)")
    group.add_argument("--plateau-holdout-max", type=arguments.positive, default=plateau.HOLDOUT_MAX, metavar="N",
                       help="at most N held-out rows per task (default: %(default)s)")


def parse_args(argv=None) -> SweepConfig:
    """The sweep's options as one SweepConfig: the training options, the study's own, the sweep's."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for mode, names in parser.mode_options.items():
        for name in names:
            if args.mode != mode and getattr(args, name) != parser.get_default(name):
                raise UserError(f"--{name.replace('_', '-')} applies to --mode {mode} only")
    if args.epochs is not None and args.trial_steps:
        raise UserError(f"--epochs applies with --trial-steps 0 only: sweeps train every trial --trial-steps "
                        f"steps (here {args.trial_steps}) whatever its data fraction")
    args.epochs = SWEEP_EPOCHS if args.epochs is None else args.epochs
    config = TrainConfig.from_args(args)
    if args.task is not None:
        config = dataclasses.replace(config, tasks=task_names(args.task))
    study = STUDIES[args.mode]
    options = study.Options(**{name: _frozen(getattr(args, name)) for name in parser.mode_options[args.mode]})
    rule = plateau.PlateauRule(**{field: getattr(args, name) for name, field in PLATEAU_SETTINGS.items()})
    return SweepConfig(study, config, options, seeds=tuple(args.seeds or ()),
                       fractions=tuple(args.data_fractions or ()), trial_steps=args.trial_steps, plateau=rule,
                       shard=args.shard, workers=args.workers, summarize=args.summarize,
                       export_models=args.export_models)


def _frozen(value):
    """A list option as a tuple (its items too), as the study's frozen Options hold it."""
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def run(config: SweepConfig) -> int:
    if launched_world_size() > 1:
        raise UserError("ablate.py runs one process per shard: start one per GPU with --shard I/N "
                        "(see docs/studies.md), not under torchrun")
    return sweep.run(config)


def main(argv=None) -> int:
    return run_command(argv, parse_args, run, stops=(Interrupted,),
                       interrupted=lambda args: "interrupted; finished trials are kept in the sweep folder's results "
                                                "file: rerun the same command to resume")


if __name__ == "__main__":
    sys.exit(main())

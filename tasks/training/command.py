"""`train_multitask.py`'s command, as a library: its options, resuming from a run's recorded arguments, and
the run from parsed arguments to the published predictions. The script, `multitask_classifier.py` and the
benchmarks call `train_command`; `bench trainer` and `bench gpu` build the same run from
`parse_train_command(...).config`.

A run folder receives config.json, TensorBoard events (tensorboard/), checkpoint.pt (latest) and best.pt
(best overall dev score), metrics.json, the course's prediction files (predictions/) and, once finished,
model/: the best model in Hugging Face format with its task heads (predict.py uses a run). With --seeds, one
such run per seed under --out, and their ensemble (tasks/ensemble/) in --out/ensemble.
"""
import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from minbert import UserError

from ..cli import interrupted_resumable, run_command
from ..config import TrainConfig, upgraded_arguments, validate
from ..course.submission import SUBMISSION_ZIP, SubmissionRefused, make_submission, publish_predictions, write_outputs
from ..distributed import SINGLE, barrier, broadcast_from_main, init_world, shutdown
from ..ensemble import ensemble_runs
from ..inputs import announcement, prepare
from ..saved.checkpoint_files import CHECKPOINT, no_checkpoint_error
from .loop import Interrupted, fit
from .options import add_training_args

REPO = Path(__file__).resolve().parents[2]  # what a --submission zip holds the code of


def train_parser(description: Optional[str] = None) -> argparse.ArgumentParser:
    """Every training option, and the command's own: --resume, --submission."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_args(parser, command_defaults=True)
    run = parser.add_argument_group("run")
    run.add_argument("--resume", metavar="RUN_DIR", default=None,
                     help="continue a killed or interrupted run from its last checkpoint, with the "
                          "arguments it was started with")
    run.add_argument("--submission", action="store_true",
                     help="also zip the code and the course-level prediction folder as the course's "
                          "submission (as prepare_submit.py does)")
    run.add_argument("--seeds", type=seed_list, default=None, metavar="S,S,...",
                     help="train one run per seed in turn, each an ordinary run folder --out/seed-S (a finished "
                          "one is kept, not trained again; a killed one resumes), then average them as "
                          "ensemble.py does into --out/ensemble, which is what is published (instead of --seed)")
    return parser


def seed_list(text: str) -> tuple:
    """--seeds 0,1,2: distinct integers."""
    try:
        seeds = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"a seed is named twice: {text!r}")
    return seeds


@dataclass(frozen=True)
class TrainCommand:
    """The parsed command line: the training options and this command's own."""
    config: TrainConfig
    resume: Optional[str] = None   # the run folder to continue
    submission: bool = False
    publish_always: bool = False   # --predictions-dir named: publish even a smoke or partial run
    outputs: tuple = ()            # (prediction file name, where a copy goes): multitask_classifier.py's --*_out
    seeds: tuple = ()              # --seeds: a run per seed, then their ensemble

    def options(self) -> dict:
        """This command's own options, recorded in config.json with the training options."""
        return {"resume": self.resume, "submission": self.submission, "publish_always": self.publish_always}


def parse_train_command(argv, outputs: tuple = (), parser: Optional[argparse.ArgumentParser] = None) -> TrainCommand:
    """The command `argv` asks for (`parser`: `train_parser()`'s, or one that adds to it); with --resume, the
    arguments the run was started with."""
    parser = parser or train_parser()
    args = parser.parse_args(argv)
    args.publish_always = args.predictions_dir is not None  # before the environment's default fills it
    seeds = tuple(getattr(args, "seeds", None) or ())
    if seeds and (args.resume or args.submission or outputs):
        raise UserError("--seeds trains its runs itself: run the same command again to continue it (no --resume); "
                        "zip its ensemble with prepare_submit.py --predictions-dir OUT/ensemble (no --submission)")
    if args.resume:
        args = saved_arguments(parser, args)
    elif args.out is not None and (Path(args.out) / "config.json").exists():
        raise UserError(f"--out {args.out} already holds a run: continue it with --resume {args.out} "
                        f"or choose another folder")
    config = TrainConfig.from_args(args)
    try:
        validate(config)
    except TypeError:  # only a hand-edited config.json can hold one ("lr": "abc")
        raise UserError(f"{Path(args.resume) / 'config.json'}: an argument has the wrong type") from None
    if config.out is None:
        config = dataclasses.replace(config, out=str(Path("runs") / time.strftime("%Y%m%d-%H%M%S")))
    return TrainCommand(config, args.resume, args.submission, args.publish_always, tuple(outputs), seeds)


def recorded_arguments(parser: argparse.ArgumentParser, record: Path, **given) -> tuple:
    """--resume: (the arguments a run was started with, read from the "arguments" of its `record` (a JSON file),
    each option `parser` knows; what that lacks (a run of an older version) takes its default; `given` last,
    the record's arguments as written)."""
    try:
        saved = upgraded_arguments(json.loads(record.read_text(encoding="utf-8"))["arguments"])
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{record}: cannot read the run's arguments ({e})") from None
    defaults = vars(parser.parse_args([]))
    return argparse.Namespace(**{**defaults, **{k: v for k, v in saved.items() if k in defaults}, **given}), saved


def saved_arguments(parser, args) -> argparse.Namespace:
    """--resume RUN_DIR: the arguments in its config.json. Its folder is where it is now, whatever "out" says."""
    run_dir = Path(args.resume)
    if not (run_dir / CHECKPOINT).exists():
        raise no_checkpoint_error(run_dir / CHECKPOINT)
    resumed, saved = recorded_arguments(parser, run_dir / "config.json", resume=args.resume,
                                        submission=args.submission, out=str(run_dir))
    resumed.publish_always = bool(saved.get("publish_always"))
    return resumed


def train_command(argv=None, callbacks=(), outputs=(), parser: Optional[argparse.ArgumentParser] = None) -> int:
    """train_multitask.py: parse, train, print the outcome; the exit status (tasks.cli.run_command). `callbacks`
    take part in the training (tasks.training.Callback): bench/epoch.py times it this way. `outputs`:
    (prediction file name, path) pairs, where copies of the run's files go (multitask_classifier.py)."""
    return run_command(argv, lambda given: parse_train_command(given, outputs, parser),
                       lambda command: (train_seeds if command.seeds else train)(command, callbacks),
                       stops=(Interrupted,), interrupted=interrupted_line)


def train(command: TrainCommand, callbacks=()) -> int:
    """Train and print the outcome, in every process of the group (one without torchrun)."""
    world = SINGLE
    try:
        world = init_world(command.config.device)
        out = broadcast_from_main(command.config.out, world)  # a clock-named folder: rank 0's name
        config = dataclasses.replace(command.config, out=out)
        barrier(world)  # every rank has checked --out before rank 0 writes into it
        inputs = prepare(config, world=world)
        if world.main:  # the other ranks train in step with it, silently
            print(announcement(inputs, f"run folder {config.out}"), flush=True)
        result = fit(config, inputs, out, resume=bool(command.resume), callbacks=callbacks,
                     command_options=command.options())
        if world.main:
            print_outcome(command, config, result)
        barrier(world)  # no process leaves the group while another still uses it
        return 0
    except Interrupted:  # every rank stops at the same step
        barrier(world)
        raise
    finally:
        shutdown(world)


def train_seeds(command: TrainCommand, callbacks=()) -> int:
    """--seeds: each seed's run in turn in --out/seed-S (kept if finished, resumed if killed), then their ensemble
    in --out/ensemble, published as a run's files are. The seeds' own runs publish nothing."""
    out, config = Path(command.config.out), command.config
    folders = [out / f"seed-{seed}" for seed in command.seeds]
    for seed, folder in zip(command.seeds, folders):
        if (folder / "metrics.json").exists():
            print(f"seed {seed}: finished in {folder}; kept, not trained again", flush=True)
            continue
        if (folder / "config.json").exists():  # killed: its own recorded arguments, from its last checkpoint
            print(f"seed {seed}: resuming {folder}", flush=True)
            train(parse_train_command(["--resume", str(folder)]), callbacks)
            continue
        print(f"seed {seed}: training in {folder}", flush=True)
        seed_config = dataclasses.replace(config, seed=seed, out=str(folder), predictions_dir="")
        train(TrainCommand(seed_config), callbacks)
    ensemble_runs(folders, out / "ensemble", config.data_dir, config.device,
                  config.predictions_dir if command.publish_always else None, sys.argv)
    return 0


def interrupted_line(command: Optional[TrainCommand]) -> str:
    """Ctrl-C before training started, or a second one: how to resume, where a checkpoint exists."""
    if command is not None and command.seeds:
        return "interrupted; run the same command again: finished seeds are kept and a killed one resumes"
    return interrupted_resumable(command.config.out if command is not None else None, CHECKPOINT)


def print_outcome(command: TrainCommand, config: TrainConfig, result) -> None:
    """The best dev scores, where the predictions are, and the copies and zip the command asked for."""
    best = result["best"]
    print(f"best dev (epoch {result['best_epoch']}, step {result['best_step']}): " +
          " ".join(f"{k}={v:.4f}" for k, v in best.items() if v is not None))
    run_predictions = Path(config.out) / "predictions"
    print(f"predictions in {run_predictions}")
    if config.predictions_dir:
        files = sorted(run_predictions.glob("*.csv"))
        for line in publish_predictions({config.out: files}, config.predictions_dir, sys.argv, command.publish_always):
            print(line)
    for line in write_outputs(config.out, run_predictions, command.outputs, sys.argv):
        print(line)
    if command.submission:
        try:
            zip_path, _, _, lines = make_submission(Path(config.out) / SUBMISSION_ZIP, REPO,
                                                    config.predictions_dir or run_predictions)
        except SubmissionRefused as e:
            raise UserError(f"the run is complete in {config.out}, but no submission zip was written:\n"
                            + "\n".join(e.lines)) from None
        for line in lines:
            print(line, file=sys.stderr)
        print(f"submission: {zip_path}")

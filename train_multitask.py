"""Fine-tune one shared minBERT encoder on SST, Quora and STS at once.

    python train_multitask.py --data-dir ../shared/data/cs224n
    python train_multitask.py --freeze-until 9 --surgery pcgrad --smart
    python train_multitask.py --resume runs/NAME
    torchrun --nproc_per_node 2 train_multitask.py ...   (DistributedDataParallel)

A run folder receives config.json, TensorBoard events (tensorboard/),
checkpoint.pt (latest) and best.pt (best overall dev score), metrics.json and
the course's prediction files (predictions/).
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

# Before torch loads OpenMP: threads spinning for a core another job holds are 3-25x slower (README: Speed).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from minbert import RunFailure, UserError  # noqa: E402
from tasks.distributed import SINGLE, barrier, broadcast_from_main, init_world, shutdown  # noqa: E402
from tasks.options import add_training_args, exit_status, validate  # noqa: E402
from tasks.submission import SUBMISSION_ZIP, make_submission, publish_predictions  # noqa: E402
from tasks.trainer import CHECKPOINT, Interrupted, fit, no_checkpoint_error, precision_note, prepare  # noqa: E402

REPO = Path(__file__).resolve().parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_args(parser)
    run = parser.add_argument_group("run")
    run.add_argument("--resume", metavar="RUN_DIR", default=None,
                     help="continue a killed or interrupted run from its last checkpoint, with the "
                          "arguments it was started with")
    run.add_argument("--submission", action="store_true",
                     help="also zip the code and the course-level prediction folder as the course's "
                          "submission (as prepare_submit.py does)")
    return parser


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume:
        run_dir = Path(args.resume)
        config = run_dir / "config.json"
        if not (run_dir / CHECKPOINT).exists():
            raise no_checkpoint_error(run_dir / CHECKPOINT)
        try:
            saved = json.loads(config.read_text(encoding="utf-8"))["arguments"]
        except (OSError, ValueError, KeyError) as e:
            raise UserError(f"{config}: cannot read the run's arguments ({e})") from None
        resume, submission = args.resume, args.submission
        args = parser.parse_args([])
        vars(args).update({k: v for k, v in saved.items() if k in vars(args)})
        args.resume, args.submission, args.out = resume, submission, str(run_dir)
    elif args.out is not None and (Path(args.out) / "config.json").exists():
        raise UserError(f"--out {args.out} already holds a run: continue it with --resume {args.out} "
                        f"or choose another folder")
    try:
        validate(args)
    except TypeError:  # only a hand-edited config.json can hold one ("lr": "abc")
        raise UserError(f"{Path(args.resume) / 'config.json'}: an argument has the wrong type") from None
    if args.out is None:
        args.out = str(Path("runs") / time.strftime("%Y%m%d-%H%M%S"))
    return args


def main(argv=None) -> int:
    args, world = None, SINGLE
    try:
        args = parse_args(argv)
        world = init_world(args.device)
        args.out = broadcast_from_main(args.out, world)  # a clock-named folder: rank 0's name
        barrier(world)  # every rank has checked --out before rank 0 writes into it
        inputs = prepare(args, world=world)
        if world.main:  # the other ranks train in step with it, silently
            _announce(args, inputs)
        result = fit(args, inputs, args.out, resume=bool(args.resume))
        if world.main:
            _report(args, result)
        barrier(world)  # no process leaves the group while another still uses it
        return 0
    except Interrupted as e:  # every rank stops at the same step
        barrier(world)
        return exit_status(e)
    except (UserError, RunFailure) as e:
        return exit_status(e)
    except KeyboardInterrupt:  # before training started, or a second Ctrl-C
        resumable = args is not None and (Path(args.out) / CHECKPOINT).exists()
        print("interrupted" + (f"; resume with --resume {args.out}" if resumable else ""), file=sys.stderr)
        return 130
    finally:
        shutdown(world)


def _announce(args, inputs) -> None:
    src = inputs.encoder.source
    processes = f"; {inputs.world.size} processes ({inputs.world.backend})" if inputs.world.active else ""
    print(f"model: {src.name} ({src.resolved_from}, {src.num_layers} layers x {src.hidden_size}) "
          f"from {src.folder}; device {inputs.device}{processes}; {precision_note(args, inputs.device)}; "
          f"run folder {args.out}", flush=True)


def _report(args, result) -> None:
    best = result["best"]
    print(f"best dev (epoch {result['best_epoch']}): " +
          " ".join(f"{k}={v:.4f}" for k, v in best.items() if v is not None))
    run_predictions = Path(args.out) / "predictions"
    print(f"predictions in {run_predictions}")
    if args.predictions_dir:
        copied = publish_predictions(run_predictions.glob("*.csv"), args.predictions_dir, args.out, sys.argv)
        print(f"copied {len(copied)} prediction files to {args.predictions_dir}/ (prepare_submit.py zips them)")
    if args.submission:
        zip_path, _, lines = make_submission(Path(args.out) / SUBMISSION_ZIP, REPO, args.predictions_dir or run_predictions)
        for line in lines:
            print(line, file=sys.stderr)
        print(f"submission: {zip_path}")


if __name__ == "__main__":
    sys.exit(main())

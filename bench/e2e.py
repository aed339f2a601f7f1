"""README command 1, end to end, timed in its parts: set-up, loading, training, evaluation, predictions.

    python -m bench e2e [--data-dir DIR] [--no-setup] [--keep DIR] [-- train_multitask.py options]

By default as a new user runs it: the README's first bash block in a fresh clone of this checkout's HEAD (the
virtualenv made and filled by its pip commands, from pip's cache when warm), then `train_multitask.py`, whose
parts a trainer callback times. `--no-setup` runs the trainer with this interpreter in this checkout. Prints
each part's seconds, the dev metrics of the best evaluation and the machine.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.time()  # the worker's start, before torch loads (and before the imports below)

from bench import common  # noqa: E402

TRAIN = ".venv/bin/python train_multitask.py"


def parse_args(argv=None):
    p = common.arguments("e2e", __doc__, "json", "train-options")
    p.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR)")
    p.add_argument("--no-setup", dest="setup", action="store_false",
                   help="run the trainer here with this interpreter: no clone, no venv")
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="make the clone (or with --no-setup the run folder) here and keep it (default: a "
                        "temporary folder, removed)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return common.parse(p, argv)


def readme_command() -> tuple:
    """README command 1 cut in two: the set-up commands, and the training command's options."""
    text = (common.REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)\n```", text, re.S).group(1).strip()
    if TRAIN not in block:
        sys.exit(f"bench: README command 1 does not end with {TRAIN!r}: {block}")
    setup, _, options = block.partition(TRAIN)
    return setup.strip().removesuffix("&&").strip(), options.split()


# ------------------------------------------------------------------------------------------ worker

def worker(argv: list) -> None:
    """train_multitask.py's command (tasks.training.train_command) on argv, with a callback noting when each
    part begins and ends."""
    from tasks.machine import cpu_model
    from tasks.saved.run_record import read_run_record
    from tasks.saved.run_result import RunResult
    from tasks.training import Callback, train_command

    seen = {"train_s": 0.0, "eval_s": 0.0, "epochs_s": []}

    class Clock(Callback):
        def on_plan(self, run, plan):
            self.began = time.time()
            seen.setdefault("first_plan", self.began)

        def on_epoch_end(self, run):
            seen["epochs_s"].append(round(time.time() - self.began, 1))
            seen["train_s"] += time.time() - self.began

        def on_evaluate(self, run, metrics, seconds):
            seen["eval_s"] += seconds
            seen["last_evaluation"] = time.time()

    code = train_command(argv, callbacks=[Clock()])
    ended = time.time()
    if code != 0:
        sys.exit(code)
    out = Path(argv[argv.index("--out") + 1])
    metrics, record = RunResult.read(out / "metrics.json"), read_run_record(out / "config.json")
    result = {"start_s": seen["first_plan"] - STARTED, "compile_s": 0.0, "train_s": seen["train_s"],
              "epochs_s": seen["epochs_s"], "eval_s": seen["eval_s"], "finish_s": ended - seen["last_evaluation"],
              "run_s": ended - STARTED, "best": metrics.best, "best_epoch": metrics.best_epoch,
              "steps": metrics.steps, "precision": record.precision.used, "cpu": cpu_model()}
    common.report_result(result)


# ------------------------------------------------------------------------------------------ parent

def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args.train_options)
        return 0
    env = dict(os.environ)
    if args.data_dir:
        env["MINBERT_DATA_DIR"] = str(Path(args.data_dir).resolve())
    setup_cmd, options = readme_command()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    began = time.time()
    setup_s = 0.0
    if args.setup:
        clone = folder / "clone"
        clone_cmd = ["git", "clone", "--quiet", str(common.REPO), str(clone)]
        common.run_checked(clone_cmd, " ".join(clone_cmd), cwd=common.REPO, env=env)
        clock = time.time()
        common.run_checked(setup_cmd, setup_cmd, cwd=clone, env=env, shell=True)
        setup_s = time.time() - clock
        python, cwd = str(clone / ".venv" / "bin" / "python"), clone
    else:
        python, cwd = sys.executable, common.REPO
    train_argv = [*options, *args.train_options, "--out", str(folder / "run")]
    print(f"command 1: {setup_cmd + ' && ' if args.setup else ''}{TRAIN} {' '.join(train_argv)}", flush=True)
    r = common.run_worker([python, "-m", "bench", "e2e", "--worker", "--", *train_argv],
                          "the training process", cwd=cwd, env=env)
    total = time.time() - began
    r.update(setup_s=setup_s, total_s=total, options=args.train_options)
    parts = [("set-up (venv, pip)", setup_s), ("start (imports, model, data, build)", r["start_s"]),
             ("compile", r["compile_s"]), ("training", r["train_s"]), ("evaluation", r["eval_s"]),
             ("finish (predictions, model folder)", r["finish_s"])]
    other = total - sum(s for _, s in parts)
    print(f"machine: {r['cpu']}, {os.cpu_count()} CPUs; precision {r['precision']}; {r['steps']} steps")
    for label, seconds in parts + [("other (clone, process start-up)", other)]:
        print(f"  {label:38s}{seconds:8.1f} s")
    print(f"  {'total':38s}{total:8.1f} s = {total / 60:.1f} min   (epochs' training: "
          + ", ".join(f"{s:.0f}" for s in r["epochs_s"]) + " s)")
    best = r["best"]
    shown = [f"{k}={best[k]:.4f}" for k in ("sst", "quora", "sts", "overall") if best.get(k) is not None]
    print(f"best dev (epoch {r['best_epoch']}): " + " ".join(shown))
    common.write_json(args.json, r)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.e2e")

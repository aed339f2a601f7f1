"""README command 1, end to end, timed in its parts: set-up, loading, training, evaluation, predictions.

    python -m bench e2e [--data-dir DIR] [--no-setup] [--keep DIR] [-- train_multitask.py options]

By default the command is the README's own (its first bash block), run as a new user runs it: in a
fresh clone of this checkout's HEAD, the virtualenv made and filled by the block's pip commands
(from pip's cache when warm), then `train_multitask.py`. The training process reports when its
parts begin and end through a trainer callback. `--no-setup` skips the clone and the set-up and
runs the trainer with this interpreter in this checkout (for a quick look at the parts).

Parts: set-up (venv and pip), start (interpreter and imports, model, data reading and
tokenisation, building the run), compile (none: minBERT runs eagerly), training (every epoch's
steps), evaluation (every dev evaluation), finish (the best model's dev and test predictions,
the model folder, metrics). Prints the dev metrics of the best evaluation and the machine.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.time()  # the worker's start, before torch loads

from bench.common import report_result, run_checked, run_worker  # noqa: E402  (after STARTED)

REPO = Path(__file__).resolve().parents[1]
TRAIN = ".venv/bin/python train_multitask.py"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench e2e", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR)")
    p.add_argument("--no-setup", dest="setup", action="store_false",
                   help="run the trainer here with this interpreter: no clone, no venv")
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="make the clone (or with --no-setup the run folder) here and keep it (default: a "
                        "temporary folder, removed)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("train_options", nargs=argparse.REMAINDER,
                   help="after --: options added to train_multitask.py (e.g. -- --max-steps 20 for a smoke run)")
    args = p.parse_args(argv)
    args.train_options = [a for a in args.train_options if a != "--"]
    return args


def readme_command() -> tuple:
    """README command 1 cut in two: the set-up commands, and the training command's options."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
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
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    result = {"start_s": seen["first_plan"] - STARTED, "compile_s": 0.0, "train_s": seen["train_s"],
              "epochs_s": seen["epochs_s"], "eval_s": seen["eval_s"], "finish_s": ended - seen["last_evaluation"],
              "run_s": ended - STARTED, "best": metrics["best"], "best_epoch": metrics["best_epoch"],
              "steps": metrics["steps"], "precision": config["precision"]["used"], "cpu": cpu_model()}
    report_result(result)


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
        clone_cmd = ["git", "clone", "--quiet", str(REPO), str(clone)]
        run_checked(clone_cmd, " ".join(clone_cmd), cwd=REPO, env=env)
        clock = time.time()
        run_checked(setup_cmd, setup_cmd, cwd=clone, env=env, shell=True)
        setup_s = time.time() - clock
        python, cwd = str(clone / ".venv" / "bin" / "python"), clone
    else:
        python, cwd = sys.executable, REPO
    train_argv = [*options, *args.train_options, "--out", str(folder / "run")]
    print(f"command 1: {setup_cmd + ' && ' if args.setup else ''}{TRAIN} {' '.join(train_argv)}", flush=True)
    r = run_worker([python, "-m", "bench", "e2e", "--worker", "--", *train_argv], "the training process",
                   cwd=cwd, env=env)
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
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0

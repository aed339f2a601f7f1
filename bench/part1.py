"""The course's Part 1 against its CPU budgets.

    python -m bench part1 [--modes pretrain,finetune] [--model embedded] [--data-dir DIR]

Runs `classifier.py --option MODE` with its defaults as a user would (a fresh process, wall time from start to
exit, evaluation and prediction files included) against the budget (pretrain <= 10 min, finetune <= 25 min
on a 2-core CPU). Wall times compare only within one run on a quiet machine; the CPU is printed with them.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, arguments, model_folder
from tasks.machine import cpu_model

BUDGET_MIN = {"pretrain": 10, "finetune": 25}


def timed(cmd: list, log: Path) -> float:
    started = time.time()
    with open(log, "w") as f:
        code = subprocess.call(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} failed with exit status {code}; see {log}")
    return time.time() - started


def main(argv=None) -> int:
    parser = arguments("part1", __doc__, "model", "data-dir")
    parser.add_argument("--modes", default="pretrain,finetune")
    parser.add_argument("--out", default="runs/bench-part1", help="folder for the runs, logs and report")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores)")
    report = {"cpu": cpu_model(), "cores": os.cpu_count(), "modes": {}}
    for mode in args.modes.split(","):
        command = [sys.executable, "classifier.py", "--option", mode, "--model", model_folder(args.model),
                   "--out", str(out / mode), "--predictions-dir", "", *data]
        seconds = timed(command, out / f"{mode}.log")
        ours = json.loads((out / mode / "classifier.json").read_text())
        report["modes"][mode] = {"seconds": round(seconds, 1), "budget_min": BUDGET_MIN[mode], "ours": ours["tasks"]}
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        verdict = "met" if seconds / 60 <= BUDGET_MIN[mode] else "NOT met"
        print(f"{mode}: {seconds / 60:.1f} min all in, budget {BUDGET_MIN[mode]} min: {verdict}")
        for task, r in ours["tasks"].items():
            print(f"  {task}: dev acc {r['dev_accuracy']:.4f} (best, epoch {r['best_epoch']}), "
                  f"final {r['final_dev_accuracy']:.4f}")
    return 0


if __name__ == "__main__":
    from bench.common import run_as_bench
    run_as_bench("bench.part1")

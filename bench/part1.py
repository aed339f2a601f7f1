"""The course's Part 1 against its CPU budgets and against the transformers reference.

    python -m bench part1                       # both modes, defaults, then the reference on the same budget
    python -m bench part1 --modes finetune --no-reference

Runs `classifier.py --option MODE` with its defaults as a user would (a fresh
process, wall time from start to exit, evaluation and prediction files
included) and checks it against the budget (pretrain <= 10 min, finetune
<= 25 min on a 2-core CPU). Then `bench part1-reference` (bench/part1_reference.py) trains
transformers' BertForSequenceClassification on the same checkpoint, data,
epochs, learning rate, batch size and dropout, and the dev accuracies are
printed side by side. Wall times are only comparable within one run on a
quiet machine; the CPU model is printed with them.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tasks.machine import cpu_model

REPO = Path(__file__).resolve().parents[1]
BUDGET_MIN = {"pretrain": 10, "finetune": 25}


def timed(cmd: list, log: Path) -> float:
    started = time.time()
    with open(log, "w") as f:
        code = subprocess.call(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} failed with exit status {code}; see {log}")
    return time.time() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench part1", description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="pretrain,finetune")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default="runs/bench-part1", help="folder for the runs, logs and report")
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help="time classifier.py only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = ["--data-dir", args.data_dir] if args.data_dir else []
    report = {"cpu": cpu_model(), "cores": os.cpu_count(), "modes": {}}
    for mode in args.modes.split(","):
        run_dir = out / mode
        seconds = timed([sys.executable, "classifier.py", "--option", mode, "--model", args.model,
                         "--out", str(run_dir), "--predictions-dir", "", *data], out / f"{mode}.log")
        ours = json.loads((run_dir / "classifier.json").read_text())
        entry = {"seconds": round(seconds, 1), "budget_min": BUDGET_MIN[mode], "ours": ours["tasks"],
                 "settings": {k: ours["arguments"][k] for k in ("epochs", "lr", "batch_size",
                                                                "hidden_dropout_prob", "seed")}}
        if args.reference:
            s = entry["settings"]
            ref_json = out / f"reference-{mode}.json"
            entry["reference_seconds"] = round(timed(
                [sys.executable, "-m", "bench", "part1-reference", "--option", mode, "--epochs", str(s["epochs"]),
                 "--lr", str(s["lr"]), "--batch-size", str(s["batch_size"]), "--hidden-dropout-prob",
                 str(s["hidden_dropout_prob"]), "--seed", str(s["seed"]), "--model", args.model,
                 "--json", str(ref_json), *data], out / f"reference-{mode}.log"), 1)
            entry["reference"] = json.loads(ref_json.read_text())
        report["modes"][mode] = entry
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    return 0


def print_report(report: dict) -> None:
    print(f"CPU: {report['cpu']} ({report['cores']} cores)")
    for mode, e in report["modes"].items():
        minutes = e["seconds"] / 60
        verdict = "met" if minutes <= e["budget_min"] else "NOT met"
        print(f"{mode}: {minutes:.1f} min all in, budget {e['budget_min']} min: {verdict}; settings {e['settings']}")
        for task, r in e["ours"].items():
            line = f"  {task}: dev acc {r['dev_accuracy']:.4f} (best, epoch {r['best_epoch']}), " \
                   f"final {r['final_dev_accuracy']:.4f}"
            ref = (e.get("reference") or {}).get("tasks", {}).get(task)
            if ref:
                line += f"; transformers {ref['dev_acc_best']:.4f} (best), final {ref['dev_acc_final']:.4f}"
            print(line)

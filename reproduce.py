"""The reproduction report: the cheapest experiment that tests each paper's headline finding behind
ablate.py's studies, with 3 seeds and 95% intervals, written to OUT/report.md with its figures.

    python reproduce.py                                   # every experiment (docs/reproduction/README.md: wall time)
    python reproduce.py --only tamkin-permute,hao-dynamics
    python reproduce.py --seeds 0,1,2,3,4 --out runs/reproduce-5seeds

Each experiment is one or more ablate.py sweeps (OUT/EXPERIMENT/SWEEP/, the same folders, results and
plots as ablate.py writes), so a killed run resumes where it stopped when rerun, and a sweep can be
inspected or extended with ablate.py itself. tasks/ablation/reproduction.py declares the experiments,
the scale (steps, batch, data fractions) and how each finding's verdict is decided.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import os
import sys
from pathlib import Path

import torch

import ablate  # its option parsing is the one every sweep here goes through
from minbert import IMPLEMENTATION_CHOICES, PRECISIONS, RunFailure, UserError
from minbert.config import BertConfig
from minbert.loading import resolve
from tasks.ablation import arguments, reproduction, sweep
from tasks.ablation.studies import STUDIES
from tasks.cli import exit_status
from tasks.machine import cpu_model
from tasks.training import Interrupted


def build_parser() -> argparse.ArgumentParser:
    parser = ablate._Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=arguments.items, default=None, metavar="NAME,...",
                        help="run these experiments (and those their findings read): "
                             + ", ".join(reproduction.EXPERIMENTS) + " (default: all)")
    parser.add_argument("--out", default="runs/reproduce", help="folder of the sweeps and the report "
                                                                "(default: %(default)s)")
    parser.add_argument("--seeds", type=arguments.int_list, default=list(reproduction.SEEDS), metavar="S,...",
                        help="fine-tuning seeds, at least 3 for an interval worth reading (default: 0,1,2)")
    parser.add_argument("--model", default="minilm", help="checkpoint folder, Hugging Face name, or 'minilm' "
                                                          "(default: %(default)s, the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR, "
                                                         "else data/)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default: %(default)s)")
    parser.add_argument("--precision", default="auto", choices=PRECISIONS,
                        help="as train_multitask.py's (default: %(default)s)")
    parser.add_argument("--implementation", default="auto", choices=IMPLEMENTATION_CHOICES,
                        help="as train_multitask.py's (default: %(default)s)")
    parser.add_argument("--max-steps", type=arguments.positive, default=None, metavar="N",
                        help="cap every trial at N optimizer steps: a smoke run of the pipeline, not a reproduction "
                             "(default: the report's scale)")
    return parser


def run_sweep(argv: list) -> tuple:
    """One ablate.py sweep, in this process: (exit status, its finished trials)."""
    args = ablate.parse_args(argv)
    print("reproduce: ablate.py " + " ".join(argv), flush=True)
    opened, trials = sweep.open_sweep(args, STUDIES[args.mode])
    status = sweep.run_shard(opened, trials)
    planned = {t.key(opened.fingerprint) for t in trials}
    return status, [r for r in sweep.finished_records(opened) if r["key"] in planned]


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        unknown = [n for n in args.only or () if n not in reproduction.EXPERIMENTS]
        if unknown:
            raise UserError(f"--only {','.join(unknown)}: no such experiment (choose from "
                            f"{', '.join(reproduction.EXPERIMENTS)})")
        if len(args.seeds) < 2:
            raise UserError("--seeds: an interval needs at least 2 seeds (3 or more to be worth reading)")
        folder, _ = resolve(args.model)
        num_layers = BertConfig.from_json(folder / "config.json").num_hidden_layers
        common = ["--seeds", ",".join(map(str, args.seeds)), "--model", args.model, "--device", args.device,
                  "--precision", args.precision, "--implementation", args.implementation] \
            + (["--data-dir", args.data_dir] if args.data_dir else []) \
            + (["--max-steps", str(args.max_steps)] if args.max_steps else [])
        root = Path(args.out)
        root.mkdir(parents=True, exist_ok=True)
        context = {"model": args.model, "data_dir": args.data_dir or os.environ.get("MINBERT_DATA_DIR", "data/"),
                   "seeds": args.seeds, "cpu": cpu_model(), "threads": torch.get_num_threads()}
        path, failed = reproduction.run(args.only, root, common, num_layers, run_sweep, context)
        print(f"reproduce: report {path}", flush=True)
        return 1 if failed else 0
    except (UserError, RunFailure, Interrupted) as e:
        return exit_status(e)
    except KeyboardInterrupt:
        print("interrupted; finished trials are kept in each sweep's folder: rerun the same command to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

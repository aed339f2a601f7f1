"""The reproduction report: every headline finding of the five papers behind ablate.py, declared with its quote
and its smallest effect of interest before any run (tasks/ablation/findings/), tested by ablate.py sweeps,
decided by a rule that can fail, and written to docs/reproduction/report.md from raw results kept beside it.

    python reproduce.py --plan                               # every experiment: its command and estimated minutes
    python reproduce.py --only reinit-small,reinit-large     # run some (and what their findings read)
    python reproduce.py                                      # every experiment at the cpu scale
    python reproduce.py --report-only                        # rewrite report.md from docs/reproduction/results/
    python reproduce.py --scale paper --model bert-base-uncased --task-file glue.json \\
        --tasks primary=sst2,second=qnli --results runs/paper-results --report runs/paper-report.md   # on a GPU

Each experiment is one or more ablate.py sweeps (OUT/EXPERIMENT/RUN/SWEEP/, the same folders, results and
plots as ablate.py writes), so a killed run resumes where it stopped when rerun. Each sweep's finished trials
are then kept in RESULTS/EXPERIMENT/RUN/SWEEP.jsonl with run.json (scale, model, tasks, seeds, options, and per
sitting the commit, CPU, date and wall time); experiments may run in separate sittings, each adding its own.
Extra seeds or a changed protocol are a follow-up (--follow-up LABEL, declared in
tasks/ablation/reproduction_runs.py), kept beside the first run, never over it.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import shutil
import sys
import time
from pathlib import Path

import ablate  # its option parsing is the one every sweep here goes through
from minbert import IMPLEMENTATION_CHOICES, PRECISIONS, RunFailure, UserError
from tasks.ablation import arguments, sweep
from tasks.ablation.studies import STUDIES
from tasks.cli import exit_status
from tasks.machine import cpu_model, source_commit
from tasks.reproduction import experiments as reproduction
from tasks.reproduction import kept as reproduction_runs
from tasks.reproduction import report as reproduction_report
from tasks.training import Interrupted

ROOT = Path(__file__).resolve().parent
RESULTS = Path("docs/reproduction/results")
REPORT = Path("docs/reproduction/report.md")
DEFAULT_MODEL = {"cpu": "minilm", "paper": "bert-base-uncased"}


def build_parser() -> argparse.ArgumentParser:
    parser = ablate._Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group("what to run")
    what.add_argument("--only", type=arguments.items, default=None, metavar="NAME,...",
                      help="run these experiments (and those their findings read): "
                           + ", ".join(reproduction.EXPERIMENTS) + " (default: all)")
    what.add_argument("--scale", choices=tuple(reproduction.SCALES), default="cpu",
                      help="cpu: the embedded model, small data fractions, a budget stopped on a plateau (--plan "
                           "estimates each experiment's minutes on two cores); paper: the papers' schedule (3 "
                           "epochs at 2e-5, batch 32, 10%% and 100%% of the data) for a GPU (default: %(default)s)")
    what.add_argument("--follow-up", default=None, metavar="LABEL",
                      help="run a declared follow-up (its own seeds or options) beside the first run, never over "
                           "it: " + (", ".join(reproduction_runs.FOLLOW_UPS) or "none declared yet"))
    what.add_argument("--report-only", action="store_true",
                      help="train nothing: rewrite the report from the kept results")
    what.add_argument("--plan", action="store_true",
                      help="train nothing: print each experiment's command and estimated minutes")
    setting = parser.add_argument_group("model, data and machine (passed to every sweep)")
    setting.add_argument("--model", default=None,
                         help="checkpoint folder, Hugging Face name, or 'minilm' (default: minilm at the cpu scale, "
                              "bert-base-uncased at the paper scale)")
    setting.add_argument("--tasks", default=None, metavar="ROLE=TASK,...",
                         help="the tasks the experiments use, by role: " + ", ".join(
                             f"{r} (default {t})" for r, t in reproduction.ROLES.items())
                         + "; bare names fill the roles in that order (e.g. sst2,qnli with --task-file)")
    setting.add_argument("--task-file", default=None, metavar="FILE", help="your own tasks (docs/own-tasks.md)")
    setting.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR, "
                                                          "else data/)")
    setting.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default: %(default)s)")
    setting.add_argument("--precision", default="auto", choices=PRECISIONS,
                         help="as train_multitask.py's (default: %(default)s)")
    setting.add_argument("--implementation", default="auto", choices=IMPLEMENTATION_CHOICES,
                         help="as train_multitask.py's (default: %(default)s)")
    setting.add_argument("--workers", default=None, metavar="N",
                         help="ablate.py's --workers: trials side by side in one-thread processes "
                              "(default: ablate.py's)")
    where = parser.add_argument_group("where things go")
    where.add_argument("--out", default="runs/reproduce", help="the sweeps' folders (default: %(default)s)")
    where.add_argument("--results", default=None, help=f"the kept raw results (default: {RESULTS})")
    where.add_argument("--report", default=None, help=f"the report (default: {REPORT})")
    smoke = parser.add_argument_group("smoke runs (not a reproduction)")
    smoke.add_argument("--max-steps", type=arguments.positive, default=None, metavar="N",
                       help="cap every trial at N steps; needs --results (a smoke run is never kept with the report)")
    smoke.add_argument("--seeds", type=arguments.positive, default=None, metavar="N",
                       help="N seeds instead of the declared ones; only with --max-steps (more seeds for a "
                            "reproduction are a follow-up)")
    return parser


def parse_roles(text) -> dict:
    roles = dict(reproduction.ROLES)
    if not text:
        return roles
    for i, item in enumerate(arguments.items(text)):
        role, sep, task = item.partition("=")
        if not sep:
            if i >= len(roles):
                raise UserError(f"--tasks {text}: more names than roles ({', '.join(roles)})")
            role, task = list(reproduction.ROLES)[i], item
        if role not in reproduction.ROLES:
            raise UserError(f"--tasks {item}: no role {role!r} (choose from {', '.join(reproduction.ROLES)})")
        roles[role] = task.strip()
    return roles


def run_sweep(argv: list) -> tuple:
    """One ablate.py sweep, in this process: (exit status, its finished trials)."""
    args = ablate.parse_args(argv)
    print("reproduce: ablate.py " + " ".join(argv), flush=True)
    opened, trials = sweep.open_sweep(args, STUDIES[args.mode])
    status = sweep.run_shard(opened, trials)
    planned = {t.key(opened.fingerprint) for t in trials}
    return status, [r for r in sweep.finished_records(opened) if r["key"] in planned]


def context(args, num_layers: int) -> reproduction.Context:
    return reproduction.Context(num_layers, reproduction.SCALES[args.scale], parse_roles(args.tasks),
                                model=args.model)


def common_options(args, seeds: list) -> list:
    out = ["--seeds", ",".join(map(str, seeds)), "--model", args.model, "--device", args.device,
           "--precision", args.precision, "--implementation", args.implementation]
    out += ["--data-dir", args.data_dir] if args.data_dir else []
    out += ["--task-file", args.task_file] if args.task_file else []
    out += ["--max-steps", str(args.max_steps)] if args.max_steps else []
    out += ["--workers", args.workers] if args.workers else []
    return out


def protocol_options(spec, scale, follow) -> list:
    """What a sweep's trials measure, besides seeds and model: recorded in run.json and compared across sittings."""
    return [*spec.options, *scale.budget, *scale.plateau, *(follow.extra_options if follow else ())]


def run_experiment(args, experiment, ctx, results_dir: Path, report_dir: Path, run_sweep=run_sweep) -> int:
    """Run (or resume) the experiment's sweeps and keep their finished trials; 1 when a trial failed."""
    follow = reproduction_runs.FOLLOW_UPS.get(args.follow_up) if args.follow_up else None
    label = follow.label if follow else reproduction_runs.FIRST
    seeds = list(range(args.seeds)) if args.seeds else \
        list(follow.seeds) if follow and follow.seeds else reproduction.seeds_of(experiment, ctx.scale)
    started, status, kept, sweeps = time.time(), 0, {}, {}
    for spec in experiment.sweeps(ctx):
        options = protocol_options(spec, ctx.scale, follow)
        out = Path(args.out) / experiment.name / label / spec.label
        code, records = run_sweep(["--mode", spec.mode, *options, "--out", str(out), *common_options(args, seeds)])
        status |= code
        kept[spec.label], sweeps[spec.label] = records, options + (["--max-steps", str(args.max_steps)]
                                                                    if args.max_steps else [])
        for plot_sweep, plot in experiment.figures:
            png = out / "plots" / f"{plot}.png"
            if plot_sweep == spec.label and png.exists():
                (report_dir / "figures").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(png, report_dir / "figures" / f"{experiment.name}-{label}-{plot}.png")
    run = {"experiment": experiment.name, "run": label, "protocol": follow.protocol if follow else 1,
           "scale": ctx.scale.name, "model": args.model, "tasks": ctx.tasks, "seeds": seeds, "layers": ctx.n,
           "sweeps": sweeps}
    seconds = time.time() - started
    import torch
    workers = args.workers or "ablate.py's default"
    reproduction_runs.store(results_dir, run, kept, reproduction_runs.sitting(
        cpu_model(), source_commit(ROOT), seconds, torch.get_num_threads(), workers))
    print(f"reproduce: {experiment.name} ({label}) done in {seconds / 60:.1f} min; kept in {results_dir}", flush=True)
    return status


def print_plan(args, ctx, runs: dict) -> None:
    """Each experiment's command and estimate; for a kept run, what its sittings took beside the estimate (the
    estimate's step costs were measured on an fp32-only CPU; a bf16 CPU and plateau stops take less)."""
    for e in reproduction.EXPERIMENTS.values():
        one, two, guessed = reproduction.estimate_minutes(e, ctx)
        guess = " (a guessed step cost)" if guessed else ""
        kept = [f"{label} run took {sum(s['wall_time_s'] for s in meta.get('sittings', [])) / 60:.1f} min "
                f"({', '.join(sorted({s['cpu'] for s in meta.get('sittings', [])}))})"
                for label, experiments in runs.items() if e.name in experiments
                for meta in [experiments[e.name][0]]]
        measured = f"; {'; '.join(kept)}" if kept else ""
        if args.scale != "cpu":
            print(f"{e.name}: python reproduce.py --scale {args.scale} --model {args.model} --only {e.name}{measured}")
            continue
        print(f"{e.name}: ~{one:.0f} min in one process, ~{two:.0f} min with two workers{guess}{measured}: "
              f"python reproduce.py --scale {args.scale} --only {e.name}")


def layers_of(model: str) -> int:
    from minbert.config import BertConfig
    from minbert.loading import resolve
    folder, _ = resolve(model)
    return BertConfig.from_json(folder / "config.json").num_hidden_layers


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.model = args.model or DEFAULT_MODEL[args.scale]
        unknown = [n for n in args.only or () if n not in reproduction.EXPERIMENTS]
        if unknown:
            raise UserError(f"--only {','.join(unknown)}: no such experiment (choose from "
                            f"{', '.join(reproduction.EXPERIMENTS)})")
        if args.seeds and not args.max_steps:
            raise UserError("--seeds: the seeds are declared per experiment; more seeds for a reproduction are a "
                            "follow-up (--follow-up LABEL); --seeds is for smoke runs with --max-steps")
        if args.max_steps and not args.results:
            raise UserError("--max-steps: a smoke run is not kept with the report; give --results (and --report) "
                            "elsewhere")
        if args.follow_up and args.follow_up not in reproduction_runs.FOLLOW_UPS:
            raise UserError(f"--follow-up {args.follow_up}: not declared (declared: "
                            f"{', '.join(reproduction_runs.FOLLOW_UPS) or 'none'}; declare it in "
                            f"tasks/ablation/reproduction_runs.py first)")
        results_dir, report = Path(args.results or RESULTS), Path(args.report or REPORT)
        runs = reproduction_runs.load(results_dir)
        reproduction_runs.check_one_setting(runs, args.scale, args.model)
        kept = {meta.get("layers") for experiments in runs.values() for meta, _ in experiments.values()}
        if len(kept) == 1 and (args.report_only or args.plan):
            layers = kept.pop()
        elif args.plan and args.model != "minilm":
            layers = 12  # a plan needs no checkpoint: bert-base's depth
        else:
            layers = layers_of(args.model)
        ctx = context(args, layers)
        if args.plan:
            print_plan(args, ctx, runs)
            return 0
        failed = 0
        if not args.report_only:
            for e in reproduction.selected(args.only):
                if args.follow_up and e.name not in reproduction_runs.FOLLOW_UPS[args.follow_up].experiments:
                    continue
                if args.only and e.name not in args.only and e.name in runs.get(reproduction_runs.FIRST, {}):
                    print(f"reproduce: {e.name}: read from its kept results (run it with --only {e.name} to "
                          f"resume it)", flush=True)
                    continue
                print(f"reproduce: {e.name}: {e.what}", flush=True)
                failed |= run_experiment(args, e, ctx, results_dir, report.parent)
        path = reproduction_report.write(results_dir, report, ctx)
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

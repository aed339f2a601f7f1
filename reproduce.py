"""The reproduction report: every headline finding of the five papers behind ablate.py, declared with its quote
and its smallest effect of interest before any run (tasks/reproduction/findings/), tested by ablate.py sweeps,
decided by a rule that can fail, and written to docs/reproduction/report.md from raw results kept beside it.

    python reproduce.py --plan                               # every experiment and pending follow-up, with minutes
    python reproduce.py --only reinit-small,reinit-large     # run some (and what their findings read)
    python reproduce.py                                      # every experiment at the cpu scale
    python reproduce.py --report-only                        # rewrite report.md, report.json, README's counts
    python reproduce.py --scale paper --model bert-base-uncased --task-file glue.json \\
        --tasks primary=sst2,second=qnli --results runs/paper-results --report runs/paper-report.md   # on a GPU
    python reproduce.py --report-only --results docs/reproduction/mini-20M/results \\
        --report docs/reproduction/mini-20M/report.md        # another model's report, from its own folder

Each experiment is one or more ablation sweeps, built directly and run through the sweep API
(tasks/reproduction/sweeps.py) in OUT/EXPERIMENT/RUN/SWEEP/ (the same folders, results and plots as ablate.py
writes), so a killed run resumes where it stopped when rerun. Each sweep's finished trials are kept in
RESULTS/EXPERIMENT/RUN/SWEEP.jsonl with run.json (scale, model, tasks, seeds, options, and per
sitting the commit, CPU, date and wall time); experiments may run in separate sittings, each adding its own.
A run kept unfinished (--gather, or a sitting in which a trial failed) resumes from its kept trials in
an empty OUT too (another machine, a fresh checkout); a registered confirmatory run heads no line until
it is finished.
Extra seeds or a changed protocol are a follow-up (--follow-up LABEL, declared in
tasks/reproduction/follow_ups.py), kept beside the first run, never over it.

A results folder keeps one model's runs and gets its own report: another model (--model FOLDER, e.g. a
pretrain.py run's RUN/model) runs with a --results, --report and --out of its own. Kept runs name the model by
what it is (its name, weights' hash, and for a model pretrained here its pretrain.py recipe and masked accuracy),
never by its folder. The model defaults to the one the folder's kept runs record (so --report-only and --plan
need no --model), else the scale's; training a model pretrained here needs --model, its checkpoint.
"""
import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Optional

from minbert import DEFAULT_IMPLEMENTATION, IMPLEMENTATION_CHOICES, PRECISIONS, UserError, resolve_precision
from tasks.ablation import arguments
from tasks.cli import run_command
from tasks.machine import resolve_device
from tasks.pretraining import Model, identify
from tasks.reproduction import experiments, follow_ups, kept, plan, report
from tasks.reproduction.sweeps import Setting, run_experiment, weights_of
from tasks.training import Interrupted

ROOT = Path(__file__).resolve().parent
RESULTS = report.RESULTS
REPORT = Path("docs/reproduction/report.md")
DEFAULT_MODEL = {"cpu": "minilm", "paper": "bert-base-uncased"}


def build_parser() -> argparse.ArgumentParser:
    parser = arguments.Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_argument_group("what to run")
    what.add_argument("--only", type=arguments.items, default=None, metavar="NAME,...",
                      help="run these experiments (and those their findings read): "
                           + ", ".join(experiments.EXPERIMENTS) + " (default: all)")
    what.add_argument("--scale", choices=tuple(experiments.SCALES), default="cpu",
                      help="cpu: the embedded model, small data fractions, a budget stopped on a plateau (--plan "
                           "estimates each experiment's minutes); paper: the papers' schedule (3 "
                           "epochs at 2e-5, batch 32, 10%% and 100%% of the data) for a GPU (default: %(default)s)")
    what.add_argument("--follow-up", default=None, metavar="LABEL",
                      help="run a declared follow-up (its own seeds or options) beside the first run, never over "
                           "it: " + (", ".join(follow_ups.FOLLOW_UPS) or "none declared yet"))
    what.add_argument("--report-only", action="store_true",
                      help="train nothing: rewrite the report from the kept results")
    what.add_argument("--plan", action="store_true",
                      help="train nothing: print each experiment's command and estimated minutes (trials x steps x "
                           "a measured seconds a step on --device), then each declared follow-up still pending")
    setting = parser.add_argument_group("model, data and machine (passed to every sweep)")
    setting.add_argument("--model", default=None,
                         help="checkpoint folder, Hugging Face name, or 'minilm' (default: the model the results "
                              "folder's kept runs record, else minilm at the cpu scale, bert-base-uncased at the "
                              "paper scale); a folder keeps one model's runs: give another model its own --results")
    setting.add_argument("--tasks", default=None, metavar="ROLE=TASK,...",
                         help="the tasks the experiments use, by role: " + ", ".join(
                             f"{r} (default {t})" for r, t in experiments.ROLES.items())
                         + "; bare names fill the roles in that order (e.g. sst2,qnli with --task-file)")
    setting.add_argument("--task-file", default=None, metavar="FILE", help="your own tasks (docs/own-tasks.md)")
    setting.add_argument("--data-dir", default=None, help="the course's csv files (default: $MINBERT_DATA_DIR, "
                                                          "else data/)")
    setting.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default: %(default)s)")
    setting.add_argument("--precision", default="auto", choices=PRECISIONS,
                         help="as train_multitask.py's (default: %(default)s)")
    setting.add_argument("--implementation", default=DEFAULT_IMPLEMENTATION, choices=IMPLEMENTATION_CHOICES,
                         help="as train_multitask.py's (default: %(default)s)")
    setting.add_argument("--workers", type=arguments.positive_or_auto, default=None, metavar="N",
                         help="ablate.py's --workers: trials side by side in one-thread processes "
                              "(default: ablate.py's)")
    setting.add_argument("--shard", type=arguments.shard, default=None, metavar="I/N",
                         help="run shard I of N of every sweep (ablate.py's --shard): N processes at once share a "
                              "GPU, or several; each keeps what has finished when it ends, so the last to end keeps "
                              "the run (default: every trial)")
    setting.add_argument("--gather", action="store_true",
                         help="train nothing: keep the trials already finished in --out's sweep folders (shards a "
                              "GPU machine ran, whose kept results did not come back); each sitting records where "
                              "its trials were trained, from their own records")
    where = parser.add_argument_group("where things go")
    where.add_argument("--out", default="runs/reproduce", help="the sweeps' folders (default: %(default)s)")
    where.add_argument("--results", default=None, help=f"the kept raw results, one model's (default: {RESULTS})")
    where.add_argument("--report", default=None,
                       help=f"the report (default: {REPORT}; with --results, report.md beside that folder)")
    smoke = parser.add_argument_group("smoke runs (not a reproduction)")
    smoke.add_argument("--max-steps", type=arguments.positive, default=None, metavar="N",
                       help="cap every trial at N steps; needs --results (a smoke run is never kept with the report)")
    smoke.add_argument("--seeds", type=arguments.positive, default=None, metavar="N",
                       help="N seeds instead of the declared ones; only with --max-steps (more seeds for a "
                            "reproduction are a follow-up)")
    return parser


def parse_roles(text) -> dict:
    roles = dict(experiments.ROLES)
    if not text:
        return roles
    for i, item in enumerate(arguments.items(text)):
        role, sep, task = item.partition("=")
        if not sep:
            if i >= len(roles):
                raise UserError(f"--tasks {text}: more names than roles ({', '.join(roles)})")
            role, task = list(experiments.ROLES)[i], item
        if role not in experiments.ROLES:
            raise UserError(f"--tasks {item}: no role {role!r} (choose from {', '.join(experiments.ROLES)})")
        roles[role] = task.strip()
    return roles


def context(args, model: Model, num_layers: int) -> experiments.Context:
    """The experiments' context for the model run: its heads as the kept runs record them, else from the
    checkpoint's config.json, read only where it trains or plans (the report needs none)."""
    read = not model.heads and not args.report_only and args.model not in DEFAULT_MODEL.values()
    heads = {"heads": model.heads or heads_of(args.model, model)} if model.heads or read else {}
    return experiments.Context(num_layers, experiments.SCALES[args.scale], parse_roles(args.tasks),
                               model=model.name, task_file=args.task_file, **heads)


def setting_of(args) -> Setting:
    """The model, data and machine every sweep shares."""
    return Setting(args.model, args.device, args.precision, args.implementation, args.data_dir, args.task_file,
                   args.max_steps, args.workers, args.shard, args.gather)


def follow_up_of(args) -> Optional[follow_ups.FollowUp]:
    """The declared follow-up --follow-up names (check_arguments refuses any other); None without one."""
    return follow_ups.FOLLOW_UPS[args.follow_up] if args.follow_up else None


def seeds_for(args, experiment, ctx) -> list:
    """--seeds (a smoke run), a follow-up's own seeds, else the experiment's declared ones."""
    follow = follow_up_of(args)
    if args.seeds:
        return list(range(args.seeds))
    own = follow.seeds_for(experiment.name) if follow else ()
    return list(own) if own else experiments.seeds_of(experiment, ctx.scale)


def print_plan(args, ctx, model: Model, runs: kept.KeptRuns) -> None:
    """Each experiment's command and estimated minutes (plan.py: a trial's steps x a measured seconds a step,
    or a probe's or comparison's measured seconds, on the device and in the precision the run would train in;
    in the precision most kept runs trained in where none trained in this one), what a kept run took beside
    it, then each declared follow-up still pending."""
    recorded = kept.identity_of(runs)
    named = not model.recipe and model.name in (recorded.name if recorded else None, DEFAULT_MODEL[args.scale])
    model = "" if named else f"--model {'CHECKPOINT' if args.model == model.name else args.model} "
    results = report.results_flag(Path(args.results or RESULTS))
    device = resolve_device(args.device).type
    precision = resolve_precision(args.precision, device)
    where = f"{device} in {precision}"
    if plan.measured(ctx.scale.name, device, precision) is None:
        usual = plan.usual_precision(ctx.scale.name, device)
        where = f"{device} (no run kept on {device})"
        if usual:
            where = f"{device} in {usual} (no run kept in {precision} on {device}: the usual precision's)"
        precision = usual
    print(f"Minutes on {where}, from the kept runs' own trials:")
    for e in experiments.EXPERIMENTS.values():
        found = plan.experiment_minutes(e, ctx, device, precision=precision)
        estimate = f"~{found:.0f} min" if found is not None else f"no measured rate at scale {args.scale} on {device}"
        took = "".join(f"; {label} run took {by_experiment[e.name].minutes():.1f} min on "
                       f"{by_experiment[e.name].run.device or 'an unrecorded device'}"
                       for label, by_experiment in runs.items() if e.name in by_experiment)
        print(f"{e.name}: {estimate}{took}: python reproduce.py {results}--scale {args.scale} {model}--only {e.name}")
    print(f"\nDeclared follow-ups (controls) still pending, minutes on {where}:")
    for line in plan.lines(follow_ups.FOLLOW_UPS, runs, ctx, results + model, device, precision):
        print(f"- {line}")


def config_of(model: str) -> dict:
    """The checkpoint's architecture, from its config.json alone (no weights are read)."""
    from minbert.config import BertConfig
    from minbert.loading import resolve
    return dataclasses.asdict(BertConfig.from_json(resolve(model)[0] / "config.json"))


def heads_of(model: str, named: Model) -> int:
    """The checkpoint's attention heads; one line naming --model where the kept runs name a model by a name
    that loads nothing (a model pretrained here)."""
    try:
        return config_of(model)["num_attention_heads"]
    except UserError:
        if model != named.name:
            raise
    raise UserError(f"the kept runs do not record {named.name}'s attention heads and no checkpoint is called "
                    f"{model!r}: pass --model CHECKPOINT, its folder (weights {named.weights or 'unrecorded'})")


def layers_of(model: str) -> int:
    return config_of(model)["num_hidden_layers"]


def check_arguments(args) -> None:
    """What argparse cannot see: unknown experiments, smoke-run options, an undeclared follow-up."""
    unknown = [n for n in args.only or () if n not in experiments.EXPERIMENTS]
    if unknown:
        raise UserError(f"--only {','.join(unknown)}: no such experiment (choose from "
                        f"{', '.join(experiments.EXPERIMENTS)})")
    if args.seeds and not args.max_steps:
        raise UserError("--seeds: the seeds are declared per experiment; more seeds for a reproduction are a "
                        "follow-up (--follow-up LABEL); --seeds is for smoke runs with --max-steps")
    if args.max_steps and not args.results:
        raise UserError("--max-steps: a smoke run is not kept with the report; give --results (and --report) "
                        "elsewhere")
    if args.follow_up and args.follow_up not in follow_ups.FOLLOW_UPS:
        raise UserError(f"--follow-up {args.follow_up}: not declared (declared: "
                        f"{', '.join(follow_ups.FOLLOW_UPS) or 'none'}; declare it in "
                        f"tasks/reproduction/follow_ups.py first)")
    follow = follow_up_of(args)
    if follow and follow.reads and not args.report_only:
        raise UserError(f"--follow-up {args.follow_up}: trains nothing, it re-reads the kept run "
                        f"'{follow.reads}': python reproduce.py --report-only shows it")


def model_layers(args, runs: kept.KeptRuns) -> int:
    """The model's depth: the kept results' for --report-only and --plan, else the checkpoint's."""
    depths = kept.depths(runs)
    if len(depths) == 1 and (args.report_only or args.plan):
        return depths.pop()
    if args.plan and args.model == DEFAULT_MODEL["paper"]:
        return 12  # a plan needs no checkpoint: bert-base's depth
    return layers_of(args.model)


def run_selected(args, ctx, runs: kept.KeptRuns, results_dir: Path, report_dir: Path) -> int:
    """Run the experiments --only and --follow-up choose (and those their findings read); 1 if a trial failed."""
    follow = follow_up_of(args)
    folders = {"out": Path(args.out), "results": results_dir, "report": report_dir}
    failed = 0
    for e in experiments.selected(args.only):
        if follow and e.name not in follow.experiments:
            continue
        if args.only and e.name not in args.only and e.name in runs.of(follow_ups.FIRST):
            print(f"reproduce: {e.name}: read from its kept results (run it with --only {e.name} to "
                  f"resume it)", flush=True)
            continue
        print(f"reproduce: {e.name}: {e.what}", flush=True)
        failed |= run_experiment(e, ctx, setting_of(args), follow, seeds_for(args, e, ctx), folders, ROOT)
    return failed


def parse_args(argv=None):
    args = build_parser().parse_args(argv)
    check_arguments(args)
    return args


def chosen_model(args, runs: dict, trains: bool) -> Model:
    """--model as what it is, else the model the folder's kept runs record (its name in args.model), else the
    scale's; one line where a run would train a model pretrained here without its checkpoint."""
    recorded = None if args.model else kept.identity_of(runs)
    args.model = args.model or (recorded.name if recorded else DEFAULT_MODEL[args.scale])
    if recorded and trains and recorded.recipe:
        raise UserError(f"the results folder's model is {recorded.describe()}: pass --model CHECKPOINT, a folder "
                        f"whose weights hash to {recorded.weights} (a checkpoint rebuilt from the recipe is another "
                        f"model unless they do)")
    if recorded and not trains:
        return recorded
    return identify(args.model, weights_of(args.model) if trains else "")


def run(args) -> int:
    root = Path(args.results or RESULTS)
    report_path = Path(args.report) if args.report else root.parent / REPORT.name if args.results else REPORT
    runs = kept.load(root)
    trains = not (args.report_only or args.plan)
    model = chosen_model(args, runs, trains)      # the folder's model by default
    kept.check_one_setting(runs, args.scale, model.name, model.weights if trains else "")
    ctx = context(args, model, model_layers(args, runs))
    if args.plan:
        print_plan(args, ctx, model, runs)
        return 0
    failed = run_selected(args, ctx, runs, root, report_path.parent) if trains else 0
    readme = ROOT / "README.md" if report_path == REPORT else None   # the README counts the kept report only
    path = report.write(root, report_path, ctx, readme)
    print(f"reproduce: report {path}", flush=True)
    return 1 if failed else 0


def main(argv=None) -> int:
    return run_command(argv, parse_args, run, stops=(Interrupted,),
                       interrupted=lambda args: "interrupted; finished trials are kept in each sweep's folder: "
                                                "rerun the same command to resume")


if __name__ == "__main__":
    sys.exit(main())

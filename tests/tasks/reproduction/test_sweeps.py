"""sweeps.py: every experiment's and follow-up's sweeps build a SweepConfig directly, write the protocols the
kept runs record, and carry the tasks, model and task file."""
from pathlib import Path

import pytest

import reproduce
from tasks.ablation.config import SweepConfig
from tasks.ablation.study import Shape
from tasks.reproduction import experiments as reproduction
from tasks.reproduction import follow_ups, sweeps
from tasks.reproduction import kept as reproduction_runs
from tests.helpers.glue import task_file
from tests.helpers.reproduction import CTX, sweep_config


@pytest.mark.parametrize("scale", list(reproduction.SCALES))
def test_every_experiments_sweeps_build_a_sweep_config_and_list_their_trials(scale):
    ctx = reproduction.Context(6, reproduction.SCALES[scale], dict(reproduction.ROLES))
    for e in reproduction.EXPERIMENTS.values():
        seeds = reproduction.seeds_of(e, ctx.scale)
        for spec in e.sweeps(ctx):
            config = sweep_config(spec, ctx.scale, seeds=seeds)
            assert isinstance(config, SweepConfig) and config.mode == spec.mode
            trials = config.study.trials(config, Shape(num_layers=6, num_heads=12))
            assert trials, f"{e.name}/{spec.label}: no trials"
            assert {t.seed for t in trials} <= set(seeds), f"{e.name}/{spec.label}"
            assert list(config.seeds) == seeds, f"{e.name}/{spec.label}"
            assert config.plateau.patience == (3 if scale == "cpu" else 0), f"{e.name}/{spec.label}"


def test_the_kept_runs_protocols_are_the_ones_the_declarations_write():
    """run.json records each sweep as ablate.py's flags; the typed declarations write the same, so a later
    sitting of a kept run is the same protocol (kept.store refuses another)."""
    runs = reproduction_runs.load(Path(__file__).resolve().parents[3] / reproduce.RESULTS)
    checked = 0
    for label, by_experiment in runs.items():
        follow = follow_ups.FOLLOW_UPS.get(label)
        for name, (meta, _) in by_experiment.items():
            ctx = reproduction.Context(meta.layers, reproduction.SCALES[meta.scale], meta.tasks)
            # a control's own, where it has
            for spec in reproduction.EXPERIMENTS[name].sweeps_for(ctx, label, runs):
                written = sweeps.as_arguments(spec.mode, sweeps.protocol(spec, ctx.scale, follow))
                assert written == meta.sweeps[spec.label], f"{name}/{label}/{spec.label}"
                checked += 1
    assert checked >= 20


def test_every_declared_follow_up_names_real_experiments_and_its_options_reach_their_sweeps():
    for follow in follow_ups.FOLLOW_UPS.values():
        assert follow.label != follow_ups.FIRST and follow.reason and follow.protocol > 1
        for name in follow.experiments:
            e = reproduction.EXPERIMENTS[name]
            for spec in e.sweeps(CTX):
                config = sweep_config(spec, CTX.scale, follow, reproduction.seeds_of(e, CTX.scale))
                assert config.study.trials(config, Shape(num_layers=6,
                                                         num_heads=12)), f"{follow.label}/{name}"
    cap = follow_ups.FOLLOW_UPS["cap-small-data"]
    spec = reproduction.EXPERIMENTS["reinit-small"].sweeps(CTX)[0]
    # the follow-up's setting wins over the scale's
    assert sweep_config(spec, CTX.scale, cap).plateau.patience == 0


def test_tasks_model_and_task_file_reach_every_sweep(glue_dir):
    roles = reproduce.parse_roles("primary=cola,second=mrpc")
    assert roles["primary"] == "cola" and roles["second"] == "mrpc" and roles["final"] == "sts"
    assert reproduce.parse_roles("sst2,qnli")["second"] == "qnli"
    path = str(task_file(glue_dir[0]))
    args = reproduce.build_parser().parse_args(["--model", "bert-base-uncased", "--task-file", path,
                                                "--data-dir", str(glue_dir[0])])
    ctx = reproduction.Context(12, reproduction.SCALES["paper"], roles, model=args.model, task_file=path)
    spec = reproduction.EXPERIMENTS["reinit-large"].sweeps(ctx)[0]
    config = sweep_config(spec, ctx.scale, setting=reproduce.setting_of(args))
    assert config.training.tasks == "cola" and config.training.model == "bert-base-uncased"
    assert config.training.task_file == path and config.training.lr == 2e-5 and config.trial_steps == 0
    assert config.options.from_layer == (None, *range(11, 0, -1), 0) and config.fractions == (1.0,)
    assert "--lr 2e-5" in " ".join(sweeps.as_arguments(spec.mode, sweeps.protocol(spec, ctx.scale, None)))

"""Ablation sweeps: change the pretrained model, fine-tune it as train_multitask.py would, measure.

    config.py     SweepConfig: a sweep's options, typed and validated once (ablate.py builds it from its flags)
    study.py      what a study declares: Study, its typed Options (fingerprinted unless planned or drawn), Trial
    sweep.py      run a sweep: list its trials, shard, run and resume them, fit one trial, the fingerprint
    results.py    the results files: results.jsonl and the shards' results.shard-I-of-N.jsonl; a resumed
                  sweep's precision under --precision auto: its finished trials'
    workers.py    trials side by side in forked one-thread worker processes (--workers)
    plateau.py    the trials' stopping rule: a plateau on held-out rows of their own training data
    progress.py   what a running sweep prints: finished trials, running trials' progress lines
    statistics.py the unit (seed or seed pair) and the interval (plain, paired, jackknife) of every estimate
    summary.py    summary.csv, the plots and their TensorBoard run from the finished trials, and their learning curves
    drawing.py    what the studies' figures share (error bars, reference lines, legends, the metric's axis)
    perturbation.py  the null of the dynamics study's layer ratios: every layer moved by the same share of its
                  norm, compared as a fine-tuning is (python -m tasks.ablation.perturbation)
    arguments.py  option syntax (argparse converters) shared by ablate.py, reproduce.py and the studies
    studies/      one module per --mode, registered in studies/__init__.py, each with its figures (the probe
                  study a package: its features and linear probe beside it)

tasks/reproduction/ reads this package; this package never reads it.
"""

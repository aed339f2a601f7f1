"""Ablation sweeps: change the pretrained model, fine-tune it as train_multitask.py would, measure.

    sweep.py      plan, shard, run and resume a sweep: what every study shares
    workers.py    trials side by side in forked one-thread worker processes (--workers)
    progress.py   what a running sweep prints: finished trials, running trials' progress lines
    summary.py    intervals over seeds, summary.csv, plots and their TensorBoard run
    arguments.py  option syntax (argparse converters) shared by the sweep and the studies
    studies/      one module per --mode, registered in studies/__init__.py
"""

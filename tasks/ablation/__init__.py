"""Ablation sweeps: change the pretrained model, fine-tune it as train_multitask.py would, measure.

    sweep.py      plan, shard, run and resume a sweep: what every study shares
    summary.py    intervals over seeds, summary.csv, plots and their TensorBoard run
    arguments.py  option syntax (argparse converters) shared by the sweep and the studies
    studies/      one module per --mode, registered in studies/__init__.py
"""

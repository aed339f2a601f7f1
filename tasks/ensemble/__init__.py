"""Ensembles of finished runs: averaged class probabilities and scores, written as the course's files.

    python ensemble.py runs/seed-0 runs/seed-1 runs/seed-2 --out runs/ensemble
    python prepare_submit.py --predictions-dir runs/ensemble        # hand it in
    python train_multitask.py --seeds 0,1,2 --out runs/three        # train the seeds, then ensemble them

Each run's score files (RUN/predictions/scores/, written beside its prediction files) are averaged: the class
probabilities (SST, any classification task), P(1) (Quora) and the predicted scores (STS, any regression
task), with equal weight; a run older than those files has them computed from its weights. Runs that cannot be
averaged (other tasks, label sets, dev or test files, tokenizer) are refused before anything is written.

    members.py   the runs: read, checked against each other
    scores.py    their scores (read or computed), the average, its predictions and dev figures
    build.py     the ensemble's folder (predictions, scores, metrics.json, ensemble.json) and its publication
    command.py   ensemble.py's options and run (train_multitask.py --seeds runs it too)
    gain.py      python -m tasks.ensemble.gain DIR: the dev gain over the members, with a paired interval
"""
from .build import Ensembled, build_ensemble
from .command import add_ensemble_args, ensemble_runs

__all__ = ["Ensembled", "add_ensemble_args", "build_ensemble", "ensemble_runs"]

"""Everything around the model: what a task is, training, evaluation, the course's formats, a saved
run and its model folder, and the layer studies. `minbert/` (the model) knows nothing of this package.

What a task is (one declarative record per task, and its data):
    registry.py     TaskConfig: files, columns, labels, head kind, metric, prediction files, max length
    head_kinds.py   one record per head kind: labels, loss, prediction, probabilities, prediction files
    task_file.py    tasks a user declares in a JSON file of their own (--task-file)
    data.py         readers for every registered task's files
    encoded.py      splits tokenised once; batches cut from them
    heads.py        the shared encoder with a head per task (MultitaskModel), losses and predictions
    metrics.py      the metrics a task can name, and the one overall score that picks a model

Shared by every command:
    config.py       TrainConfig: every training option as one frozen value (SMART's constants included)
    schedules.py    the learning-rate schedules, one table
    inputs.py       RunInputs, prepare: the encoder, tokenizer and tokenised data, loaded once
    evaluation.py   predict, evaluate, and the prediction files of every task
    machine.py      device, autocast, the CPU's name, package versions
    distributed.py  torchrun: the world of processes, its collectives
    fileio.py       crash-safe writes
    cli.py          the command-line runner: arguments in, one line and an exit status for what went wrong
    openmp.py       imported first by the entry points: OMP_WAIT_POLICY before torch loads

training/       fine-tuning: the loop, its steps, checkpoints, outputs, callbacks, options (see its __init__)
pretraining/    masked-language-model pretraining (pretrain.py): the corpus, its cache, masking, a job of the loop
course/         the course's prediction-file formats, the provenance of the course-level predictions/
                folder's files and the zip that refuses what the course would not take, the starter
                repository's data files
saved/          a run as saved on disk: rebuilt to predict, its checkpoint files read safely, its
                RUN_DIR/model/ export (Hugging Face format, model card), the user's own sentences to score
ablation/       the layer studies (ablate.py): sweeps, statistics, summaries, one module per study in
                studies/ (its figures and helpers with it)
search/         the recipe search (search.py) on Optuna: the space with the trainer's defaults, the study's
                storage, sampler, pruner and heartbeat, each trial a run of the trainer's own command
reproduction/   the papers' findings tested by ablation sweeps (reproduce.py): declarations, measures,
                verdicts, experiments, follow-ups, the kept results and report.md

Inference (`predict.py`) never loads training/ (tests/scripts/test_layout.py holds it so); the training
commands and the studies' sweeps call into training/ only through the names its __init__ exports.
"""

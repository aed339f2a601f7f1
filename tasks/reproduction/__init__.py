"""The reproduction: the five papers' headline findings, tested by ablation sweeps (reproduce.py).

    findings/      one module per paper: each finding quoted, with its measure, SESOI and experiment; history.py
                   dates each line's declaration and every change to its rule; verdicts.py: what a finding is and
                   the rule that decides it
    experiments.py the experiments (their sweeps' settings), scales and task roles; follow_ups.py: labelled runs
                   after the first, each declared with its reason before it runs, and the registered confirmatory run
    measures.py    each finding's signed effect from its experiments' finished trials (arms.py: two training arms
                   compared; probes.py: the best probe layer; null_baseline.py: the layer ratios' kept null)
    power.py       what each line's design can decide at its n, from the model's pilot (judging.pilot_of: another
                   model's pilot run); plan.py: an experiment's minutes, trials x steps x a measured seconds a step
    sweeps.py      an experiment's sweeps run through tasks/ablation's sweep API; kept.py: one typed KeptRun per
                   run and each sweep's finished trials, kept with the report
    judging.py     a results folder's verdicts on its kept runs and each line's headline; record.py: a report line
                   as typed data; lines.py, front.py, curves.py, report.py: the report (report.md's front page, a
                   page per paper, runs.md, report.json, README's counts)

One results folder holds one model's runs and gets one report. This package imports tasks/ablation (the sweep API,
its statistics, the perturbation that measures the null); tasks/ablation never imports it.
"""

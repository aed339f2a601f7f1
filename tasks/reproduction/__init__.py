"""The reproduction: the five papers' headline findings, tested by ablation sweeps (reproduce.py).

    findings/      one module per paper: each finding quoted, with its measure (a function, with keywords), its
                   smallest effect of interest and its experiment, declared before any run
    verdicts.py    what a finding is (Finding), and the rule that decides it
    power.py       what each line's design can decide at its n; "underpowered"
    measures.py    each measure: a finding's signed effect from its experiments' finished trials (arms.py: two
                   training arms compared, with their steps; a quote's pending part)
    lines.py       each line's disclosure, what decides it, its report.json record
    probes.py      the probe run's scores, the best probe layer, and the measure that re-draws it alone
    null_baseline.py  the layer ratios' null: an equal relative perturbation of every layer (--pairs: its pair
                   form, two perturbed copies compared)
    plan.py        an experiment's or follow-up's minutes: trials x steps x a measured seconds a step
    experiments.py the experiments (their sweeps' typed settings; `controls`: a follow-up's own sweeps in
                   their place), scales and task roles
    follow_ups.py  labelled runs after the first, each declared with its reason before it runs
    sweeps.py      an experiment's sweeps built as SweepConfigs and run through tasks/ablation's sweep API
    kept.py        the raw results kept with the report: one typed KeptRun per run (run.json: its protocol, where
                   and from which weights its trials trained, its sittings) and each sweep's finished trials
    models.py      which model a run's results are for: the first at the results folder's root, another in
                   models/SLUG (named by its folder and hash), each with its own pilot
    judging.py     a model's verdicts on its kept runs (power from its own pilot), what decides them, counts
    compare.py     another model's verdict beside the first's on every line, and where they disagree
    curves.py      a kept run's budget and learning curves, as the report shows them
    report.py      report.md and report.json from the kept results (reproduce.py --report-only), and the
                   README's counts

This package imports tasks/ablation (the sweep API, its statistics); tasks/ablation never imports it.
"""

"""The studies `ablate.py --mode` runs: one module each, named after its mode.

A study module reads top to bottom: a docstring naming its paper and protocol,
`add_arguments(group)` (its flags, refused with any other mode) and `Options` (the
same as a frozen dataclass: every field is in the sweep's fingerprint unless it is
`planned` (it only chooses the trials, whose labels name it) or `drawn` (figures
only): tasks/ablation/study.py), `trials(config, shape)` (its trials for a
SweepConfig; layers or heads the model lacks are a UserError there, before any
trial runs), `run(sweep, trial)` (change a copy of the encoder, `sweep.fit` it),
its figure functions and `figures(...)` (drawn with tasks/ablation/drawing.py),
and last `STUDY`, a `Study` that names them. Adding a study: a new module here,
and its name in NAMES.
"""
import importlib

# --mode's choices, in --help's order
NAMES = ("reinit", "permute", "probe", "transfer", "dynamics", "restore", "methods", "pretraining")

STUDIES = {name: importlib.import_module(f"{__name__}.{name}").STUDY for name in NAMES}

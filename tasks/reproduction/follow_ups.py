"""Follow-ups: labelled runs after an experiment's first, each declared here with its reason before it runs.

Extra seeds or a changed protocol never replace the first run's trials: a follow-up's run is kept beside
them (kept.py) and its verdicts are reported beside the first's, under its own protocol number.
"""
from dataclasses import dataclass

FIRST = "first"


@dataclass(frozen=True)
class FollowUp:
    """A labelled run after the first: its own seeds or options, the reason, declared before it runs."""
    label: str
    experiments: tuple
    reason: str
    seeds: tuple = ()            # () = the first run's
    changes: tuple = ()          # (name, value) settings added to every sweep of its experiments
    protocol: int = 2


FOLLOW_UPS: dict = {f.label: f for f in (  # label -> FollowUp, each declared before it runs
    FollowUp("cap-small-data", ("reinit-small", "task-dependence", "dynamics", "transfer"),
             "at fraction 0.03 SST keeps 26 held-out sentences and Quora 48, 0.038 and 0.021 of accuracy each "
             "against the plateau's tolerance of 0.005, so the first run's trials there stopped when a few "
             "sentences flipped rather than on a plateau (the report's learning curves, 2026-11-26); every trial "
             "of the experiments with accuracy-task trials at 0.03 trains the cap instead, whatever their first "
             "verdicts",
             changes=(("plateau_patience", 0),)),
    FollowUp("cap-multitask", ("methods",),
             "the multitask trials' held-out score (the mean over three tasks) moved 0.01-0.03 between "
             "evaluations, against the plateau's tolerance of 0.005, and its curves were still rising at many "
             "stops; the gradient-surgery arm stopped at 200-320 steps in four of five seeds against the "
             "baseline's 360-480, so the first run's comparison partly measures when each arm stopped (the "
             "report's learning curves, 2026-11-26); every trial trains the cap instead, whatever the verdicts",
             changes=(("plateau_patience", 0),)),
)}

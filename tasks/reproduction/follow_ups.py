"""Follow-ups: labelled runs after an experiment's first, each declared here with its reason before it runs.

Extra seeds or a changed protocol never replace the first run's trials: a follow-up's run is kept beside
them (kept.py) and its verdicts are reported beside the first's, under its own protocol number. A follow-up
trains its experiments' sweeps with its `changes`, or sweeps of its own in their place where the experiment
declares them (`Experiment.controls`, experiments.py); one that re-declares its findings (`declares`) is judged on
those findings only.
"""
from dataclasses import dataclass

from .findings.freeze import SMART_ALONE
from .findings.tamkin import NOT_NECESSARY

FIRST = "first"


@dataclass(frozen=True)
class FollowUp:
    """A labelled run after the first: its own seeds or options, the reason, declared before it runs."""
    label: str
    experiments: tuple
    reason: str
    words: str = ""              # what it changed, as the front page's sensitivity cell says it ("lr 2e-5")
    seeds: tuple = ()            # () = the first run's
    changes: tuple = ()          # (name, value) settings added to every sweep of its experiments
    protocol: int = 2
    findings: tuple = ()         # the findings it decides between explanations for ((): its experiments' all)
    reads: str = ""              # a run whose kept trials it re-reads instead of training ("": it trains its own)
    declares: tuple = ()         # its findings re-declared (same quote, its own measure and SESOI) in their place;
    #                              a follow-up that re-declares is judged on its `findings` only
    over: tuple = ()             # follow-ups whose kept runs its lines read in place of the first's, for the
    #                              experiments it does not train (its reason says which arms it pairs with)
    seeds_by: tuple = ()         # (experiment, seeds): its own seeds per experiment, in place of `seeds`
    registered: str = ""         # a confirmatory run's registration date: its verdict becomes its lines' headline
    model: str = ""              # the one model a registered run is for ("": any)

    def seeds_for(self, experiment: str) -> tuple:
        """The seeds it trains `experiment` at (() = the first run's)."""
        return dict(self.seeds_by).get(experiment, self.seeds)


def _fresh(n: int) -> tuple:
    """n seeds no kept run used (the kept runs' are 0-4: tests/tasks/reproduction/test_history.py checks)."""
    return tuple(range(100, 100 + n))


# The confirmatory run, registered before it trains (this declaration's commit is its registration): the lines whose
# rule changed after their data (findings/history.py) that the budget allows, and the cheapest underpowered ones, on
# fresh seeds; each experiment's n is the largest its registered lines need by the power rule from the first run's
# spread (power.needs; the test recomputes it), minutes from `reproduce.py --plan` at 0.23 s a step on two cores.
# Cut, past the budget of about 8 hours on two cores: tamkin-permute (needs 34: ~450 min), college-heads-top-help
# (23: ~400), college-heads-bottom-hurt (10: ~175), hao-attention-last (72 dynamics seeds: ~190),
# hao-seeds-consistent-low (203), hao-datasets-consistent-low (123: ~490), freeze-marginal-sst-quora (62: ~500),
# freeze-surgery-no-effect (31: ~210), college-intermediate-task (224), college-not-monotone (123),
# college-not-constant (39), singh-probe-needs-more (undecidable at this scale); and mini-20M's revised lines (no
# confirmatory run of that model is registered). Their headline stays their first run's, read as revised.
CONFIRMATORY = FollowUp(
    "confirmatory", ("reinit-small", "reinit-large", "probe", "dynamics", "pairs", "methods"),
    "the lines whose rule changed after their first run's data (the report's 'revised after its data') are decided "
    "again on fresh seeds, n from the first run's spread by the power rule, with the cheapest underpowered lines; "
    "registered 2026-11-28, before any of its trials",
    words="the confirmatory run",
    findings=("singh-later-layers-move", "hao-svcca-intermediate-last", "freeze-cross-encoding", "singh-probe-peak",
              "singh-abstract-supervised", "tamkin-data-size", "singh-data-size", "freeze-smart-multitask"),
    seeds_by=(("reinit-small", _fresh(14)), ("reinit-large", _fresh(14)), ("probe", _fresh(14)),
              ("dynamics", _fresh(18)), ("pairs", _fresh(5)), ("methods", _fresh(12))),
    registered="2026-11-28", model="minilm")
PLANNED_MINUTES = 421   # `reproduce.py --plan`'s total on two cores: 419 at registration with the pasted 0.23 s a step,
#                         421 with the rate computed from the kept runs (0.2313 s); seeds and n unchanged.
#                         A history: the planner times probes and comparisons since 2026-11-29
FOLLOW_UPS: dict = {f.label: f for f in (  # label -> FollowUp, each declared before it runs
    CONFIRMATORY,
    FollowUp("cap-small-data", ("reinit-small", "task-dependence", "dynamics", "transfer"),
             "at fraction 0.03 SST keeps 26 held-out sentences and Quora 48, 0.038 and 0.021 of accuracy each "
             "against the plateau's tolerance of 0.005, so the first run's trials there stopped when a few "
             "sentences flipped rather than on a plateau (the report's learning curves, 2026-11-26); every trial "
             "of the experiments with accuracy-task trials at 0.03 trains the cap instead, whatever their first "
             "verdicts",
             changes=(("plateau_patience", 0),),
             words="the small-data cap"),
    FollowUp("cap-multitask", ("methods",),
             "the multitask trials' held-out score (the mean over three tasks) moved 0.01-0.03 between "
             "evaluations, against the plateau's tolerance of 0.005, and its curves were still rising at many "
             "stops; the gradient-surgery arm stopped at 200-320 steps in four of five seeds against the "
             "baseline's 360-480, so the first run's comparison partly measures when each arm stopped (the "
             "report's learning curves, 2026-11-26); every trial trains the cap instead, whatever the verdicts",
             changes=(("plateau_patience", 0),),
             words="the multitask cap"),
    FollowUp("cap-large-data", ("reinit-large",),
             "the derived lines (tamkin-data-size, singh-data-size, the probe lines) difference a fraction-0.03 arm "
             "trained to the cap (cap-small-data) against a fraction-0.25 arm stopped on a plateau (200-520 "
             "steps); with both at the cap the difference is of data, not of stopping rules",
             changes=(("plateau_patience", 0),),
             over=("cap-small-data",),
             findings=("tamkin-data-size", "singh-data-size", "college-downstream-smaller-drop",
                       "college-not-monotone"),
             words="the large-data cap"),
    FollowUp("transfer-siamese", ("transfer",),
             "the intermediate task teaches a bi-encoder the cross-encoding format (direct STS 0.51-0.69 against "
             "its zero-shot 0.838): in siamese mode, with the paper's heads, the model keeps its own format and "
             "only the task transfers",
             changes=(("pair_mode", "siamese"), ("task_heads", "report")), findings=("college-intermediate-task",),
             words="siamese transfer"),
    FollowUp("equal-epochs", ("reinit-small", "reinit-large", "dynamics"),
             "the papers' data-size arms train the same epochs (3), so more data is more steps; the cpu scale's "
             "arms stop on a plateau or at one cap: 3 epochs at each fraction, every trial to its end",
             changes=(("trial_steps", 0), ("epochs", 3), ("plateau_patience", 0)),
             findings=("tamkin-data-size", "singh-data-size", "singh-more-data-moves-more", "singh-scarce"),
             words="equal epochs"),
    FollowUp("lr-2e-5", ("reinit-small", "reinit-large", "permute", "blocks", "dynamics", "restore", "transfer",
                         "heads-top", "heads-bottom"),
             "every --scale cpu trial ran at lr 1e-4 where Singh & Giovanardi, Tamkin et al. and BERT Goes to "
             "College fine-tuned at 2e-5 (Hao et al. 1e-5 to 3e-5): the same lines at the papers' rate",
             changes=(("lr", 2e-5),),
             words="lr 2e-5"),
    FollowUp("freeze-paper-schedule", ("freeze",),
             "Freeze Your Layers' mechanism is overfitting over 9 epochs at 1e-4; here every arm stopped after "
             "160-560 steps at the model's STS ceiling (0.853-0.864): the paper's schedule, every trial to its end",
             changes=(("trial_steps", 0), ("epochs", 9), ("lr", 1e-4), ("plateau_patience", 0)),
             findings=("freeze-improves-sts", "freeze-marginal-sst-quora"),
             words="the paper's schedule"),
    FollowUp("task-dependence-matched", ("task-dependence",),
             "the second task's arm trains on 437 Quora rows against SST's 230 (the paper matched about 670 on "
             "each): the second task at the fraction that gives SST's row count",
             changes=(("data_fractions", (0.0158,)),), findings=("singh-task-dependence",),
             words="matched data sizes"),
    FollowUp("tamkin-not-necessary", ("reinit-large",),
             "the 'not necessary' half of Tamkin's probing sentence: only the best probe layer re-drawn (every "
             "other layer pretrained) against the full model",
             findings=("tamkin-probe-not-necessary",), declares=(NOT_NECESSARY,),
             words="its own sweep"),
    FollowUp("smart-alone", ("methods",),
             "the 'other tasks in isolation' half of Freeze Your Layers' SMART sentence: SST alone and Quora alone, "
             "with and without SMART", findings=("freeze-smart-alone",),
             declares=(SMART_ALONE,),
             words="each task alone"),
)}

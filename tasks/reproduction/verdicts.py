"""What a paper's finding is, as data, and the rule that decides it: declared before the data, able to fail.

A `Finding` quotes the paper's sentence exactly (file in ../shared/papers/), says the paper's setting
and its comparison, names its measure (measures.py) with its keywords, and fixes the smallest effect of
interest (SESOI) with its reason. Its effect is
signed so that the paper's direction is positive. The verdict of a 95% interval [low, high] with
point estimate m, for a direction:

- reproduced: low > 0 and m >= SESOI (the interval excludes no effect, and the best estimate
  reaches the smallest effect that matters; "reaches" is the point estimate, not the upper bound,
  so an effect only compatible with mattering is not enough);
- not reproduced: high < SESOI (absent, reversed, or too small to matter; this includes a real
  but negligible effect, 0 < low <= high < SESOI);
- inconclusive: anything else (the interval holds zero and reaches the SESOI, or m < SESOI <= high
  with low > 0).

For a finding of "no effect" (an equivalence, `kind="equivalence"`, SESOI the margin) the interval is
the 90% one (TOST: two one-sided tests at 5% each): reproduced when it lies within (-SESOI, +SESOI);
not reproduced when it lies wholly outside (low >= SESOI or high <= -SESOI); inconclusive otherwise.

A finding measured on several rows (pairs of tasks, layers, parts of its quote) says by `combine` how
rows make its verdict, and each side of it is the test its claim needs:

- "all" (every row must hold): reproduced when every row is, each at its own level (intersection-union:
  no correction); not reproduced when some row is, at 1 - alpha / rows (Bonferroni: "some row fails" is a
  union);
- "any" (the paper found cases): reproduced when some row is at 1 - alpha / rows (Bonferroni), not
  reproduced when every row is at its own level (intersection-union).

A row that is a part of the quote not measured yet is pending (`Row.pending` names the follow-up that
would measure it): it keeps an "all" finding from reading reproduced and an "any" one from reading not
reproduced. A line whose design cannot reach both verdicts at its n, and whose interval is inconclusive,
reads "underpowered" (power.py), a category of its own.
"""
import math
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..ablation.statistics import at_level

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, UNDERPOWERED, NOT_RUN, NOT_TESTABLE = \
    "reproduced", "not reproduced", "inconclusive", "underpowered", "not run yet", "not testable here"
UNDECIDABLE = "undecidable at this scale"   # underpowered past what a GPU day's seeds could decide (power.py)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, UNDERPOWERED, UNDECIDABLE)



@dataclass(frozen=True)
class Power:
    """A line's power figure: what its design calls reproduced and not reproduced at its n (80% power);
    power.py computes it, here beside the Verdict that holds it."""
    n: Optional[int] = None                 # None only where not computed
    sd: Optional[float] = None              # None without an sd to compute it from
    powered: bool = False
    # a direction line's (and any line without an sd, both None there); None on an equivalence line
    reproduced_from: Optional[float] = None
    not_reproduced_below: Optional[float] = None
    # an equivalence line's (TOST); None on a direction line
    reproduced_within: Optional[float] = None
    not_reproduced_beyond: Optional[float] = None
    # assess's, of a finding's weakest row; None on reach's bare design
    pilot_sd: Optional[float] = None        # None where the pilot lacks the line's effects
    needs: Optional[int] = None             # None beyond MAX_N or without an sd
    achieved_sd: Optional[float] = None     # the run's own; None before a run
    rows: Optional[int] = None
    day: Optional[int] = None               # the seeds a GPU day gives its experiments; None where not given
    not_computed: Optional[str] = None      # why not, where the model has no pilot (then nothing else is set)

    def to_json(self) -> dict:
        """The keys report.json keeps: the figures of the line's kind, assess's where assessed, day where
        given."""
        if self.not_computed:
            return {"not_computed": self.not_computed}
        equivalence = self.reproduced_within is not None
        keys = ("n", "sd", "powered", *(("reproduced_within", "not_reproduced_beyond") if equivalence
                                         else ("reproduced_from", "not_reproduced_below")),
                *(("pilot_sd", "needs", "achieved_sd", "rows") if self.rows is not None else ()),
                *(("day",) if self.day is not None else ()))
        return {k: _number(getattr(self, k)) for k in keys}

    @classmethod
    def from_json(cls, data: Optional[dict]) -> Optional["Power"]:
        return cls(**data) if data is not None else None


def _number(x):
    """A float as JSON has it (None for nan or infinity); anything else as it is."""
    return (float(x) if math.isfinite(x) else None) if isinstance(x, float) else x


@dataclass(frozen=True)
class Revision:
    """A dated change to a line's rule (or its declaration): findings/history.py."""
    date: str                      # the commit's date, UTC, "YYYY-MM-DD HH:MM"
    commit: str                    # its hash prefix ("" for the change the commit that writes it makes)
    what: str                      # what changed
    before: str                    # what the line read before it ("" for a declaration)


@dataclass(frozen=True)
class Finding:
    """One headline finding of one paper (its declaration and any later change to its rule: findings/history.py)."""
    id: str                        # stable: the report's anchor and the results' key
    paper: str                     # the paper's file in ../shared/papers/
    quote: str                     # the sentence that states it, exactly as in the paper's text
    setting: str                   # the paper's model, task, data size and schedule
    comparison: str                # the comparison as the paper made it
    metric: str
    sesoi: float                   # smallest effect of interest, in the metric's unit, fixed in advance
    sesoi_reason: str
    tested: str                    # what is measured here, signed so that the paper's direction is positive
    model_note: str                # what the embedded all-MiniLM-L6-v2 can and cannot carry for it
    experiment: Optional[str] = None   # the experiment whose results decide it; None: not testable here
    measure: Optional[Callable] = None   # its measure, a function of measures.py (called with `keywords`)
    keywords: dict = field(default_factory=dict)
    untestable: str = ""           # why not, when experiment is None (or what part is not)
    elsewhere: str = ""            # the command that would test it where it can be (GPU, bert-base, GLUE)
    kind: str = "direction"        # "direction" or "equivalence"
    combine: str = "single"        # "single", "any" or "all" over the measured rows
    protocol: int = 1              # a changed protocol or extra seeds is a new declaration with protocol + 1
    pilot: tuple = ()              # power.PILOT_SD keys whose effects make this line's (its sd before any run)
    sesoi_from_pilot: bool = False  # the 2026-11-24 pilot's spread informed the SESOI (said in the report)
    claim: str = ""                # its short name on the front page (findings/__init__.py)
    declared: Optional[Revision] = None   # the commit that declared it (findings/history.py)
    revisions: tuple = ()          # Revision, oldest first: each later change to its rule

    @property
    def rule_date(self) -> str:
        """The date of the commit that last changed its rule (its declaration's where none did)."""
        return max([r.date for r in self.revisions] + [self.declared.date if self.declared else ""])


@dataclass(frozen=True)
class Estimate:
    """An effect with its interval: tasks/ablation/statistics.py's figures, read once (`of`) where a row is
    made."""
    # its units (seeds); None on a report line's row read back (front.estimate_of)
    n: Optional[int]
    mean: Optional[float]          # nan (None read back) where nothing could be measured
    std: Optional[float] = None    # one unit's spread; None (and no interval) where one unit gives none
    low: Optional[float] = None    # the interval at `level`; None without a spread
    high: Optional[float] = None
    df: Optional[float] = None     # its degrees of freedom; None without a spread
    level: float = 0.95

    @classmethod
    def of(cls, found: Optional[dict]) -> Optional["Estimate"]:
        """statistics' {"n", "mean", "std", "ci95_low", "ci95_high"} (with "df" where it has a spread, "level"
        where not 95%) as an Estimate; None for None."""
        if found is None:
            return None
        return cls(found["n"], found["mean"], found["std"], found["ci95_low"], found["ci95_high"],
                   found.get("df"),
                   found.get("level", 0.95))

    def at(self, level: float) -> "Estimate":
        """The same estimate's two-sided interval at `level` (statistics.at_level); itself without a
        spread."""
        if self.std is None or (self.n or 0) < 2:
            return self
        figures = {"n": self.n, "mean": self.mean, "std": self.std, "ci95_low": self.low,
                   "ci95_high": self.high,
                   **({"df": self.df} if self.df is not None else {}),
                   **({"level": self.level} if self.level != 0.95 else {})}
        return Estimate.of(at_level(figures, level))


@dataclass
class Row:
    """One measured effect of a finding: its label and interval, the paper's direction +. A measure hands it
    statistics' dict (tasks/ablation/statistics.py), read here as an Estimate."""
    label: str
    estimate: Optional[Estimate]
    verdict: str = ""
    pending: str = ""              # a part of the quote not measured yet: the follow-up that would measure it
    adjusted: Optional[Estimate] = None  # the Bonferroni interval, where a side of `combine` needs it

    def __post_init__(self):
        if isinstance(self.estimate, dict):
            self.estimate = Estimate.of(self.estimate)


@dataclass
class Verdict:
    """A finding's verdict on one run."""
    finding: Finding
    run: str                       # the run's label: "first" or a follow-up's
    rows: list = field(default_factory=list)
    outcome: str = NOT_RUN
    power: Optional[Power] = None   # power.assess: what the design can decide at its n
    reads: tuple = ()              # ((experiment, run label), ...) whose trials its rows read


def decide(estimate: Optional[Estimate], sesoi: float, kind: str = "direction") -> str:
    """The verdict of one interval (95%, or 90% for an equivalence; the effect signed so that the paper's direction
    is positive)."""
    if not estimate:
        return NOT_RUN
    low, high, mean = estimate.low, estimate.high, estimate.mean
    if low is None or high is None or mean is None or not all(map(math.isfinite, (low, high, mean))):
        return INCONCLUSIVE
    if kind == "equivalence":
        if -sesoi < low and high < sesoi:
            return REPRODUCED
        return NOT_REPRODUCED if low >= sesoi or high <= -sesoi else INCONCLUSIVE
    if kind != "direction":
        raise ValueError(kind)
    if high < sesoi:
        return NOT_REPRODUCED
    return REPRODUCED if low > 0 and mean >= sesoi else INCONCLUSIVE


def level_of(kind: str) -> float:
    """The interval a kind reads: 95% for a direction, 90% for an equivalence (TOST)."""
    return 0.90 if kind == "equivalence" else 0.95


def _combine(finding: Finding, rows: list, measured: list) -> str:
    """"any": one row at Bonferroni's level reproduces it, every row at its own fails it; "all" the other way round."""
    if finding.combine == "single":
        return measured[0].verdict
    one, every = (REPRODUCED, NOT_REPRODUCED) if finding.combine == "any" else (NOT_REPRODUCED, REPRODUCED)
    if any(decide(r.adjusted, finding.sesoi, finding.kind) == one for r in measured):
        return one
    pending = any(r.pending for r in rows)
    return every if not pending and all(r.verdict == every for r in measured) else INCONCLUSIVE


def judge(finding: Finding, run: str, rows: list) -> Verdict:
    """Each row's verdict at its kind's level, and the finding's by its `combine` (module docstring)."""
    if finding.experiment is None:
        return Verdict(finding, run, [], NOT_TESTABLE)
    measured = [r for r in rows if r.estimate and not r.pending]
    level = level_of(finding.kind)
    for r in rows:
        if r.pending:
            r.verdict = NOT_RUN
            continue
        r.estimate = r.estimate.at(level) if r.estimate else None
        r.adjusted = r.estimate.at(1 - (1 - level) / len(measured)) if len(measured) > 1 and r.estimate \
            else r.estimate
        r.verdict = decide(r.estimate, finding.sesoi, finding.kind)
    if not measured:
        return Verdict(finding, run, rows, NOT_RUN)
    return Verdict(finding, run, rows, _combine(finding, rows, measured))

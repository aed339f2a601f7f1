"""What a paper's finding is, as data, and the rule that decides it: fixed before any run, able to fail.

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

For a finding of "no effect" (an equivalence, `kind="equivalence"`, SESOI the margin):
reproduced when the whole interval lies within (-SESOI, +SESOI); not reproduced when it lies
wholly outside (low >= SESOI or high <= -SESOI); inconclusive otherwise.

A finding measured on several rows (pairs of tasks, layers) at once corrects for the choice:
each row's interval is widened to 1 - 0.05 / rows (Bonferroni), and `combine` says how rows make
the finding's verdict: "any" (the paper found cases: reproduced when a row is, not reproduced
when every row is), "all" (every row must hold).
"""
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE = \
    "reproduced", "not reproduced", "inconclusive", "not run yet", "not testable here"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
PAPERS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "papers"


@dataclass(frozen=True)
class Finding:
    """One headline finding of one paper, declared before the run."""
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
    measure: str = ""              # its measure's name in measures.MEASURES (called with `keywords`)
    keywords: dict = field(default_factory=dict)
    untestable: str = ""           # why not, when experiment is None (or what part is not)
    elsewhere: str = ""            # the command that would test it where it can be (GPU, bert-base, GLUE)
    kind: str = "direction"        # "direction" or "equivalence"
    combine: str = "single"        # "single", "any" or "all" over the measured rows
    protocol: int = 1              # a changed protocol or extra seeds is a new declaration with protocol + 1


@dataclass
class Row:
    """One measured effect of a finding: its label and interval (statistics' dict), the paper's direction +."""
    label: str
    estimate: Optional[dict]
    verdict: str = ""


@dataclass
class Verdict:
    """A finding's verdict on one run."""
    finding: Finding
    run: str                       # the run's label: "first" or a follow-up's
    rows: list = field(default_factory=list)
    outcome: str = NOT_RUN


def decide(estimate: Optional[dict], sesoi: float, kind: str = "direction") -> str:
    """The verdict of one 95% interval (the effect signed so that the paper's direction is positive)."""
    if not estimate:
        return NOT_RUN
    low, high, mean = estimate.get("ci95_low"), estimate.get("ci95_high"), estimate.get("mean")
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


def widen(estimate: Optional[dict], rows: int) -> Optional[dict]:
    """The t-interval at 1 - 0.05 / rows instead of 95% (Bonferroni over the rows a finding tests at once)."""
    if not estimate or rows <= 1 or estimate.get("std") is None or estimate.get("n", 0) < 2:
        return estimate
    from scipy import stats
    n, df = estimate["n"], estimate.get("df", estimate["n"] - 1)
    half = float(stats.t.ppf(1 - 0.025 / rows, df)) * estimate["std"] / math.sqrt(n)
    return {**estimate, "ci95_low": estimate["mean"] - half, "ci95_high": estimate["mean"] + half,
            "level": 1 - 0.05 / rows}


def judge(finding: Finding, run: str, rows: list) -> Verdict:
    """Each row's verdict (widened for several rows) and the finding's, by its `combine`."""
    if finding.experiment is None:
        return Verdict(finding, run, [], NOT_TESTABLE)
    measured = [r for r in rows if r.estimate]
    for r in rows:
        r.estimate = widen(r.estimate, len(measured))
        r.verdict = decide(r.estimate, finding.sesoi, finding.kind)
    outcomes = [r.verdict for r in measured]
    if not outcomes:
        return Verdict(finding, run, rows, NOT_RUN)
    if finding.combine == "any":
        outcome = REPRODUCED if REPRODUCED in outcomes else \
            NOT_REPRODUCED if all(o == NOT_REPRODUCED for o in outcomes) else INCONCLUSIVE
    elif finding.combine == "all":
        outcome = NOT_REPRODUCED if NOT_REPRODUCED in outcomes else \
            REPRODUCED if all(o == REPRODUCED for o in outcomes) else INCONCLUSIVE
    else:
        outcome = outcomes[0]
    return Verdict(finding, run, rows, outcome)


def normalise(text: str) -> str:
    """Whitespace collapsed, so a quote matches across the paper's line breaks."""
    return re.sub(r"\s+", " ", text).strip()


def quote_in_paper(finding: Finding, papers_dir: Path = PAPERS_DIR) -> Optional[bool]:
    """Whether the finding's quote is verbatim in its paper's text; None when the paper's file is absent."""
    path = Path(papers_dir) / finding.paper
    if not path.exists():
        return None
    return normalise(finding.quote) in normalise(path.read_text(encoding="utf-8"))

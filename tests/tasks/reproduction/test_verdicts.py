"""verdicts.py: the rule on constructed intervals (a direction against its SESOI, an equivalence within its
margin), rows combined by intersection-union or Bonferroni as each side needs, an equivalence read at 90%
(TOST)."""
import math
from dataclasses import replace

import pytest

from tasks.reproduction.findings import BY_ID
from tasks.reproduction.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    NOT_TESTABLE,
    REPRODUCED,
    Estimate,
    Row,
    decide,
    judge,
)


def _interval(low, high, mean=None):
    return Estimate(5, (low + high) / 2 if mean is None else mean, 1.0, low, high)


def test_the_rule_gives_each_verdict_on_constructed_intervals():
    sesoi = 0.02
    # above 0, estimate reaches SESOI
    assert decide(_interval(0.01, 0.05, 0.03), sesoi) == REPRODUCED
    # real but bounded below the SESOI
    assert decide(_interval(0.005, 0.015), sesoi) == NOT_REPRODUCED
    assert decide(_interval(-0.05, -0.01), sesoi) == NOT_REPRODUCED            # reversed
    # absent: all of it below the SESOI
    assert decide(_interval(-0.01, 0.01), sesoi) == NOT_REPRODUCED
    assert decide(_interval(-0.01, 0.05), sesoi) == INCONCLUSIVE               # holds 0 and the SESOI
    # "reaches" is the point estimate: above zero but the best estimate short of the SESOI is not enough
    assert decide(_interval(0.001, 0.03, 0.015), sesoi) == INCONCLUSIVE
    assert decide(_interval(0.001, 0.03, 0.02), sesoi) == REPRODUCED
    assert decide(Estimate(1, 0.3), sesoi) == INCONCLUSIVE
    assert decide(None, sesoi) == NOT_RUN


def test_an_equivalence_is_reproduced_inside_the_margin_and_not_outside_it():
    assert decide(_interval(-0.005, 0.008), 0.01, "equivalence") == REPRODUCED
    assert decide(_interval(0.012, 0.03), 0.01, "equivalence") == NOT_REPRODUCED
    assert decide(_interval(-0.04, -0.01), 0.01, "equivalence") == NOT_REPRODUCED
    assert decide(_interval(-0.02, 0.005), 0.01, "equivalence") == INCONCLUSIVE


def test_several_rows_combine_by_intersection_union_and_bonferroni_where_each_side_needs_it():
    any_finding = BY_ID["college-not-monotone"]
    one = Estimate(5, 0.03, 0.01, 0.0176, 0.0424)
    alone = judge(any_finding, "first", [Row("a", one)])
    assert alone.outcome == REPRODUCED
    # "some row reverses" is a union: each row at 1 - 0.05/6 (Bonferroni); the row's own interval is unchanged
    six = judge(any_finding, "first", [Row(str(i), one) for i in range(6)])
    assert six.rows[0].adjusted.low < one.low
    assert six.rows[0].estimate.low == pytest.approx(one.low, abs=1e-4)
    # "every row fails" is an intersection-union test: each row at its own 95%, no correction
    flat = Estimate(5, 0.0, 0.005, -0.0062, 0.0062)
    assert judge(any_finding, "first", [Row(str(i), flat) for i in range(6)]).outcome == NOT_REPRODUCED
    all_finding = BY_ID["freeze-cross-encoding"]
    mixed = judge(all_finding, "first", [Row("sts", Estimate(5, 0.04, 0.005, 0.03, 0.05)),
                                         Row("quora", Estimate(5, -0.01, 0.005, -0.02, 0.0))])
    assert mixed.outcome == NOT_REPRODUCED
    both = judge(all_finding, "first", [Row(t, Estimate(5, 0.03, 0.005, 0.0238, 0.0362)) for t in ("sts",
                                                                                                   "quora")])
    # every row at its own 95%: the intersection-union needs no correction
    assert both.outcome == REPRODUCED
    # a part of the quote not measured yet keeps an all-rows finding from reading reproduced
    pending = judge(all_finding, "first", [*both.rows, Row("a part not run", None, pending="some-follow-up")])
    assert pending.outcome == INCONCLUSIVE and pending.rows[-1].verdict == NOT_RUN
    assert judge(BY_ID["college-wnli"], "first", []).outcome == NOT_TESTABLE


def test_an_equivalence_reads_the_90_percent_interval_tost():
    finding = BY_ID["freeze-smart-multitask"]
    estimate = Estimate(5, 0.0, 0.007, df=4)
    row = judge(finding, "first", [Row("a", estimate)]).rows[0]
    assert row.estimate.level == 0.90
    assert row.estimate.high == pytest.approx(2.131847 * 0.007 / math.sqrt(5), abs=1e-6)
    # the 95% interval (+/- 0.0087) would also fit; at sd 0.0085 only the 90%
    assert row.verdict == REPRODUCED
    wider = judge(finding, "first", [Row("a", replace(estimate, std=0.0085))]).rows[0]
    assert wider.verdict == REPRODUCED and 2.776445 * 0.0085 / math.sqrt(5) > 0.01


def test_a_two_row_equivalences_bonferroni_interval_says_its_own_level():
    """Each row of a two-row equivalence reads its 90% interval; Bonferroni's is 1 - 2 x 0.05 / 2 = 95%, and
    says so: the row's 90% is not carried over to it."""
    finding = BY_ID["freeze-marginal-sst-quora"]
    rows = judge(finding, "first", [Row(t, Estimate(5, 0.0, 0.007, df=4)) for t in ("sst", "quora")]).rows
    assert [r.estimate.level for r in rows] == [0.90, 0.90]
    assert [r.adjusted.level for r in rows] == [0.95, 0.95]
    assert rows[0].adjusted.high == pytest.approx(2.776445 * 0.007 / math.sqrt(5), abs=1e-6)

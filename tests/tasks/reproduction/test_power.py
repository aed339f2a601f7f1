"""power.py: what a design can decide at its n, and the label of a line its design could not have decided."""
import math

from tasks.reproduction.findings import BY_ID
from tasks.reproduction.verdicts import NOT_REPRODUCED, UNDERPOWERED, Estimate, Row, judge
from tests.helpers.reproduction import CTX


def test_power_says_what_a_design_can_decide_and_labels_an_underpowered_line():
    from tasks.reproduction import power
    # the arithmetic: a 95% interval fits inside +/- 0.01 at n = 5 only below sd ~0.008
    assert 2.776445 * 0.008 / math.sqrt(5) < 0.01 < 2.776445 * 0.0081 / math.sqrt(5)
    tight = power.reach(0.004, 5, 0.01, "equivalence")
    assert tight.powered and power.reach(0.02, 5, 0.01, "equivalence").powered is False
    assert power.needs(0.02, 0.01, "equivalence") > 5
    direction = power.reach(0.01, 5, 0.02)
    assert direction.reproduced_from >= 0.02 and direction.not_reproduced_below > 0 and direction.powered
    assert not power.reach(0.03, 5, 0.02).powered and power.needs(0.03, 0.02) > 5
    finding = BY_ID["freeze-smart-multitask"]
    v = power.apply(judge(finding, "first", [Row("a", Estimate(5, 0.0, 0.02, df=4))]), CTX.scale)
    assert v.outcome == UNDERPOWERED and power.label(v.power).startswith("underpowered at n = 5, needs n >= ")
    # a powered design keeps its inconclusive; a decided interval keeps its verdict whatever the power
    decided = power.apply(judge(finding, "first", [Row("a", Estimate(5, 0.05, 0.02, df=4))]),
                          CTX.scale)
    assert decided.outcome == NOT_REPRODUCED

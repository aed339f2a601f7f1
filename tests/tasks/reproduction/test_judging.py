"""judging.py: a follow-up's line never mixes its protocol with the first run's arms, and says where its arms
trained apart."""


from tasks.reproduction import follow_ups, judging, lines
from tasks.reproduction.findings import FINDINGS
from tasks.reproduction.kept import Kept, KeptRuns
from tests.helpers.reproduction import CTX, LARGE, SMALL, kept_run, reinit


def test_a_follow_ups_line_never_mixes_its_protocol_with_the_first_runs_arms():
    first = reinit(lambda k, f, s: 0.25 + 0.03 * k + 0.002 * s)
    capped = reinit(lambda k, f, s: 0.30 + 0.01 * k + (0.02 if f == SMALL else 0.0) + 0.002 * s)
    meta = kept_run("reinit-small", "first", range(5))
    runs = KeptRuns({"first": {"reinit-small": Kept(meta, {"reinit": first[SMALL]}),
                               "reinit-large": Kept(meta, {"reinit": first[LARGE]})},
                     # reinit-small not run yet
                     "lr-2e-5": {"reinit-large": Kept(meta, {"reinit": capped[LARGE]})},
                     "cap-small-data": {"reinit-small": Kept(meta, {"reinit": capped[SMALL]})},
                     "cap-large-data": {"reinit-large": Kept(meta, {"reinit": capped[LARGE]})}})
    by_run = judging.verdicts(runs, CTX)
    two = [f.id for f in FINDINGS if f.experiment == "reinit-large" and f.id in by_run["first"]
           and {e for e, _ in by_run["first"][f.id].reads} == {"reinit-small", "reinit-large"}]
    # reinit-large alone
    assert "tamkin-data-size" in two and "college-downstream-smaller-drop" in by_run["lr-2e-5"]
    # a line reading reinit-small at 1e-4 waits for its run
    assert not set(two) & set(by_run["lr-2e-5"])
    # cap-large-data pairs its capped 0.25 arms with cap-small-data's capped 0.03 arms, as its reason declares
    assert follow_ups.FOLLOW_UPS["cap-large-data"].over == ("cap-small-data",)
    line = by_run["cap-large-data"]["tamkin-data-size"]
    assert dict(line.reads) == {"reinit-large": "cap-large-data", "reinit-small": "cap-small-data"}
    capped_line = lines.disclosure(runs, line, "cap-large-data")
    assert "reinit-small (cap-small-data run)" in capped_line
    # both
    assert "reinit-small (first run)" in lines.disclosure(runs, by_run["first"]["tamkin-data-size"], "first")
    assert "trained apart" not in capped_line
    # arms from runs trained on other devices or weights (a device's capped 0.03 arms): the line says so
    device = kept_run("reinit-small", "cap-small-data", range(5), device="cuda", weights="1ca95c81930f")
    runs["cap-small-data"]["reinit-small"] = (device, {"reinit": capped[SMALL]})
    runs["cap-large-data"]["reinit-large"] = (kept_run("reinit-large", "cap-large-data", range(5),
                                                       device="cpu"),
                                              {"reinit": capped[LARGE]})
    again = judging.verdicts(runs, CTX)["cap-large-data"]["tamkin-data-size"]
    assert lines.disclosure(runs, again, "cap-large-data").endswith(
        "; its arms trained apart: reinit-large on cpu; reinit-small on cuda, from weights 1ca95c81930f")

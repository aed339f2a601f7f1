"""tasks.ensemble.averages: an average's gain over the trained weights, paired by seed."""

import pytest

from minbert import UserError
from tasks.ensemble.averages import gains, main
from tests.helpers.records import write_finished_run


def finished_run(folder, seed, finals):
    """A run folder as `train_multitask.py --average ...` leaves it, its copies' final figures `finals`."""
    copies = {kind: {"best": None, "final": dev} for kind, dev in finals.items()}
    return write_finished_run(folder, seed, averages={"model": "none", "copies": copies})


def test_the_gain_is_the_mean_of_per_seed_differences(tmp_path):
    runs = [finished_run(tmp_path / f"s{seed}", seed, {"none": {"overall": base, "sst": 0.5},
                                                        "ema": {"overall": base + d, "sst": 0.5}})
            for seed, base, d in ((0, 0.70, 0.010), (1, 0.75, 0.020), (2, 0.72, 0.030))]
    report = gains(runs)
    overall = report["ema"]["overall"]
    assert overall["mean"] == pytest.approx(0.020)
    assert overall["per_seed"] == pytest.approx({0: 0.010, 1: 0.020, 2: 0.030})
    # t(0.975, 2) = 4.303, sd 0.01, n 3: half-width 0.02484 (the bases' own spread does not enter)
    assert overall["ci95_high"] - overall["mean"] == pytest.approx(4.3027 * 0.01 / 3 ** 0.5, rel=1e-3)
    assert report["ema"]["sst"]["mean"] == pytest.approx(0.0)


def test_a_run_without_averages_or_a_repeated_seed_is_refused(tmp_path, capsys):
    plain = write_finished_run(tmp_path / "plain", 0)
    assert main([str(plain)]) == 2
    assert "no averaged copies" in capsys.readouterr().err
    a = finished_run(tmp_path / "a", 0, {"none": {"overall": 0.7}, "ema": {"overall": 0.71}})
    b = finished_run(tmp_path / "b", 0, {"none": {"overall": 0.7}, "ema": {"overall": 0.72}})
    with pytest.raises(UserError, match="share a seed"):
        gains([a, b])

"""arms.py: two training arms compared per seed (the multitask methods, transfer against direct fine-tuning),
each labelled with the steps it trained."""
from dataclasses import replace

import pytest

from tasks.ablation.studies import STUDIES
from tasks.ablation.study import Shape
from tasks.reproduction import arms, measures
from tasks.reproduction import experiments as reproduction
from tests.helpers.reproduction import CTX, LARGE, SMALL, measure, record, sweep_config


def test_smart_and_surgery_are_methods_sweeps_paired_by_seed_with_one_baseline():
    specs = {s.label: s for s in reproduction.EXPERIMENTS["methods"].sweeps(CTX)}
    configs = {}
    for label, spec in specs.items():
        config = sweep_config(spec, CTX.scale)
        assert config.training.pair_mode == "siamese" and config.training.task_heads == "report"
        configs[label] = sorted({t.label for t in STUDIES["methods"].trials(config, Shape(6, 12))})
    assert configs == {"multitask": ["method=baseline", "method=dominant", "method=smart"],
                       "sts": ["method=baseline", "method=smart"]}
    records = []
    for s in range(5):
        records += [record("method=baseline", s, LARGE, {"method": "baseline"}, {"sts": 0.80,
                                                                                 "overall": 0.60}),
                    record("method=smart", s, LARGE, {"method": "smart"}, {"sts": 0.83, "overall": 0.605}),
                    record("method=dominant", s, LARGE, {"method": "dominant"}, {"sts": 0.8,
                                                                                 "overall": 0.58})]
    results = measures.Results()
    results.add("methods", "multitask", records)
    results.add("methods", "sts", [r for r in records if r.config != "method=dominant"])
    assert measure("freeze-smart-sts", results)[0].estimate.mean == pytest.approx(0.03)
    assert measure("freeze-smart-multitask", results)[0].estimate.mean == pytest.approx(0.005)
    assert measure("freeze-surgery-no-effect", results)[0].estimate.mean == pytest.approx(-0.02)


def test_transfer_is_compared_with_direct_fine_tuning_at_twice_the_cap_and_says_the_steps_trained():
    records = []
    for s in range(5):
        records += [record("via=none,final=sts", s, SMALL, {"via": None}, {"sts": 0.70}),
                    record("via=none,final=sts,steps=x2", s, SMALL, {"via": None, "steps": 2}, {"sts": 0.78}),
                    record("via=quora,final=sts", s, SMALL, {"via": "quora"}, {"sts": 0.80 + 0.001 * s})]
    results = measures.Results()
    results.add("transfer", "transfer", records)
    row = next(r for r in arms.college_transfer(results, CTX) if r.label.startswith("quora then sts"))
    assert "twice the cap" in row.label and row.estimate.mean == pytest.approx(0.022)
    stopped = [replace(r, steps=200, info={"total_steps": 480}) if r.config.startswith("via=quora") else
               replace(r, steps=280) for r in records]
    # a plateau stops each arm: the label says what each trained
    results.add("transfer", "transfer", stopped)
    row = next(r for r in arms.college_transfer(results, CTX) if r.label.startswith("quora then sts"))
    assert "transfer arm 480 (480-480) steps in all" in row.label and "280 (280-280) steps" in row.label

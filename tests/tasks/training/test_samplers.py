from collections import Counter

import numpy as np
import pytest

from minbert.errors import UserError
from tasks.training.samplers import SAMPLERS, AnnealedSampler, build_sampler, make_batches, padding_fraction

BATCH = 8
LENGTHS = {
    "sst": [5 + i % 40 for i in range(100)],
    "quora": [10 + i % 60 for i in range(530)],
    "sts": [7 + i % 30 for i in range(43)],
}


def indices_of(plan, task):
    return [i for step in plan for i in step.get(task, [])]


def padding(batches, lengths):
    return sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)


def test_make_batches_covers_every_index_once():
    lengths = list(range(1, 1001))
    for bucket in (True, False):
        batches = make_batches(lengths, 32, np.random.default_rng(0), bucket=bucket, pool_batches=4)
        assert sorted(i for b in batches for i in b) == list(range(1000))
        assert sorted(len(b) for b in batches)[1:] == [32] * 31  # only one partial batch (1000 = 31*32 + 8)
    assert make_batches([], 4, np.random.default_rng(0)) == []


def test_bucketing_reduces_padding():
    lengths = np.random.default_rng(1).integers(5, 128, size=3000).tolist()
    bucketed = make_batches(lengths, 32, np.random.default_rng(2), bucket=True)
    plain = make_batches(lengths, 32, np.random.default_rng(2), bucket=False)
    assert padding(bucketed, lengths) < 0.3 * padding(plain, lengths)


def test_padding_fraction_of_plans():
    assert padding_fraction([{"sst": [0, 1]}, {"sts": [0]}], {"sst": [3, 5], "sts": [4]}) == pytest.approx(2 / 14)
    plain = build_sampler("proportional", LENGTHS, BATCH, seed=0, bucket=False).plan(0)
    bucketed = build_sampler("proportional", LENGTHS, BATCH, seed=0, bucket=True).plan(0)
    assert padding_fraction(bucketed, LENGTHS) < 0.5 * padding_fraction(plain, LENGTHS)


def test_bucketed_batches_still_mix_lengths_across_the_epoch():
    lengths = list(range(1000))
    batches = make_batches(lengths, 10, np.random.default_rng(0), bucket=True, pool_batches=100)
    firsts = [min(b) for b in batches]
    assert firsts != sorted(firsts)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_plan_length_matches_steps_per_epoch_and_is_deterministic(name):
    sampler = build_sampler(name, LENGTHS, BATCH, seed=3, num_epochs=3)
    again = build_sampler(name, LENGTHS, BATCH, seed=3, num_epochs=3)
    for epoch in range(3):
        plan = sampler.plan(epoch)
        assert len(plan) == sampler.steps_per_epoch()
        assert plan == again.plan(epoch)
        for step in plan:
            for task, idx in step.items():
                assert idx and all(0 <= i < len(LENGTHS[task]) for i in idx)
    assert sampler.plan(0) != sampler.plan(1)
    assert sampler.plan(0) != build_sampler(name, LENGTHS, BATCH, seed=4, num_epochs=3).plan(0)


def test_round_robin_alternates_and_passes_once_over_largest_task():
    sampler = build_sampler("round-robin", LENGTHS, BATCH, seed=0)
    plan = sampler.plan(0)
    tasks = list(LENGTHS)
    assert [list(step) for step in plan] == [[tasks[s % 3]] for s in range(len(plan))]
    assert sampler.steps_per_epoch() == 3 * 67  # ceil(530 / 8) rounds
    assert sorted(indices_of(plan, "quora")) == list(range(530))
    # smaller tasks cycle: each of their passes covers every example once
    sts_batches = [step["sts"] for step in plan if "sts" in step]
    first_pass = [i for b in sts_batches[:6] for i in b]  # ceil(43 / 8) = 6 batches
    assert sorted(first_pass) == list(range(43))
    assert len(sts_batches) == 67


def test_proportional_uses_every_batch_of_every_task_once():
    sampler = build_sampler("proportional", LENGTHS, BATCH, seed=0)
    plan = sampler.plan(0)
    assert sampler.steps_per_epoch() == 13 + 67 + 6
    for task, lengths in LENGTHS.items():
        assert sorted(indices_of(plan, task)) == list(range(len(lengths)))
    assert [list(s)[0] for s in plan[:20]] != ["sst"] * 13 + ["quora"] * 7  # interleaved


def test_annealed_alpha_schedule_moves_towards_uniform():
    lengths = {"big": [1] * 8000, "mid": [1] * 800, "small": [1] * 80}  # 1000, 100, 10 batches
    sampler = AnnealedSampler(lengths, 8, seed=0, num_epochs=5)
    assert sampler.alpha(0) == pytest.approx(1.0)
    assert sampler.alpha(4) == pytest.approx(0.2)
    assert sampler.alpha(9) == pytest.approx(0.2)  # training past the schedule stays at the end
    first = Counter(list(s)[0] for s in sampler.plan(0))
    last = Counter(list(s)[0] for s in sampler.plan(4))
    steps = sampler.steps_per_epoch()
    assert steps == 1110
    assert first["big"] / steps == pytest.approx(1000 / 1110, abs=0.04)
    expected_last = sampler.probabilities(4)
    assert expected_last["big"] == pytest.approx(0.49, abs=0.01)
    for task in lengths:
        assert last[task] / steps == pytest.approx(expected_last[task], abs=0.05)
    assert last["small"] > 5 * first["small"]


def test_annealed_single_epoch_is_proportional():
    assert AnnealedSampler(LENGTHS, BATCH, seed=0, num_epochs=1).alpha(0) == 1.0


def test_union_groups_by_task_and_covers_the_union_once():
    sampler = build_sampler("union", LENGTHS, BATCH, seed=0, bucket=True)
    plan = sampler.plan(0)
    total = sum(len(v) for v in LENGTHS.values())
    assert sampler.steps_per_epoch() == -(-total // BATCH)
    sizes = [sum(len(v) for v in step.values()) for step in plan]
    assert sizes[:-1] == [BATCH] * (len(plan) - 1) and 0 < sizes[-1] <= BATCH
    for task, lengths in LENGTHS.items():
        assert sorted(indices_of(plan, task)) == list(range(len(lengths)))
    assert any(len(step) > 1 for step in plan)
    for step in plan:  # tasks keep the configured order inside a step
        assert list(step) == [t for t in LENGTHS if t in step]


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="unknown sampler"):
        build_sampler("random", LENGTHS, BATCH, seed=0)
    with pytest.raises(UserError):
        build_sampler("proportional", {"sst": []}, BATCH, seed=0)
    with pytest.raises(UserError):
        build_sampler("proportional", LENGTHS, 0, seed=0)
    with pytest.raises(TypeError):
        build_sampler("proportional", LENGTHS, BATCH, seed=0, nonsense=1)

"""Which task, and which of its examples, each optimizer step trains on.

Every sampler builds an epoch's complete plan from (seed, epoch) alone, so a
killed run resumes exactly by rebuilding the plan of its epoch and skipping
the steps it already took.  A plan is a list with one dict per optimizer
step, mapping a task name to indices into that task's training list.
"""

from __future__ import annotations

import math
import zlib
from typing import Iterator

import numpy as np

from minbert.errors import UserError

Plan = list[dict[str, list[int]]]


def make_batches(
    lengths: list[int],
    batch_size: int,
    rng: np.random.Generator,
    bucket: bool = True,
    pool_batches: int = 50,
) -> list[list[int]]:
    """One shuffled pass over all indices, cut into batches.

    With `bucket`, the shuffled order is cut into pools of `pool_batches`
    batches and each pool is sorted by length before batching, so a batch
    holds sentences of similar length and wastes little compute on padding.
    The batch order is then shuffled so that long and short batches stay
    mixed; pools keep the composition of batches different every epoch.
    """
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, got {batch_size}")
    order = rng.permutation(len(lengths))
    if not bucket:
        return [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    lengths_arr = np.asarray(lengths)
    pool_size = max(1, pool_batches) * batch_size
    batches = []
    for start in range(0, len(order), pool_size):
        pool = order[start:start + pool_size]
        pool = pool[np.argsort(lengths_arr[pool], kind="stable")]
        batches.extend(pool[i:i + batch_size].tolist() for i in range(0, len(pool), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _n_batches(n: int, batch_size: int) -> int:
    return math.ceil(n / batch_size)


class Sampler:
    """Shared bookkeeping; subclasses only decide the order of steps."""

    def __init__(
        self,
        lengths: dict[str, list[int]],
        batch_size: int,
        seed: int,
        bucket: bool = True,
        num_epochs: int = 1,
        pool_batches: int = 50,
        **kw,
    ):
        if kw:
            raise TypeError(f"{type(self).__name__} got unknown options: {', '.join(sorted(kw))}")
        if not lengths:
            raise UserError("no tasks to sample from")
        empty = [task for task, task_lengths in lengths.items() if len(task_lengths) == 0]
        if empty:
            raise UserError(f"no training examples for task(s): {', '.join(empty)}")
        if batch_size < 1:
            raise UserError(f"batch size must be at least 1, got {batch_size}")
        if seed < 0:
            raise UserError(f"seed must be non-negative, got {seed}")
        if num_epochs < 1:
            raise UserError(f"number of epochs must be at least 1, got {num_epochs}")
        self.lengths = {task: list(task_lengths) for task, task_lengths in lengths.items()}
        self.tasks = list(self.lengths)
        self.batch_size = batch_size
        self.seed = seed
        self.bucket = bucket
        self.num_epochs = num_epochs
        self.pool_batches = pool_batches

    def _rng(self, epoch: int, *salt: int) -> np.random.Generator:
        if epoch < 0:
            raise ValueError(f"epoch must be non-negative, got {epoch}")
        return np.random.default_rng([self.seed, epoch, *salt])

    def _task_salt(self, task: str) -> int:
        """A per-task stream id that does not change when other tasks are added."""
        return zlib.crc32(task.encode("utf-8"))

    def _n_batches(self, task: str) -> int:
        return _n_batches(len(self.lengths[task]), self.batch_size)

    def _one_pass(self, task: str, epoch: int) -> list[list[int]]:
        rng = self._rng(epoch, self._task_salt(task))
        return make_batches(self.lengths[task], self.batch_size, rng, self.bucket, self.pool_batches)

    def _cycling(self, task: str, epoch: int) -> Iterator[list[int]]:
        """Endless batches of one task: a fresh reshuffled pass whenever one runs out."""
        rng = self._rng(epoch, self._task_salt(task))
        while True:
            yield from make_batches(self.lengths[task], self.batch_size, rng, self.bucket, self.pool_batches)

    def plan(self, epoch: int) -> Plan:
        raise NotImplementedError

    def steps_per_epoch(self) -> int:
        raise NotImplementedError


class RoundRobinSampler(Sampler):
    """Tasks take turns, one batch each, in a fixed order.

    An epoch is one pass over the largest task's training set; smaller tasks
    start a new reshuffled pass whenever theirs runs out, so every task gets
    the same number of steps (steps per epoch = number of tasks x batches of
    the largest task) and small tasks are seen several times per epoch.
    """

    def steps_per_epoch(self) -> int:
        return len(self.tasks) * max(self._n_batches(task) for task in self.tasks)

    def plan(self, epoch: int) -> Plan:
        rounds = max(self._n_batches(task) for task in self.tasks)
        streams = {task: self._cycling(task, epoch) for task in self.tasks}
        return [{task: next(streams[task])} for _ in range(rounds) for task in self.tasks]


class ProportionalSampler(Sampler):
    """Every batch of every task once per epoch, in random order (as MT-DNN).

    Tasks are therefore seen in proportion to their size: the large
    paraphrase set dominates and the small ones are seen once per epoch.
    """

    def steps_per_epoch(self) -> int:
        return sum(self._n_batches(task) for task in self.tasks)

    def plan(self, epoch: int) -> Plan:
        steps = [{task: batch} for task in self.tasks for batch in self._one_pass(task, epoch)]
        order = self._rng(epoch).permutation(len(steps))
        return [steps[i] for i in order]


class AnnealedSampler(Sampler):
    """Each step draws a task with probability ~ (its number of batches) ** alpha.

    alpha falls linearly from 1 in the first epoch (proportional sampling)
    to 0.2 in the last (close to uniform), following Stickland & Murray
    (2019): large tasks dominate early, small tasks catch up later without
    being overfitted from the start.  Each task serves batches from its own
    reshuffled stream; an epoch has as many steps as all tasks have batches.
    """

    ALPHA_START = 1.0
    ALPHA_END = 0.2

    def alpha(self, epoch: int) -> float:
        progress = min(1.0, epoch / max(1, self.num_epochs - 1))
        return self.ALPHA_START - (self.ALPHA_START - self.ALPHA_END) * progress

    def probabilities(self, epoch: int) -> dict[str, float]:
        weights = np.array([self._n_batches(task) for task in self.tasks], dtype=np.float64)
        weights = weights ** self.alpha(epoch)
        return dict(zip(self.tasks, (weights / weights.sum()).tolist()))

    def steps_per_epoch(self) -> int:
        return sum(self._n_batches(task) for task in self.tasks)

    def plan(self, epoch: int) -> Plan:
        probabilities = list(self.probabilities(epoch).values())
        draws = self._rng(epoch).choice(len(self.tasks), size=self.steps_per_epoch(), p=probabilities)
        streams = {task: self._cycling(task, epoch) for task in self.tasks}
        return [{self.tasks[t]: next(streams[self.tasks[t]])} for t in draws.tolist()]


class UnionSampler(Sampler):
    """Batches drawn from the union of all tasks, so one step mixes tasks.

    Examples are drawn uniformly without replacement from all training sets
    together; each step's batch is split by task.  This is what gradient
    surgery needs: several tasks' gradients on the same step.  An epoch is
    one pass over the union.  Length bucketing does not apply here.
    """

    def steps_per_epoch(self) -> int:
        return _n_batches(sum(len(v) for v in self.lengths.values()), self.batch_size)

    def plan(self, epoch: int) -> Plan:
        sizes = [len(self.lengths[task]) for task in self.tasks]
        task_of = np.repeat(np.arange(len(self.tasks)), sizes)
        index_of = np.concatenate([np.arange(n) for n in sizes])
        order = self._rng(epoch).permutation(len(task_of))
        plan = []
        for start in range(0, len(order), self.batch_size):
            chosen = order[start:start + self.batch_size]
            step = {}
            for t, task in enumerate(self.tasks):
                picked = index_of[chosen[task_of[chosen] == t]]
                if len(picked):
                    step[task] = picked.tolist()
            plan.append(step)
        return plan


SAMPLERS: dict[str, type[Sampler]] = {
    "round-robin": RoundRobinSampler,
    "proportional": ProportionalSampler,
    "annealed": AnnealedSampler,
    "union": UnionSampler,
}


def padding_fraction(plan: Plan, lengths: dict[str, list[int]]) -> float:
    """Padded token slots / all slots over a plan's batches, each padded to its own longest."""
    padded = total = 0
    for step in plan:
        for task, indices in step.items():
            lens = [lengths[task][i] for i in indices]
            total += max(lens) * len(lens)
            padded += max(lens) * len(lens) - sum(lens)
    return padded / max(1, total)


def build_sampler(
    name: str,
    lengths: dict[str, list[int]],
    batch_size: int,
    seed: int,
    bucket: bool = True,
    num_epochs: int = 1,
    **kw,
) -> Sampler:
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise UserError(f"unknown sampler {name!r}; choose one of: {', '.join(SAMPLERS)}") from None
    return cls(lengths, batch_size, seed, bucket=bucket, num_epochs=num_epochs, **kw)

"""Paired workers: the one timing harness of the benchmarks that compare two (or more) ways of running a step.

A worker runs its model's steps when asked, in its own process (`Remote`: `python -m bench NAME --worker
MODEL`, each peak RSS its own, JSON lines on its stdin and stdout) or in this one (`Local`: on a GPU, whose
memory is read per run). On a machine whose load changes within seconds only interleaved timings give a
ratio that means something: `alternate` runs the workers round by round (A B, B A, ...) over the same steps,
and a ratio is the median of the per-round ratios.
"""
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import REPO, bench_command
from tasks.machine import cpu_model

WORKERS = ("minbert", "transformers")


@dataclass(frozen=True)
class Timed:
    """Each worker's seconds per round, and the steps in each round."""
    seconds: dict
    steps: list

    def total(self, name: str) -> float:
        return sum(self.seconds[name])

    def ratio(self, ours: str = "minbert", theirs: str = "transformers") -> float:
        """The median over rounds of their time / ours: above 1, ours is faster."""
        return statistics.median(b / a for a, b in zip(self.seconds[ours], self.seconds[theirs]))


def alternate(workers: dict, phase: str, count: int, rounds: int) -> Timed:
    """`count` steps of `phase` split into rounds, the workers' order reversed every other round."""
    names = list(workers)
    rounds = min(rounds, count)
    per_round = [count // rounds + (r < count % rounds) for r in range(rounds)]
    seconds, begin = {n: [] for n in names}, 0
    for r, steps in enumerate(per_round):
        for name in (names if r % 2 == 0 else names[::-1]):
            seconds[name].append(workers[name].ask(op=phase, start=begin, count=steps)["seconds"])
        begin += steps
    return Timed(seconds, per_round)


class Local:
    """A worker in this process: `phases[op](start, count)` runs those steps, timed here between two calls of
    `sync` (a device's synchronize: the work it queued belongs to the steps)."""

    def __init__(self, phases: dict, sync=lambda: None):
        self.phases, self.sync = phases, sync

    def ask(self, op: str, start: int, count: int) -> dict:
        self.sync()
        began = time.perf_counter()
        self.phases[op](start, count)
        self.sync()
        return {"seconds": time.perf_counter() - began}


# ------------------------------------------------------------------------------------------ worker side

def reply(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def memory_mib() -> dict:
    """This process's peak resident memory in MiB: VmHWM, else ru_maxrss (KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        status = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        status = []
    peak = next((int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:")), peak)
    return {"peak_mib": peak}


def serve(describe: dict, handlers: dict) -> None:
    """A worker's loop: its description first, then one reply per command until `quit`; `memory` is built in."""
    reply(describe)
    handlers = {"memory": memory_mib, **handlers}
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            return
        reply(handlers[op](**command))


def timed(step, batches: list) -> dict:
    """A worker's answer to a timed phase: `step` run on each of `batches`."""
    began = time.perf_counter()
    for batch in batches:
        step(batch)
    return {"seconds": time.perf_counter() - began}


def digest(batches: list, keys: tuple) -> str:
    """What the parent compares across workers: they timed the same batches."""
    found = hashlib.sha256()
    for batch in batches:
        for key in keys:
            found.update(batch[key].numpy().tobytes())
    return found.hexdigest()


def describe(torch) -> dict:
    import minbert
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "native_bf16": minbert.native_bf16("cpu")}


# ------------------------------------------------------------------------------------------ parent side

class Remote:
    """A worker process the parent talks to in JSON lines."""

    def __init__(self, bench: str, name: str, argv: list, env: dict):
        self.name = name
        self.proc = subprocess.Popen(bench_command(bench, "--worker", name, *argv), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)

    def send(self, **command) -> None:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"bench: the {self.name} worker died (exit code {self.proc.wait()})")
        return json.loads(line)

    def ask(self, **command) -> dict:
        self.send(**command)
        return self.receive()


@dataclass(frozen=True)
class Paired:
    """What a paired benchmark measured: each worker's description, what `measure` returned, each one's peak
    resident memory (MiB), the load average before and after, the wall time and the CPU."""
    info: dict
    figures: object
    memory: dict
    loads: tuple
    wall_s: float
    cpu: str

    def machine(self) -> str:
        mine, (before, after) = self.info["minbert"], self.loads
        return (f"machine: {self.cpu}, {os.cpu_count()} CPUs, torch {mine['torch']}, {mine['threads']} "
                f"threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; load average {before[0]:.1f} "
                f"-> {after[0]:.1f} (rounds alternate; ratios are medians of per-round ratios)")

    def memory_line(self, width: int = 28) -> str:
        ratio = self.memory["minbert"] / self.memory["transformers"]
        return line("peak resident memory (MiB)", self.memory, ratio, width=width)


def compare(bench: str, argv, measure) -> Paired:
    """minBERT's and transformers' workers of `python -m bench BENCH ARGV` started together,
    `measure(workers)` run, then each one's peak memory read and both told to quit."""
    began, before = time.time(), os.getloadavg()
    environ = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    argv = list(sys.argv[1:] if argv is None else argv)
    workers = {name: Remote(bench, name, argv, environ) for name in WORKERS}
    info = {name: w.receive() for name, w in workers.items()}
    figures = measure(workers)
    return Paired(info, figures, finish(workers), (before, os.getloadavg()), time.time() - began, cpu_model())


def ask_all(workers: dict, **command) -> dict:
    """The same command to every worker at once (both warm up together: nothing is timed), then the replies."""
    for w in workers.values():
        w.send(**command)
    return {name: w.receive() for name, w in workers.items()}


def prepare_all(workers: dict, **command) -> dict:
    """Every worker's `prepare`, and the one line to exit with when they built different batches."""
    prepared = ask_all(workers, op="prepare", **command)
    if len({p["batches"] for p in prepared.values()}) != 1:
        sys.exit("bench: the workers built different batches")
    return prepared


def finish(workers: dict) -> dict:
    """Each worker's peak resident memory (MiB), then each told to quit and waited for."""
    memory = ask_all(workers, op="memory")
    for w in workers.values():
        w.send(op="quit")
        w.proc.wait()
    return {name: m["peak_mib"] for name, m in memory.items()}


def line(label: str, values: dict, ratio: float, fmt: str = "{:.0f}", width: int = 28) -> str:
    """A table line: minBERT's figure, transformers' and their ratio."""
    return (f"{label:{width}s}{fmt.format(values['minbert']):>12s}{fmt.format(values['transformers']):>14s}"
            f"{ratio:8.2f}")

"""Paired workers: the timing harness of `bench throughput` and `bench pretrain`.

Each model runs in its own worker process (`python -m bench NAME --worker MODEL ...`), so each peak RSS (VmHWM)
is its own; the parent sends JSON commands on the worker's stdin and reads one JSON line back for each. On a
machine shared with other jobs, whose load changes within seconds, only interleaved timings give a ratio that
means something: `alternate` runs the workers round by round (A B, B A, ...) over the same batches, and a ratio
is the median of the per-round ratios.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from bench.common import REPO, bench_command


def reply(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def memory_mib() -> dict:
    """This process's VmRSS and VmHWM, and ru_maxrss as a cross-check (KiB on Linux), in MiB."""
    out = {"ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def peak_rss(memory: dict) -> float:
    return memory.get("VmHWM", memory["ru_maxrss"])


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


def start(bench: str, names: tuple, argv: list, **env) -> tuple:
    """The workers, started together with `env` added to this environment, and each one's description."""
    environ = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **env}
    workers = {name: Remote(bench, name, argv, environ) for name in names}
    return workers, {name: w.receive() for name, w in workers.items()}


def ask_all(workers: dict, **command) -> dict:
    """The same command to every worker at once (both warm up together: nothing is timed), then the replies."""
    for w in workers.values():
        w.send(**command)
    return {name: w.receive() for name, w in workers.items()}


def alternate(workers: dict, phase: str, count: int, rounds: int) -> dict:
    """`count` steps of `phase` split into rounds, the workers' order reversed every other round: the seconds
    of each worker's rounds and the steps in each."""
    names = list(workers)
    rounds = min(rounds, count)
    per_round = [count // rounds + (r < count % rounds) for r in range(rounds)]
    seconds, begin = {n: [] for n in names}, 0
    for r, steps in enumerate(per_round):
        for name in (names if r % 2 == 0 else names[::-1]):
            seconds[name].append(workers[name].ask(op=phase, start=begin, count=steps)["seconds"])
        begin += steps
    return {"seconds": seconds, "steps": per_round}


def median_ratio(seconds: dict, ours: str = "minbert", theirs: str = "transformers") -> float:
    """The median over rounds of their time / ours: above 1, ours is faster."""
    return statistics.median(b / a for a, b in zip(seconds[ours], seconds[theirs]))


def finish(workers: dict) -> dict:
    """Each worker's memory, then each told to quit and waited for."""
    memory = ask_all(workers, op="memory")
    for w in workers.values():
        w.send(op="quit")
        w.proc.wait()
    return memory

"""Where a command's threads spend the wall time: running, waiting for a core, or idle (Linux /proc sampling).

    python -m bench.threads [--interval 0.5] [--json FILE] -- python train_multitask.py --max-steps 300

Runs the command and reads every thread's /proc/PID/task/TID/schedstat each `--interval`: the time
it ran on a core and the time it waited in the run queue (ready, but another job held the core).
The rest of the wall time the thread slept: it had nothing to do (waiting for the other threads, for
the main thread's Python, for I/O). On a machine shared with other jobs the waiting time is theirs;
the sleeping time is the command's own idle. Prints, per thread (the main thread, then the others by
CPU time), running / waiting / sleeping as shares of the wall time, and how often 0, 1 or 2+ of its
threads ran at once. Without a profiler inside the process, so the command runs at its own speed.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__.split("\n\n")[0])
    p.add_argument("--interval", type=float, default=0.5, help="seconds between samples (default: %(default)s)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    p.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command to run")
    args = p.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        p.error("give the command to run after --")
    return args


def sample(pid: int) -> dict:
    """{tid: (ns on a core, ns waiting for one, name)} of every live thread of `pid`."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            run, wait, _ = (task / "schedstat").read_text().split()
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
        out[int(task.name)] = (int(run), int(wait), name)
    return out


def watch(proc: subprocess.Popen, interval: float) -> tuple:
    """Per-thread totals, and per interval how many threads' worth of CPU ran."""
    first, last, concurrency = {}, {}, []
    before, t0 = sample(proc.pid), time.monotonic()
    first.update(before)
    while proc.poll() is None:
        time.sleep(interval)
        now, t1 = sample(proc.pid), time.monotonic()
        ran = sum(v[0] - before.get(tid, (0, 0))[0] for tid, v in now.items())
        concurrency.append(ran / 1e9 / (t1 - t0))
        for tid, v in now.items():
            first.setdefault(tid, (0, 0, v[2]))
            last[tid] = v
        before, t0 = now, t1
    return first, last, concurrency


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    proc = subprocess.Popen(args.command)
    first, last, concurrency = watch(proc, args.interval)
    wall = time.monotonic() - started
    threads = []
    for tid, (run, wait, name) in last.items():
        run0, wait0 = first[tid][:2]
        threads.append({"tid": tid, "name": name, "main": tid == proc.pid, "run_s": (run - run0) / 1e9,
                        "wait_s": (wait - wait0) / 1e9})
    threads.sort(key=lambda t: (not t["main"], -t["run_s"]))
    print(f"\n{' '.join(args.command)}\nexit {proc.returncode}; wall {wall:.0f} s; {os.cpu_count()} CPUs; "
          f"sampled every {args.interval:g} s")
    print(f"{'thread':28s}{'running':>10s}{'waiting':>10s}{'sleeping':>10s}   (shares of the wall time)")
    for t in threads:
        if t["run_s"] < 0.01 * wall:
            continue
        sleep = max(0.0, wall - t["run_s"] - t["wait_s"])
        label = f"{'main ' if t['main'] else ''}{t['name']} ({t['tid']})"
        print(f"{label:28s}{100 * t['run_s'] / wall:9.0f}%{100 * t['wait_s'] / wall:9.0f}%{100 * sleep / wall:9.0f}%")
    total = sum(t["run_s"] for t in threads)
    print(f"all threads: {total / wall:.2f} cores busy on average of {os.cpu_count()}")
    bins = defaultdict(int)
    for c in concurrency:
        bins["< 0.5" if c < 0.5 else "0.5-1.5" if c < 1.5 else ">= 1.5"] += 1
    share = {k: bins[k] / max(1, len(concurrency)) for k in ("< 0.5", "0.5-1.5", ">= 1.5")}
    print("cores busy per interval: " + ", ".join(f"{k}: {100 * v:.0f}% of the time" for k, v in share.items()))
    if args.json:
        args.json.write_text(json.dumps({"command": args.command, "wall_s": wall, "threads": threads,
                                         "cores_busy": share, "exit": proc.returncode}, indent=2) + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

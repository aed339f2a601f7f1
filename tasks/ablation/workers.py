"""Run a sweep's trials side by side in worker processes: on a CPU, one thread each.

Why: a training step of the embedded model at batch 32 keeps two threads busy only part of the
time (single-threaded operators, Python between them), so on a 2-core CPU two one-thread runs did
1.7x the work of one two-thread run (docs/studies.md). A GPU runs one trial at a time (`auto_workers`).

How: the parent forks the workers once the model and data are loaded, so they share them
copy-on-write and load nothing again. Work goes out in plan order, one unit at a time (a unit is the
trials of one shard unit, `study.Trial.shard_unit`: those run in one worker, in order, as they would
in one shard), to whichever worker is free, so the workers stay busy to the end. A worker sends back
each finished trial's results line and its progress lines; only the parent prints and appends to the
results file, so a trial is on disk the moment it ends and the output is never interleaved.

Failures: a trial that raises is a "failed" line as in a serial run (`sweep.attempt`). A worker that
dies (killed, out of memory) costs the trial it was running, recorded as failed and retried on the
next run, and is replaced. Ctrl-C or SIGTERM stop every worker at its next step boundary (then,
after `STOP_GRACE_S`, for good); a worker whose parent dies stops too.

Arithmetic: a trial in a worker computes exactly what a serial run at the same thread count computes.
A different thread count splits some reductions differently, so a serial two-thread run differs from
a one-thread worker in the last bits (measured: within 2e-3 of STS Pearson after 6 bf16 steps; 1e-8 in
fp32), far inside seed noise.
"""
import multiprocessing
import os
import queue
import signal
import sys
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..training import Interrupted

STOP_GRACE_S = 60.0     # after Ctrl-C: time for a worker to finish its step before it is killed
POLL_S = 1.0            # how often the parent looks for dead workers while waiting for messages


def cpu_count() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def auto_workers(device) -> int:
    """--workers auto: one per CPU on a CPU; one on a GPU (a second process would only share the device)."""
    return cpu_count() if torch.device(device).type == "cpu" else 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


@dataclass
class Unit:
    """Items that run in one worker, in order; `index` is its place in the plan."""
    index: int
    items: list


@dataclass
class _Worker:
    process: multiprocessing.Process
    inbox: object
    unit: Optional[Unit] = None
    position: int = 0                                  # the unit's item it is running
    done: list = field(default_factory=list)


def run_units(units: list, count: int, job: Callable, on_record: Callable, on_line: Callable,
              on_lost: Callable) -> None:
    """Run every unit's items in `count` forked workers of one thread each (fewer when there are fewer units).

    In a worker, `job(item, say)` returns the item's record; `say(text)` sends a progress line. In the parent,
    `on_record(item, record)` gets each record as its item finishes, `on_line(text)` each line, and
    `on_lost(item, reason)` an item whose worker died while running it (its record, for the results file).
    An exception a job raises (not one it records) stops every worker and is raised here.
    """
    context = multiprocessing.get_context("fork")
    outbox = context.Queue()
    threads = max(1, cpu_count() // count)
    pending = list(units)
    workers = {}
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt) if _main_thread() else None
    try:
        for wid in range(min(count, len(pending))):
            workers[wid] = _start(context, wid, outbox, job, threads)
            _give(workers[wid], pending)
        while any(w.unit is not None for w in workers.values()):
            try:
                message = outbox.get(timeout=POLL_S)
            except queue.Empty:
                _replace_dead(context, workers, pending, outbox, job, threads, on_lost)
                continue
            _handle(message, workers, pending, on_record, on_line)
    finally:
        _stop(workers.values())
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _handle(message: tuple, workers: dict, pending: list, on_record, on_line):
    kind, wid, payload = message
    worker = workers[wid]
    if kind == "line":
        on_line(payload)
    elif kind == "record":
        item = worker.unit.items[worker.position]
        worker.position += 1
        on_record(item, payload)
        if worker.position == len(worker.unit.items):
            _give(worker, pending)
    elif kind == "raise":
        raise payload
    elif kind == "stopped":
        raise Interrupted(payload, f"worker process {worker.process.pid} stopped by {signal.Signals(payload).name}")


def _give(worker: _Worker, pending: list):
    """The next unit to a free worker, or None: it exits."""
    worker.unit, worker.position = (pending.pop(0) if pending else None), 0
    worker.inbox.put(worker.unit)


def _replace_dead(context, workers: dict, pending: list, outbox, job, threads: int, on_lost):
    for wid, worker in list(workers.items()):
        if worker.unit is None or worker.process.is_alive():
            continue
        item = worker.unit.items[worker.position]
        on_lost(item, f"worker process {worker.process.pid} died (exit code {worker.process.exitcode}) while "
                      f"running it")
        rest = worker.unit.items[worker.position + 1:]
        if rest:  # the unit's later items did not run: they go first to the next free worker
            pending.insert(0, Unit(worker.unit.index, rest))
        workers[wid] = _start(context, wid, outbox, job, threads)
        _give(workers[wid], pending)


def _start(context, wid: int, outbox, job, threads: int) -> _Worker:
    inbox = context.SimpleQueue()
    process = context.Process(target=_serve, args=(wid, inbox, outbox, job, threads, os.getpid()),
                              name=f"sweep-worker-{wid}", daemon=True)
    process.start()
    return _Worker(process, inbox)


def _serve(wid: int, inbox, outbox, job, threads: int, parent: int):
    """A worker's life: units from `inbox` until None, each item's record to `outbox`."""
    _die_with(parent)
    torch.set_num_threads(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides (it asks with SIGTERM): one Ctrl-C, one stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def say(text: str):
        outbox.put(("line", wid, text))

    try:
        while (unit := inbox.get()) is not None:
            for item in unit.items:
                outbox.put(("record", wid, job(item, say)))
    except (Interrupted, KeyboardInterrupt) as e:  # a signal to this worker stops the sweep, as in a serial run
        outbox.put(("stopped", wid, e.exit_code - 128 if isinstance(e, Interrupted) else signal.SIGINT))
    except BaseException as e:  # noqa: BLE001  (an error the parent re-raises)
        outbox.put(("raise", wid, _picklable(e)))
    finally:
        outbox.close()
        outbox.join_thread()
    os._exit(0)  # no atexit handlers: they belong to the parent (pytest's, TensorBoard's)


def _picklable(e: BaseException) -> BaseException:
    try:
        import pickle
        pickle.dumps(e)
        return e
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}")


def _die_with(parent: int):
    """SIGTERM this process when the parent dies (Linux), so no orphan keeps training for nobody."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _stop(workers):
    """Ask every live worker to stop at its next step boundary; kill those still running after the grace."""
    live = [w.process for w in workers if w.process.is_alive()]
    for process in live:
        process.terminate()  # SIGTERM: the trainer's own handler stops at the next step
    for process in live:
        process.join(STOP_GRACE_S)
        if process.is_alive():
            process.kill()
            process.join()


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum, frame):
    raise Interrupted(signum, "stopped by SIGTERM")

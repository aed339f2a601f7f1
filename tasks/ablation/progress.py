"""What a running sweep prints: a line per finished trial (a bar on a terminal) and the running trials' own
progress lines, as training prints them without a terminal.

The trials' lines come from `TrialLines`, training's `ProgressLines` with the trial's label: in a worker
process it sends them to the parent (workers.py), which prints them with the rest, so lines never
interleave mid-line.
"""
import sys
import time

from ..training import ProgressLines

EVERY_S = 30.0   # a running trial's progress line this often, as training's without a terminal

class Progress:
    """A tqdm bar over the whole sweep on a terminal; otherwise one line per trial with the time left. The
    running trials' progress lines (`line`) go above the bar, or between those lines."""

    def __init__(self, total: int, done: int, workers: int = 1):
        self.total, self.done, self.workers = total, done, workers
        self.started, self.ran = time.time(), 0
        self.bar = None
        if sys.stdout.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=done, unit="trial", dynamic_ncols=True, desc="sweep")

    def line(self, text: str):
        if self.bar is not None:
            self.bar.write(text)
        else:
            print(text, flush=True)

    def update(self, trial, record):
        """A trial has ended: `record` its results line (line.TrialLine)."""
        self.done += 1
        self.ran += 1
        if record.ok:
            outcome = " ".join(f"{k}={v:.4f}" for k, v in record.dev.items() if v is not None) or "ok"
        else:
            outcome = f"FAILED ({record.error[:120]})"
        line = f"[{self.done}/{self.total}] {trial.mode} {trial.label} seed={trial.seed} " \
               f"fraction={trial.fraction:g}: {outcome} ({record.wall_time_s:.0f}s)"
        if self.bar is not None:
            self.bar.update(1)
            self.bar.write(line)
            return
        # Side by side, the workers' first trials end at about the same time: until each has finished one, count
        # the trials running beside this one as done, or the first estimate is `workers` times too long.
        rate = max(self.ran, min(self.workers, self.ran + self.total - self.done)) / (time.time() - self.started)
        left = (self.total - self.done) / rate
        print(line + (f", about {_duration(left)} left" if self.done < self.total else ""), flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class TrialLines(ProgressLines):
    """A running trial's progress, as training prints it without a terminal (the same `ProgressLines`): a line
    about every `every` seconds (step, losses, examples/s, time left in the trial), the first within `every` of
    its start, said by `say`."""

    def __init__(self, trial, say, every: float = None):
        super().__init__(say, EVERY_S if every is None else every)
        self.label = f"{trial.mode} {trial.label} seed={trial.seed} fraction={trial.fraction:g}"

    def line(self, step, total, losses, per_second, left):
        return (f"  {self.label}: step {step}/{total} loss {losses or '-'} {per_second:.1f} ex/s, "
                f"{_duration(left)} left in the trial")


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"

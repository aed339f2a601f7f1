"""What the benchmarks of this folder share."""
import json
import subprocess
import sys
from pathlib import Path

from tasks.data import DEFAULT_DATA_DIR, resolve_data_dir

# Where the course's files live on the benchmark machines: beside the checkout, shared by its worktrees.
SHARED_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "cs224n"
DATA_DIR_HELP = ("the course's csv files (default: $MINBERT_DATA_DIR, else <repo>/data, else "
                 "../shared/data/cs224n beside the repository)")


def add_trainer_setting(parser) -> None:
    """--model, --precision and --data-dir of a benchmark that times the trainer's own steps."""
    parser.add_argument("--model", default="minilm", help="checkpoint name or folder (default: %(default)s)")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    parser.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)


def data_dir(arg=None) -> Path:
    """The trainer's data folder (--data-dir, else $MINBERT_DATA_DIR, else <repo>/data).

    When nothing names a folder and <repo>/data holds no csv files, the shared
    folder beside the checkout: a benchmark then runs without setup.
    """
    folder = resolve_data_dir(arg)
    if folder == DEFAULT_DATA_DIR and not any(folder.glob("*.csv")):
        return SHARED_DATA_DIR
    return folder


RESULT_PREFIX = "RESULT "  # a worker's report: the last stdout line starting with this, then JSON


def report_result(result: dict) -> None:
    """A worker process's answer to the benchmark that started it: one JSON line on stdout."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _fail(what: str, proc: subprocess.CompletedProcess):
    sys.exit(f"bench: {what} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")


def run_checked(cmd, what: str, **popen) -> subprocess.CompletedProcess:
    """Run `cmd` to its end, its output captured; exit with one line naming `what` and its error if it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **popen)
    if proc.returncode != 0:
        _fail(what, proc)
    return proc


def run_worker(cmd: list, what: str, **popen) -> dict:
    """Run a worker process to its end and return its `report_result`; exit with its error otherwise."""
    proc = run_checked(cmd, what, **popen)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        _fail(what, proc)
    return json.loads(lines[-1][len(RESULT_PREFIX):])

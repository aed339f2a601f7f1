"""What the benchmarks of this folder share."""
from pathlib import Path

from tasks.data import DEFAULT_DATA_DIR, resolve_data_dir

# Where the course's files live on the benchmark machines: beside the checkout, shared by its worktrees.
SHARED_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "cs224n"
DATA_DIR_HELP = ("the course's csv files (default: $MINBERT_DATA_DIR, else <repo>/data, else "
                 "../shared/data/cs224n beside the repository)")


def data_dir(arg=None) -> Path:
    """The trainer's data folder (--data-dir, else $MINBERT_DATA_DIR, else <repo>/data).

    When nothing names a folder and <repo>/data holds no csv files, the shared
    folder beside the checkout: a benchmark then runs without setup.
    """
    folder = resolve_data_dir(arg)
    if folder == DEFAULT_DATA_DIR and not any(folder.glob("*.csv")):
        return SHARED_DATA_DIR
    return folder

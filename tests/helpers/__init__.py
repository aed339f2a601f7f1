"""Plain helpers the tests share (fixtures live in conftest.py); tests import them as `tests.helpers...`."""
import contextlib
import io
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def find_data_dir():
    for candidate in (os.environ.get("MINBERT_DATA_DIR"), REPO.parent / "shared" / "data" / "cs224n"):
        if candidate and (Path(candidate) / "ids-sst-dev.csv").exists():
            return Path(candidate)
    return None


def prediction_rows(path) -> list:
    """(id, value) strings of a course prediction file (`id \\t <header>`, then `<id> , <value>` rows),
    in file order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].split("\t")[0].strip() == "id", f"{path} is not a prediction file"
    return [tuple(field.strip() for field in line.split(",")) for line in lines[1:] if line.strip()]


def run_cli(main, argv):
    """Call a script's main() in-process; returns (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()

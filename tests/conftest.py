import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def find_data_dir():
    for candidate in (os.environ.get("MINBERT_DATA_DIR"), REPO.parent / "shared" / "data" / "cs224n"):
        if candidate and (Path(candidate) / "ids-sst-dev.csv").exists():
            return Path(candidate)
    return None


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run where CUDA is available and are skipped, with the reason, elsewhere."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir():
    found = find_data_dir()
    if found is None:
        pytest.skip("course data not found (set MINBERT_DATA_DIR)")
    return found


@pytest.fixture(scope="session")
def pretrained():
    """The embedded checkpoint, loaded once; tests that change a model deep-copy it."""
    import minbert
    return minbert.from_pretrained("minilm")


@pytest.fixture(scope="session")
def tokenizer(pretrained):
    import minbert
    return minbert.Tokenizer.from_folder(pretrained.source.folder)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _course_predictions(tmp_path, monkeypatch):
    """Runs copy their predictions into the course-level folder: a test's own, never the checkout's."""
    monkeypatch.setenv("MINBERT_PREDICTIONS_DIR", str(tmp_path / "course-predictions"))


@pytest.fixture(scope="session")
def small_data_dir(data_dir, tmp_path_factory):
    """The course's files cut to their first rows: real format, seconds to train on."""
    out = tmp_path_factory.mktemp("small-data")
    for src in data_dir.glob("*.csv"):
        if "cfimdb" in src.name:
            continue
        lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
        (out / src.name).write_text("".join(lines[:41]), encoding="utf-8")
    return out


def prediction_rows(path) -> list:
    """(id, value) strings of a course prediction file (`id \\t <header>`, then `<id> , <value>` rows),
    in file order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].split("\t")[0].strip() == "id", f"{path} is not a prediction file"
    return [tuple(field.strip() for field in line.split(",")) for line in lines[1:] if line.strip()]


def run_cli(main, argv):
    """Call a script's main() in-process; returns (exit status, stdout, stderr)."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()

"""The course's prediction files and submission zip, in their exact format.

The grader parses the files written by the course's starter code, so the
odd spacing (`id \\t Header \\n`, `id , value \\n`) and the header spelling
("Similiary") are kept byte for byte.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

from minbert.errors import DataError, UserError
from tasks.fileio import atomic_write_bytes, atomic_write_text

PREDICTION_FILES = {
    ("sst", "dev"): "sst-dev-output.csv",
    ("sst", "test"): "sst-test-output.csv",
    ("quora", "dev"): "para-dev-output.csv",
    ("quora", "test"): "para-test-output.csv",
    ("sts", "dev"): "sts-dev-output.csv",
    ("sts", "test"): "sts-test-output.csv",
}

HEADERS = {"sst": "Predicted_Sentiment", "quora": "Predicted_Is_Paraphrase", "sts": "Predicted_Similiary"}  # sic

SST_CLASSES = range(5)


def _format_value(task: str, value) -> str:
    """Render one prediction, refusing values the grader would misread."""
    number = float(value)
    if task == "sts":
        if not math.isfinite(number):
            raise ValueError(f"STS prediction {value!r} is not a finite number")
        return repr(number)
    if not number.is_integer():
        raise ValueError(f"{task} prediction {value!r} is not a class label")
    label = int(number)
    allowed = (0, 1) if task == "quora" else SST_CLASSES
    if label not in allowed:
        raise ValueError(f"{task} prediction {label} is not one of {list(allowed)}")
    return str(label)


def write_predictions(out_dir: str | os.PathLike, task: str, split: str, ids: Sequence, values: Sequence) -> Path:
    """Write one task's predictions for one split; returns the file's path."""
    if (task, split) not in PREDICTION_FILES:
        raise UserError(f"no prediction file for task {task!r} split {split!r}")
    ids, values = list(ids), list(values)
    if len(ids) != len(values):
        raise ValueError(f"{len(ids)} ids for {len(values)} predictions")
    lines = [f"id \t {HEADERS[task]} \n"]
    for example_id, value in zip(ids, values):
        example_id = str(example_id)
        if not example_id or any(c in example_id for c in ",\n\r"):
            raise ValueError(f"example id {example_id!r} cannot be written to a prediction file")
        lines.append(f"{example_id} , {_format_value(task, value)} \n")
    return atomic_write_text(Path(out_dir) / PREDICTION_FILES[task, split], "".join(lines))


def read_predictions(path: str | os.PathLike) -> list[tuple[str, str]]:
    """(id, value) pairs of a prediction file, in file order, as strings."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t")[0].strip() != "id":
        raise DataError(f"{path}: not a prediction file (the first line must be 'id \\t <header>')")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != 2 or not fields[0].strip():
            raise DataError(f"{path}: line {number} is not 'id , value'")
        rows.append((fields[0].strip(), fields[1].strip()))
    return rows


_CODE_SUFFIXES = (".py",)
_SKIPPED_DIRS = {"__pycache__", "runs", "node_modules", "site-packages", "venv", "env"}


def _is_code_file(name: str) -> bool:
    if name.endswith(_CODE_SUFFIXES) or name == "README.md":
        return True
    return name.startswith("requirements") and name.endswith(".txt")


def _is_skipped_dir(folder: Path) -> bool:
    """Virtual environments, caches, run outputs and hidden folders (.git, .venv)."""
    return (
        folder.name in _SKIPPED_DIRS
        or folder.name.startswith(".")
        or (folder / "pyvenv.cfg").exists()
    )


def _code_files(code_root: Path) -> Iterable[tuple[Path, str]]:
    for folder, subfolders, files in os.walk(code_root):
        folder = Path(folder)
        subfolders[:] = sorted(d for d in subfolders if not _is_skipped_dir(folder / d))
        for name in sorted(files):
            path = folder / name
            if _is_code_file(name) and not path.is_symlink():
                yield path, path.relative_to(code_root).as_posix()


def make_submission(
    zip_path: str | os.PathLike, code_root: str | os.PathLike, predictions_dir: str | os.PathLike
) -> Path:
    """Zip the source code and prediction files the way the course collects them.

    Only source (*.py, requirements*.txt, README.md) is taken from the code
    tree, so data files, checkpoints and virtual environments never bloat
    the upload; the prediction CSVs go under "predictions/".
    """
    code_root, predictions_dir = Path(code_root), Path(predictions_dir)
    if not code_root.is_dir():
        raise UserError(f"code folder {code_root} does not exist")
    predictions = sorted(predictions_dir.glob("*.csv")) if predictions_dir.is_dir() else []
    if not predictions:
        raise UserError(f"no prediction files (*.csv) in {predictions_dir}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, name in _code_files(code_root):
            archive.write(path, name)
        for path in predictions:
            archive.write(path, f"predictions/{path.name}")
    return atomic_write_bytes(zip_path, buffer.getvalue())

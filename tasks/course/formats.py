"""The course's prediction files, byte for byte as its starter code writes them.

The grader parses what the course's `classifier.py` (Part 1) and
`multitask_classifier.py` (Part 2) write: a header `id \\t <Header> \\n` and
rows `<id> , <value> \\n`, the value printed as Python prints the course's
numpy value: an integer class (`3`), the float of a rounded sigmoid for
paraphrase (`1.0`), a similarity's float32 with every digit of its double
value (`3.4812355041503906`). File
names, headers (with the course's spelling "Similiary") and formats come from
the task registry. A task declared with `--task-file` gets a GLUE-style TSV
file instead, `<name>-<split>-output.tsv`: a line `id<TAB>prediction`, then
`<id><TAB><value>` per example, the value a class as the task's files write it
or a score printed in full; no course grader reads those files, and they are
not copied into the course's submission folder.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from tasks.fileio import atomic_write_text
from tasks.registry import TaskConfig, get_task


def format_value(cfg: TaskConfig, value) -> str:
    """Render one prediction as the course's code prints it, refusing values the grader would misread."""
    number = float(value)
    if cfg.prediction_format in ("float", "float32"):
        if not math.isfinite(number):
            raise ValueError(f"{cfg.name} prediction {value!r} is not a finite number")
        # f"{s}" of a numpy float32 formats it as a Python float: every digit of its double value.
        return repr(float(np.float32(number)) if cfg.prediction_format == "float32" else number)
    if not number.is_integer():
        raise ValueError(f"{cfg.name} prediction {value!r} is not a class label")
    label = int(number)
    classes = cfg.kind.classes(cfg)
    if label not in classes:
        raise ValueError(f"{cfg.name} prediction {label} is not one of {list(classes)}")
    if cfg.prediction_format == "name":
        return cfg.label_names[label]
    return str(np.float32(label)) if cfg.prediction_format == "float_label" else str(label)


def prediction_text(task: str, ids: Sequence, values: Sequence) -> str:
    cfg = get_task(task)
    ids, values = list(ids), list(values)
    if len(ids) != len(values):
        raise ValueError(f"{len(ids)} ids for {len(values)} predictions")
    tsv = cfg.prediction_style == "tsv"
    header, row, separators = ("id\t{}\n", "{}\t{}\n", "\t\n\r") if tsv else ("id \t {} \n", "{} , {} \n", ",\n\r")
    lines = [header.format(cfg.prediction_header)]
    for example_id, value in zip(ids, values):
        example_id = str(example_id)
        if not example_id or any(c in example_id for c in separators):
            raise ValueError(f"example id {example_id!r} cannot be written to a prediction file")
        lines.append(row.format(example_id, format_value(cfg, value)))
    return "".join(lines)


def write_predictions(out_dir: str | os.PathLike, task: str, split: str, ids: Sequence, values: Sequence,
                      mode: Optional[str] = None) -> Path:
    """Write one task's predictions for one split; returns the file's path.

    `mode` (Part 1's `pretrain`/`finetune`, or the newer spelling) selects the
    course's Part-1 file name, `{mode}-sst-dev-out.csv`; without it the Part-2
    name is used (`sst-dev-output.csv`).
    """
    name = get_task(task).prediction_file(split, mode)
    return atomic_write_text(Path(out_dir) / name, prediction_text(task, ids, values))


"""One declarative record per task: the single place a task is defined.

Readers (`tasks/data.py`), heads and losses (`tasks/heads.py`), tokenisation
(`tasks/encoded.py`), metrics (`tasks/metrics.py`), prediction files
(`tasks/course/formats.py`) and the command lines read these records; nothing
else branches on a task's name. What depends on a task's head kind is read
from the kind's own record (`tasks/head_kinds.py`). Adding a task is adding a `TaskConfig` here;
a user adds one from a file of their own with `--task-file`
(`tasks/task_file.py`), which registers its records beside the course's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from minbert.errors import UserError

from .head_kinds import BINARY, CLASSIFY, REGRESS, HeadKind, head_kind

SPLITS = ("train", "dev", "test")  # "test" is the course's test-student file
PREDICTION_STYLES = ("course", "tsv")

Column = Union[str, int]  # a header's column name, or a 0-based index in a file without a header


@dataclass(frozen=True)
class Layout:
    """Which columns of one split's file hold what; a test file may differ from train's (GLUE's have an index
    column and a header where CoLA's train file has neither)."""
    header: bool
    text_columns: tuple
    label_column: Column
    id_column: Optional[Column]              # None: the data row's number, from 0


@dataclass(frozen=True)
class TaskConfig:
    """What a task is, from its files on disk to the lines of its prediction files.

    head_kind: the name of the task's head kind (`tasks/head_kinds.py`; `kind`
    is its record): a softmax over `num_classes` labels (cross-entropy), one
    logit for labels 0/1 (BCE), or a score in `label_range` (MSE).
    `prediction_format` is how the course's own code
    prints a prediction: "label" an integer class, "float_label" the float of
    a rounded sigmoid (`0.0`), "float32" a numpy float32 formatted as a Python float;
    a declared task's is "name" (the class as its files write it), "label" or
    "float" (a score, every digit).
    `outputs` maps a command ("multitask" = Part 2, "classifier" = Part 1) to
    a file name template with `{split}` and, for Part 1, `{mode}`.
    """
    name: str
    files: Mapping[str, str]                 # split -> file name in the data folder
    text_columns: tuple                      # one or two sentence columns
    label_column: str                        # absent from test files
    head_kind: str                           # the name of its head kind; config.json records it as "head"
    metric: str
    label_range: tuple                       # inclusive (low, high)
    num_classes: Optional[int]               # classes of a head kind that has classes, else None
    prediction_header: str
    prediction_format: str
    outputs: Mapping[str, str]
    max_length: int = 128                    # default tokens per sequence
    id_column: Optional[Column] = "id"       # None: the data row's number, from 0
    description: str = ""
    delimiter: str = "\t"
    quoting: bool = True                     # csv double quotes; GLUE's TSVs are read without (quotechar=None)
    header: bool = True                      # False: columns are 0-based indices
    label_names: Optional[tuple] = None      # classes as the files write them, in class order
    layouts: Mapping[str, Layout] = field(default_factory=dict)  # split -> its own columns, where they differ
    prediction_style: str = "course"         # "tsv": id<TAB>prediction lines (declared tasks)
    declared_in: Optional[str] = None        # the --task-file a declared task comes from; None for the course's

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def kind(self) -> HeadKind:
        """The record of the task's head kind."""
        return head_kind(self.head_kind)

    def prediction_file(self, split: str, mode: Optional[str] = None) -> str:
        """The course's file name for this task's `split` predictions (Part 1 when `mode` is given)."""
        if split not in ("dev", "test"):
            raise UserError(f"no prediction file for split {split!r} (only dev and test)")
        command = "classifier" if mode is not None else "multitask"
        template = self.outputs.get(command)
        if template is None:  # a task the course has no such file for: the same pattern, its own name
            ext = "tsv" if self.prediction_style == "tsv" else "csv"
            template = f"{{mode}}-{self.name}-{{split}}-out.{ext}" if mode else f"{self.name}-{{split}}-output.{ext}"
        return template.format(split=split, mode=mode)

    def layout(self, split: str) -> Layout:
        """The columns of `split`'s file: the task's own unless the split has its own layout."""
        return self.layouts.get(split) or Layout(self.header, self.text_columns, self.label_column, self.id_column)

    def describe(self) -> dict:
        """A json-able record of the declaration, for run configs (the head kind under its recorded key, "head")."""
        return {("head" if k == "head_kind" else k): v for k, v in dataclasses.asdict(self).items()}

    def __post_init__(self):
        assert self.metric in self.kind.metrics and 1 <= len(self.text_columns) <= 2
        assert (self.num_classes is not None) == self.kind.has_classes
        assert self.prediction_style in PREDICTION_STYLES


def _course_files(prefix: str) -> dict:
    return {"train": f"{prefix}-train.csv", "dev": f"{prefix}-dev.csv", "test": f"{prefix}-test-student.csv"}


REGISTRY: dict = {t.name: t for t in (
    TaskConfig(
        name="sst", files=_course_files("ids-sst"), text_columns=("sentence",), label_column="sentiment",
        head_kind=CLASSIFY.name, num_classes=5, metric="accuracy", label_range=(0, 4),
        prediction_header="Predicted_Sentiment", prediction_format="label",
        outputs={"multitask": "sst-{split}-output.csv", "classifier": "{mode}-sst-{split}-out.csv"},
        description="Stanford Sentiment Treebank, 5 classes (Part 1 and Part 2)"),
    TaskConfig(
        name="quora", files=_course_files("quora"), text_columns=("sentence1", "sentence2"),
        label_column="is_duplicate", head_kind=BINARY.name, num_classes=None, metric="accuracy", label_range=(0, 1),
        prediction_header="Predicted_Is_Paraphrase", prediction_format="float_label",
        outputs={"multitask": "para-{split}-output.csv"},
        description="Quora question pairs, paraphrase or not (Part 2)"),
    TaskConfig(
        name="sts", files=_course_files("sts"), text_columns=("sentence1", "sentence2"),
        label_column="similarity", head_kind=REGRESS.name, num_classes=None, metric="pearson", label_range=(0.0, 5.0),
        prediction_header="Predicted_Similiary",  # sic: the course's spelling, which its grader reads
        prediction_format="float32", outputs={"multitask": "sts-{split}-output.csv"},
        description="SemEval STS benchmark, similarity 0..5 (Part 2)"),
    TaskConfig(
        name="cfimdb", files=_course_files("ids-cfimdb"), text_columns=("sentence",), label_column="sentiment",
        head_kind=CLASSIFY.name, num_classes=2, metric="accuracy", label_range=(0, 1),
        prediction_header="Predicted_Sentiment", prediction_format="label",
        outputs={"classifier": "{mode}-cfimdb-{split}-out.csv"},
        max_length=512,  # movie reviews: most are longer than 128 tokens
        description="CFIMDB movie reviews, positive or negative (Part 1)"),
)}

MULTITASK_TASKS = ("sst", "quora", "sts")  # the course's Part 2, train_multitask.py's default
CLASSIFIER_TASKS = ("sst", "cfimdb")       # the course's Part 1, classifier.py's default
COURSE_TASKS = tuple(REGISTRY)


def get_task(name: str) -> TaskConfig:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(f"unknown task {name!r}; expected one of {', '.join(REGISTRY)}") from None


def set_declared_tasks(configs) -> None:
    """Make `configs` the declared tasks, beside the course's: those of an earlier command in this process go.

    Each command declares its tasks afresh (tasks.config.validate), so a process
    running several commands (the tests, a notebook) never sees another's.
    """
    for name in [n for n, t in REGISTRY.items() if t.declared_in is not None]:
        del REGISTRY[name]
    for cfg in configs:
        assert cfg.name not in REGISTRY and cfg.declared_in is not None
        REGISTRY[cfg.name] = cfg

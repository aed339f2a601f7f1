"""A trial's results line, typed and versioned: what ablate.py appends for each trial (results.py) and the
reproduction keeps (tasks/reproduction/kept.py). Every reader and writer of those lines goes through `TrialLine`.

A line says which trial it is (key, mode, config, group, params, seed, data_fraction, the sweep's fingerprint),
where and how it ran (precision, device, workers, threads, wall time, when it finished) and what became of it:
"failed" with its error, or "ok" with its measures and its `Budget` (what its training spent).

The measures are named numbers, not a dataclass per study: a sweep's metrics are its tasks (declared tasks too)
and a study's curves its own open set of names (dynamics' "weight_l2.<tensor>" per tensor), and every reader
treats them alike by name (`metrics`): dev and dev_best {task: score}, curves {name: [value per layer]}. `params`
(the configuration as values) and `info` (a study's own account: a probe's penalties, a transfer's intermediate
stage) belong to the study that wrote them and are read by it alone.

Schema 2 writes its number and every section, empty where the trial has none. A line without a number is
schema 1, as ablate.py wrote them until 2026-11-28 (the kept results under docs/reproduction/ are): `upgrade_1`.
"""
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from minbert import UserError

from ..fileio import read_numbered_jsonl

SCHEMA = 2
OK, FAILED = "ok", "failed"
BEST = "dev_best/"  # a trial's best evaluation's metrics: dev_best/<task> beside its final dev/<task>


@dataclass(frozen=True)
class PlateauAccount:
    """How the plateau rule (plateau.py) ended a trial's training: the rule, whether it stopped it, and where."""
    patience: int
    tolerance: float
    holdout_share: float
    holdout_max: int
    metric: str                 # the held-out score it watched: the task's, or "overall" for several
    stopped: bool               # the plateau ended it (else the step cap)
    stop_step: int
    best: Optional[float]
    best_step: Optional[int]
    train_rows: dict            # task -> rows trained on
    holdout_rows: dict          # task -> rows held out


@dataclass(frozen=True)
class Budget:
    """What a trial's training spent (`sweep.budget`, `Sweep.fit`): its cap and what it trained, its curves."""
    steps: int                  # the cap
    epochs: int
    steps_per_epoch: int
    eval_every: int
    trained_steps: int
    dev_curve: list             # [{"step", task: score}] at each evaluation
    plateau: Optional[PlateauAccount] = None   # None where no plateau rule ran (a fixed budget)
    heldout_curve: list = field(default_factory=list)  # [{"step", "score", task: score}]; [] without the rule

    @classmethod
    def from_json(cls, data: dict) -> "Budget":
        return cls(**{**data, "plateau": data["plateau"] and PlateauAccount(**data["plateau"])})

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrialLine:
    """One trial's results line (the module's docstring says what each part is)."""
    key: str                    # study.Trial.key: mode|config|seed|fraction|fingerprint
    mode: str
    config: str                 # the configuration's label
    group: str                  # what the summary pools over seeds: the configuration unless the study set one
    params: dict                # the configuration as values (the study's own)
    seed: int
    data_fraction: float
    status: str                 # OK or FAILED
    fingerprint: str = ""       # the sweep's (sweep.fingerprint); "" where a line did not record one
    precision: str = ""         # "" where not recorded
    device: str = ""            # "cpu", "cuda:0"; "" where not recorded
    dev: dict = field(default_factory=dict)         # {task: final dev score}; the trial's result
    dev_best: dict = field(default_factory=dict)    # {task: best dev score}: optimistic, chosen on dev
    best_step: Optional[int] = None
    steps: Optional[int] = None                     # the steps it trained; None where it trained none
    budget: Optional[Budget] = None                 # None where it trained none (a probe, a comparison)
    curves: dict = field(default_factory=dict)      # {name: [value per layer]}
    info: dict = field(default_factory=dict)        # the study's own account
    error: str = ""                                 # a failed trial's error and the end of its traceback
    traceback: str = ""
    wall_time_s: Optional[float] = None
    finished_at: str = ""                           # "%Y-%m-%dT%H:%M:%SZ", UTC; "" where not recorded
    workers: Optional[int] = None                   # the worker processes and threads it ran among
    threads: Optional[int] = None
    schema: int = SCHEMA

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def pairs(self) -> bool:
        """A comparison of two seeds' fine-tunings: its unit is the pair (one unit fewer than the seeds)."""
        return self.params.get("kind") == "seeds"

    @property
    def total_steps(self) -> Optional[int]:
        """Both stages of a transfer trial (info.total_steps, where its intermediate stage's budget was kept);
        else the steps it trained."""
        return self.info.get("total_steps") or self.steps

    @property
    def plateau(self) -> Optional[PlateauAccount]:
        return self.budget.plateau if self.budget else None

    @property
    def heldout_curve(self) -> list:
        return self.budget.heldout_curve if self.budget else []

    @property
    def metrics(self) -> dict:
        """Every number the trial measured: final dev metrics as dev/<task>, best ones as dev_best/<task>,
        per-layer curves as <curve>/<layer>."""
        out = {f"dev/{k}": v for k, v in self.dev.items() if v is not None}
        out.update({f"{BEST}{k}": v for k, v in self.dev_best.items() if v is not None})
        for name, values in self.curves.items():
            out.update({f"{name}/{i}": v for i, v in enumerate(values)})
        return out

    @classmethod
    def from_json(cls, data: dict, where: str = "a trial line") -> "TrialLine":
        """A line as read from JSON, upgraded from an older schema; one line naming `where` (the file and line)
        where it is of another schema or malformed."""
        schema = data.get("schema", 1)
        if schema != SCHEMA and schema not in UPGRADES:
            raise UserError(f"{where}: a trial line of schema {schema}, this code reads schemas 1 to {SCHEMA}")
        try:
            data = UPGRADES[schema](data) if schema in UPGRADES else data
            return cls(**{**data, "budget": data["budget"] and Budget.from_json(data["budget"])})
        except (KeyError, TypeError, AttributeError) as e:
            raise UserError(f"{where}: not a trial line of schema {SCHEMA} ({type(e).__name__}: {e})") from None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def upgrade_1(data: dict) -> dict:
    """A schema-1 line as schema 2. Schema 1 left out what a trial did not write (a probe's budget, a comparison's
    dev scores, every trial's info but a probe's or transfer's) or wrote it as null, had no heldout_curve in a
    budget without the plateau rule, and in its oldest lines no group (the configuration was the group)."""
    written = {k: v for k, v in data.items() if v is not None}
    budget = written.get("budget")
    return {"dev": {}, "dev_best": {}, "curves": {}, "info": {}, "budget": None, **written,
            "group": written.get("group") or data["config"], "schema": SCHEMA,
            **({"budget": {"plateau": None, "heldout_curve": [], **budget}} if budget else {})}


UPGRADES = {1: upgrade_1}


def read_lines(path: Path) -> list:
    """A results file's trial lines ([] where it does not exist yet; a torn last line, what a killed write
    leaves, dropped); one line naming the file and line where one is not a trial line this code reads."""
    return [TrialLine.from_json(data, f"{path}: line {number}") for number, data in read_numbered_jsonl(path)]

"""The reproduction's raw results, kept with the report: one folder per experiment and run.

    RESULTS/EXPERIMENT/RUN/run.json        one `KeptRun`: what was run (scale, model, tasks, seeds, each sweep's
                                           options), where its trials trained and from which weights, its sittings
    RESULTS/EXPERIMENT/RUN/SWEEP.jsonl     the sweep's finished trials, as ablate.py wrote them (one
                                           tasks.ablation.line.TrialLine a line, of the schema it was kept in)

RUN is "first" for the declared protocol, or a follow-up's label (follow_ups.py): extra seeds or a changed
protocol never replace the first run's trials. A results folder keeps one model's runs, and gets its own report.
A trial already kept is never replaced, so a run resumed later only adds the trials it lacked; shards of one run
kept at once take turns on a lock file in the run's folder.

A run names its model by what it is (`tasks.pretraining.Model`), never by a path; schema 3 named it by one (`upgrade`).
"""
import dataclasses
import fcntl
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple, Optional

from minbert import UserError

from ..ablation.line import read_lines
from ..fileio import atomic_write_text, safe_join
from ..machine import busy_time
from ..pretraining import REBUILT, Model, name_from_path
from .follow_ups import FIRST, FOLLOW_UPS
from .measures import Results

SCHEMA = 4
PROTOCOL = ("experiment", "run", "scale", "tasks", "seeds", "sweeps")   # what makes two sittings one run


@dataclass(frozen=True)
class Sitting:
    """One process that added trials to a run: when it ended, from which commit, where, how long, how many."""
    date: str                   # "%Y-%m-%d %H:%M UTC"
    commit: str                 # 12 hex digits, "+changes" for a dirty tree
    machine: str                # its CPU, "with GPU" where it trained on one
    wall_time_s: float
    trials: int                 # the trials it added (a --gather sitting keeps trials other processes trained)


@dataclass
class KeptRun:
    """One experiment's run as kept: its protocol, its model, where its trials trained, and its sittings."""
    experiment: str
    run: str                    # "first" or a follow-up's label
    protocol: int
    scale: str
    model: str                  # the model's short name (`Model.name`), never a path
    tasks: dict                 # role -> task
    seeds: list
    layers: int
    sweeps: dict                # sweep label -> ablate.py's flags
    device: str = ""            # the kind of device every trial trained on ("cpu", "cuda"); "" before any trial
    weights: str = ""           # sha256 prefix of the weights every trial started from; "" where not recorded
    recipe: str = ""            # the pretrain.py command that made the model; "" for a published one
    masked_accuracy: Optional[float] = None    # the model's held-out masked-token accuracy from pretrain.py
    heads: int = 0              # the model's attention heads a layer; 0 where not recorded
    sittings: list = field(default_factory=list)   # [Sitting]
    schema: int = SCHEMA

    @property
    def wall_minutes(self) -> float:
        return sum(s.wall_time_s for s in self.sittings) / 60

    @property
    def identity(self) -> Model:
        return Model(self.model, self.weights, self.recipe, self.masked_accuracy, self.heads)


def upgrade(data: dict) -> dict:
    """A schema-3 run.json as schema 4: its model a name, not a path; its recipe, accuracy and heads unrecorded."""
    return {**data, "model": name_from_path(data["model"]), "schema": SCHEMA}


def read_run(path: Path) -> KeptRun:
    """A run.json as its KeptRun; one line naming the file where it is of another schema or malformed."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    schema = data.get("schema", 1)
    if schema == 3:
        data, schema = upgrade(data), SCHEMA
    if schema != SCHEMA:
        raise UserError(f"{path}: a kept run of schema {schema}, this code reads schema {SCHEMA}: "
                        "a folder kept before 2026-11-28 converts with "
                        "git show 624dd4f:tools/convert_kept_runs.py")
    try:
        return KeptRun(**{**data, "sittings": [Sitting(**s) for s in data["sittings"]]})
    except (KeyError, TypeError) as e:
        raise UserError(f"{path}: not a kept run of schema {SCHEMA} ({e})") from None


def write_run(path: Path, run: KeptRun) -> None:
    atomic_write_text(path, json.dumps(dataclasses.asdict(run), indent=1, sort_keys=True) + "\n")


def device_kind(line) -> str:
    """The kind of device a trial line says it trained on ("cuda:0" -> "cuda"); "" where it says none."""
    return line.device.split(":")[0]


def trial_spans(records: list) -> list:
    """(start, end) of each trial line, seconds since the epoch: its `finished_at` less its `wall_time_s`."""
    ends = [datetime.strptime(r.finished_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
            for r in records]
    return [(end - r.wall_time_s, end) for end, r in zip(ends, records)]


def store(results_dir: Path, run: KeptRun, records: dict, sitting: Sitting) -> Path:
    """Keep a run's finished trials ({sweep label: [TrialLine]}) and this sitting; refuse another protocol or model,
    and trials that would mix (`refuse`). Every check comes before any write: a refused sitting leaves the run as
    it was, and a sitting that adds trials leaves the lines kept before as they were written."""
    folder = safe_join(Path(results_dir), run.experiment, run.run)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as lock:   # shards keeping at once take turns; closing the file unlocks it
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = folder / "run.json"
        kept = read_run(path) if path.exists() else dataclasses.replace(run, sittings=[], device="")
        check_one_setting({run.run: {run.experiment: (kept, {})}}, run.scale, run.model, run.weights)
        changed = [k for k in PROTOCOL if getattr(kept, k) != getattr(run, k)]
        if changed:
            raise UserError(f"{path}: this run was made with other {', '.join(changed)}; extra seeds or a changed "
                            f"protocol are a follow-up (tasks/reproduction/follow_ups.py), never a replacement")
        files = {}
        for label, new in records.items():
            old = read_lines(sweep_path := safe_join(folder, f"{label}.jsonl"))
            keys = {r.key for r in old}
            files[sweep_path] = (old, [r for r in new if r.key not in keys])
        added = [r for _, fresh in files.values() for r in fresh]
        kinds = {device_kind(r) for r in added} - {""}
        refuse(path, kept, kinds, run.weights if added else "", list(files.values()))
        for sweep_path, (old, fresh) in files.items():
            kept_text = sweep_path.read_text(encoding="utf-8") if old else ""
            atomic_write_text(sweep_path, kept_text + "".join(json.dumps(r.to_json(), sort_keys=True) + "\n"
                                                              for r in fresh))
        kept.device = kept.device or next(iter(kinds), "")
        if added:   # a run kept without its weights never claims a later sitting's for all
            kept.weights = kept.weights if kept.sittings else run.weights
            kept.sittings.append(dataclasses.replace(sitting, trials=len(added)))
        write_run(path, kept)
    return folder


def refuse(path: Path, kept: KeptRun, kinds: set, weights: str, sweeps: list = ()) -> None:
    """Refuse trials trained on another kind of device, from other weights, or (`sweeps`: (kept trials, new trials)
    of each sweep) with another sweep fingerprint (every training option, the weights' and data's hashes) than the
    run's kept trials, or in two precisions across the run's sweeps: arms paired by seed differ only by the
    arm, and two devices' kernels, a copy of the weights rounded to fp16 or bf16's rounding against fp32's
    would read as the arm's effect. What the run does not record yet is not compared."""
    prints = [({r.fingerprint for r in old} - {""}, {r.fingerprint for r in new} - {""}) for old, new in sweeps]
    other = next(((sorted(had), sorted(got - had)) for had, got in prints if had and got - had), None)
    kept_in = {r.precision for old, _ in sweeps for r in old} - {""}
    these = {r.precision for _, new in sweeps for r in new} - {""}
    if len(kinds | ({kept.device} - {""})) > 1:
        why = f"trained on {kept.device or 'one kind of device'}, these on {', '.join(sorted(kinds))}"
    elif weights and kept.weights and weights != kept.weights:
        why = f"trained from weights {kept.weights}, these from {weights} (the same model name, other weights)"
    elif other:
        why = f"trained with fingerprint {', '.join(other[0])}, these with {', '.join(other[1])} (other options)"
    elif len(kept_in | these) > 1:
        mixed, before = " and ".join(sorted(kept_in | these)), ", ".join(sorted(kept_in)) or "none"
        why = f"would mix {mixed} (kept: {before}; these: {', '.join(sorted(these))})"
    else:
        return
    raise UserError(f"{path}: this run's trials {why}: arms paired by seed would differ by more than the arm; resume "
                    f"it as it trained, or keep these in another --results folder (or a declared follow-up)")


def refuse_mixing(results_dir: Path, experiment: str, label: str, weights: str, device: str = "") -> None:
    """`refuse` before any training (its trials would train, then not be kept); `device` "" where nothing trains."""
    path = safe_join(Path(results_dir), experiment, label) / "run.json"
    if path.exists():
        refuse(path, read_run(path), {device} - {""}, weights)


class Kept(NamedTuple):
    """One experiment's kept run: its run.json and its sweeps' trials."""
    run: KeptRun
    sweeps: dict                # sweep label -> [TrialLine]

    def minutes(self) -> float:
        """What the run took: its sittings' wall time, or its trials' busy time where that is longer (a
        sitting that kept trials trained in earlier sittings or by shards took seconds itself)."""
        busy = busy_minutes(self.sweeps)
        return max(self.run.wall_minutes, busy or 0.0)


def busy_minutes(sweeps: dict) -> Optional[float]:
    """Minutes at least one of the sweeps' trials ran (their intervals' union); None where a trial lacks its
    times (no `finished_at` or `wall_time_s`), or there are none."""
    records = [r for found in sweeps.values() for r in found]
    if not records or any(not r.finished_at or r.wall_time_s is None for r in records):
        return None
    return busy_time(trial_spans(records)) / 60


class KeptRuns(dict):
    """Every kept run of a results folder, {run label: {experiment: Kept}} (`load`)."""

    def of(self, label: str) -> dict:
        """{experiment: Kept} of the run `label`; {} where it kept nothing."""
        return self.get(label, {})

    def kept(self, label: str, experiment: str) -> Optional[Kept]:
        """The run `label`'s kept `experiment`, or None."""
        return self.of(label).get(experiment)

    def runs(self) -> list:
        """Every kept run's record."""
        return [kept.run for by_experiment in self.values() for kept in by_experiment.values()]


def load(results_dir: Path) -> KeptRuns:
    """Every kept run in `results_dir`."""
    out = KeptRuns()
    for path in sorted(Path(results_dir).glob("*/*/run.json")):
        run = read_run(path)
        sweeps = {p.stem: read_lines(p) for p in sorted(path.parent.glob("*.jsonl"))}
        out.setdefault(run.run, {})[run.experiment] = Kept(run, sweeps)
    return out


def results_for(runs: KeptRuns, label: str) -> Results:
    """The trials a run label's findings read: the first runs, with the runs of the follow-ups it builds on
    (`FollowUp.over`) and then the label's own in their place; `Results.source` says which run each came from."""
    results = Results()
    over = FOLLOW_UPS[label].over if label in FOLLOW_UPS else ()
    for source in dict.fromkeys((FIRST, *over, label)):
        for experiment, (_, sweeps) in runs.of(source).items():
            for sweep_label, records in sweeps.items():
                results.add(experiment, sweep_label, records, source)
    return results


def depths(runs: KeptRuns) -> set:
    """The depths the kept runs record."""
    return {run.layers for run in runs.runs()}


def identity_of(runs: KeptRuns) -> Optional[Model]:
    """The model a results folder's kept runs record (check_one_setting keeps it one), from the run that records
    most of it; None where none."""
    found = [run.identity for run in runs.runs()]
    return max(found, key=lambda m: (bool(m.weights), bool(m.recipe), bool(m.heads)), default=None)


def check_one_setting(runs: KeptRuns, scale: str, model: str, weights: str = "") -> None:
    """A results folder holds one scale and one model: a report mixes neither. A model is its name, or its weights
    where both record them; a model pretrained here (its runs record a recipe) is its weights: a checkpoint rebuilt
    from the recipe is another model unless its weights hash the same (pretrain.py does not rebuild weights bit for
    bit across devices). A published model's copies may differ by device; `refuse` keeps each run to one."""
    def named(model, weights):
        return model + (f" (weights {weights})" if weights else "")
    for label, experiments in runs.items():
        for experiment, (run, _) in experiments.items():
            if run.scale == scale and run.model == model and run.identity.rebuilt_as(weights):
                raise UserError(f"the results folder's {experiment}/{label} trained {model} from weights "
                                f"{run.weights}, this checkpoint's are {weights}: {REBUILT} (give it its own "
                                f"--results)")
            if run.scale != scale or not (run.model == model or (run.weights and run.weights == weights)):
                raise UserError(f"the results folder holds {experiment}/{label} at scale {run.scale} with "
                                f"{named(run.model, run.weights)}, not scale {scale} with {named(model, weights)}: "
                                f"one folder keeps one model's runs (give --results another folder)")


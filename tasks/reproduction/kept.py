"""The reproduction's raw results, kept with the report: one folder per experiment and run.

    RESULTS/EXPERIMENT/RUN/run.json        what was run (scale, model, tasks, seeds, each sweep's options) and
                                           each sitting that added trials (commit, CPU, date, wall time)
    RESULTS/EXPERIMENT/RUN/SWEEP.jsonl     the sweep's finished trials, as ablate.py wrote them

RUN is "first" for the declared protocol, or a follow-up's label (follow_ups.py): extra seeds or a changed
protocol never replace the first run's trials. Storing into a run folder whose run.json says another protocol
(seeds, options, scale) or another model is refused; a trial already kept is never replaced, so a run resumed in a
later sitting only adds the trials it lacked; shards of one run kept at once (reproduce.py --shard) take turns
on a lock file in the run's folder. RESULTS is one model's folder (models.py): the first model's is the
results folder itself, another's RESULTS/models/SLUG, whose run.json files record the model's path and hash.
"""
import contextlib
import fcntl
import json
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from minbert import UserError

from ..fileio import atomic_write_text, safe_join
from .follow_ups import FIRST, FOLLOW_UPS
from .measures import Results

STAMP = "%Y-%m-%d %H:%M UTC"   # a sitting's date and its trials' span, in UTC


def protocol_of(run: dict) -> dict:
    """What makes two sittings the same run: the fields that change what a trial measures."""
    return {k: run.get(k) for k in ("experiment", "run", "scale", "tasks", "seeds", "sweeps")}


def same_model(kept: dict, run: dict) -> bool:
    """Whether two run records name one model: by hash where both record it (a path may be written two ways),
    else by name."""
    a, b = kept.get("model_identity"), run.get("model_identity")
    if a and b:
        return a.get("hash") == b.get("hash")
    return kept.get("model") == run.get("model") and not (a or b)


def model_text(run: dict) -> str:
    identity = run.get("model_identity") or {}
    return f"{run.get('model')}" + (f" (hash {identity['hash'][:12]})" if identity.get("hash") else "")


def store(results_dir: Path, run: dict, records: dict, sitting: dict) -> Path:
    """Keep a run's finished trials ({sweep label: records}) and this sitting; refuse another protocol."""
    folder = safe_join(Path(results_dir), run["experiment"], run["run"])
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / ".lock"):
        return _store(folder, run, records, sitting)


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on `path` (created if missing): read-add-write of a run's files is one turn."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _store(folder: Path, run: dict, records: dict, sitting: dict) -> Path:
    meta_path = folder / "run.json"
    meta = {**run, "sittings": []}
    if meta_path.exists():
        kept = json.loads(meta_path.read_text(encoding="utf-8"))
        if not same_model(kept, run):
            raise UserError(f"{meta_path}: keeps the runs of model {model_text(kept)}, not {model_text(run)}: one "
                            f"folder keeps one model's runs (reproduce.py --model keeps another's in "
                            f"RESULTS/models/SLUG)")
        if protocol_of(kept) != protocol_of(run):
            changed = [k for k, v in protocol_of(run).items() if kept.get(k) != v]
            raise UserError(f"{meta_path}: this run was made with other {', '.join(changed)}; extra seeds or a "
                            f"changed protocol are a follow-up with its own label (FOLLOW_UPS in "
                            f"tasks/reproduction/follow_ups.py, then --follow-up LABEL), never a replacement")
        check_weights(meta_path, kept, sitting)
        meta = kept
    files = {}   # every check before any write: a refused sitting leaves the run as it was
    for label, new in records.items():
        path = safe_join(folder, f"{label}.jsonl")
        old = load_jsonl(path)
        keys = {r["key"] for r in old}
        files[path] = (old, [r for r in new if r["key"] not in keys])
        check_fingerprints(path, *files[path])
    added = [r for _, fresh in files.values() for r in fresh]
    devices = trained_on(added)
    check_devices(meta_path, meta, set(devices))
    for path, (old, fresh) in files.items():
        atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in old + fresh))
    meta["sittings"] = [*meta.get("sittings", []), {**sitting, "trials_added": len(added),
                                                    "trained_on": devices, **trained_span(added),
                                                    **trained_before(added, sitting)}]
    atomic_write_text(meta_path, json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return folder


def load_jsonl(path: Path) -> list:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(results_dir: Path) -> dict:
    """{run label: {experiment: (run.json, {sweep label: records})}} of every kept run."""
    out = {}
    for meta_path in sorted(Path(results_dir).glob("*/*/run.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        sweeps = {p.stem: load_jsonl(p) for p in sorted(meta_path.parent.glob("*.jsonl"))}
        out.setdefault(meta["run"], {})[meta["experiment"]] = (meta, sweeps)
    return out


def results_for(runs: dict, label: str) -> Results:
    """The trials a run label's findings read: the first runs, with the runs of the follow-ups it builds on
    (`FollowUp.over`) and then the label's own in their place; `Results.source` says which run each came from."""
    results = Results()
    over = FOLLOW_UPS[label].over if label in FOLLOW_UPS else ()
    for source in dict.fromkeys((FIRST, *over, label)):
        for experiment, (_, sweeps) in runs.get(source, {}).items():
            for sweep_label, records in sweeps.items():
                results.add(experiment, sweep_label, records, source)
    return results


def depths(runs: dict) -> set:
    """The depths (run.json's "layers") the kept runs record."""
    return {meta.get("layers") for by_experiment in runs.values() for meta, _ in by_experiment.values()}


def check_one_setting(runs: dict, scale: str, model: str, identity=None) -> None:
    """A model's results folder holds one scale and one model (by hash where recorded): a report mixes neither."""
    wanted = {"model": model, **({"model_identity": identity} if identity else {})}
    for label, experiments in runs.items():
        for experiment, (meta, _) in experiments.items():
            if meta.get("scale") != scale or not same_model(meta, wanted):
                raise UserError(f"the results folder holds {experiment}/{label} at scale {meta.get('scale')} with "
                                f"{model_text(meta)}: give --results another folder for scale {scale} with {model}")


def trained_on(records: list) -> dict:
    """{device: trials} of the trials a sitting adds, from their own records: a sitting may keep trials another
    process trained (a shard, a killed sitting, a device whose kept folder was gathered here)."""
    return dict(sorted(Counter(str(r.get("device", "?")).split(":")[0] for r in records).items()))


def _spans(records: list) -> list:
    """[(start, end)] (UTC) of the records that carry their finish and wall times."""
    times = []
    for r in records:
        try:
            end = datetime.strptime(r["finished_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except (KeyError, TypeError, ValueError):
            continue
        times.append((end - timedelta(seconds=float(r.get("wall_time_s") or 0)), end))
    return times


def trained_before(records: list, sitting: dict) -> dict:
    """{"trained_before": how many of the trials a sitting adds began before the sitting did} (a killed sitting's,
    a shard's, a device's: its wall time is not theirs); {} where the sitting's date does not say when it began. A
    minute's grace covers the sitting's own start-up."""
    try:
        began = sitting_began(sitting).replace(tzinfo=timezone.utc)
    except (KeyError, TypeError, ValueError):
        return {}
    return {"trained_before": sum(start < began for start, _ in _spans(records))}


def sitting_began(sitting: dict) -> datetime:
    """When a sitting began (naive UTC), less a minute's grace for its start-up: its date less its wall time."""
    return datetime.strptime(sitting["date"], STAMP) - timedelta(seconds=float(sitting["wall_time_s"]) + 60)


def trained_span(records: list) -> dict:
    """{"trained_from", "trained_to"} (UTC, from the trials' own finish times and wall times) of the trials a
    sitting adds: when they trained, which for trials another process trained is not the sitting's own time."""
    times = _spans(records)
    if not times:
        return {}
    return {"trained_from": min(t[0] for t in times).strftime(STAMP),
            "trained_to": max(t[1] for t in times).strftime(STAMP)}


def check_fingerprints(path: Path, old: list, fresh: list) -> None:
    """Refuse trials whose sweep fingerprint (every training option, the weights' and data's hashes) differs from
    the kept trials' of the same sweep: one sweep of a run is one protocol on one model and data."""
    kept_prints = {r.get("fingerprint") for r in old} - {None}
    other = {r.get("fingerprint") for r in fresh} - {None} - kept_prints
    if kept_prints and other:
        raise UserError(f"{path}: its trials were trained with fingerprint {', '.join(sorted(kept_prints))}, these "
                        f"with {', '.join(sorted(other))} (other training options, weights or data): keep them in "
                        f"another --results folder, or declare a follow-up")


def trained_where(run_meta: dict) -> tuple:
    """({kinds of device}, {weights}) a run's trials trained on and started from, as its sittings record them
    (empty where every sitting predates the record)."""
    sittings = run_meta.get("sittings") or []
    return ({k for s in sittings for k in (s.get("trained_on") or {})} - {"?"},
            {s["weights"] for s in sittings if s.get("weights")})


def check_weights(meta_path: Path, kept: dict, sitting: dict) -> None:
    """Refuse to add trials trained from other weights than an earlier sitting's (e.g. a device's copy of the
    embedded model rounded to fp16 against the packaged one): a run's trials all start from one set of weights.
    Sittings kept before the weights were recorded are not compared."""
    earlier = trained_where(kept)[1]
    if sitting.get("weights") and earlier and sitting["weights"] not in earlier:
        raise UserError(f"{meta_path}: this run's trials were trained from weights {', '.join(sorted(earlier))}, "
                        f"these from {sitting['weights']} (the same model name, other weights: a rounded copy?): "
                        f"keep them in another --results folder")


def check_devices(meta_path: Path, kept: dict, kinds: set) -> None:
    """Refuse trials trained on another kind of device (cpu, cuda) than the run's kept trials: arms paired by seed
    differ only by the arm, and two devices' kernels and precision paths differ in their numerics, so a pair split
    across them would read the devices' difference as the arm's. Sittings that recorded no device are not compared."""
    earlier = trained_where(kept)[0]
    other = kinds - earlier - {"?"}
    if earlier and other:
        raise UserError(f"{meta_path}: this run's trials trained on {', '.join(sorted(earlier))}, these on "
                        f"{', '.join(sorted(other))}: arms paired by seed would differ by device as well as by arm; "
                        f"resume it on {', '.join(sorted(earlier))}, or keep these in another --results folder")


def refuse_mixing(results_dir: Path, experiment: str, label: str, weights: str, device_kind: str = "") -> None:
    """Before any training: refuse a sitting whose weights or kind of device differ from those the kept run's
    sittings record (its trials would train, then not be kept). `device_kind` "" where nothing trains (--gather)."""
    meta_path = safe_join(Path(results_dir), experiment, label) / "run.json"
    if not meta_path.exists():
        return
    kept = json.loads(meta_path.read_text(encoding="utf-8"))
    if weights:
        check_weights(meta_path, kept, {"weights": weights})
    if device_kind:
        check_devices(meta_path, kept, {device_kind})


def sitting(cpu: str, commit: dict, seconds: float, threads: int, workers: str, device: str = "cpu",
            weights: str = "", shard: str = "") -> dict:
    """One sitting's record: where (CPU, and the accelerator where one trained), from which commit and weights
    (sha256 prefix of the weights file), how long, and which shard of each sweep when several ran at once."""
    return {"date": time.strftime(STAMP, time.gmtime()), "cpu": cpu,
            "commit": commit.get("minbert_commit", "?")[:12] + ("+changes" if commit.get("minbert_dirty") else ""),
            "wall_time_s": round(seconds, 1), "threads": threads, "workers": workers, "device": device,
            **({"weights": weights} if weights else {}), **({"shard": shard} if shard else {})}

"""A finished run's two records, config.json and metrics.json, for tests of what reads them."""
import json
from pathlib import Path
from typing import Optional

from tasks.saved.run_result import RunResult

# A default run's config.json as main wrote it at 624dd4f (schema 1: no "schema" key).
SAVED_RECORD = Path(__file__).resolve().parents[1] / "data" / "run-record-schema-1.json"


def saved_record() -> dict:
    return json.loads(SAVED_RECORD.read_text(encoding="utf-8"))


def write_finished_run(folder: Path, seed: int, averages: Optional[dict] = None) -> Path:
    """FOLDER/config.json (the saved record, at `seed`) and FOLDER/metrics.json (one evaluation's result, with
    `averages` as metrics.json's "averages" where given), written through the records the trainer writes."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**saved_record(), "seed": seed}))
    dev = {"overall": 0.5}
    result = RunResult(final=dev, best=dev, best_epoch=1, best_step=1,
                       history=[{"step": 1, "epoch": 1, "dev": dev}], steps=1, averages=averages)
    (folder / "metrics.json").write_text(json.dumps(result.to_json()))
    return folder

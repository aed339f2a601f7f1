"""The training loop's one hook protocol: every part of a run is a peer callback, a callback ends a run only by
asking (`request_stop`), and tasks/training has no import circle (imports under TYPE_CHECKING included)."""
import json

from tasks import training
from tasks.inputs import prepare
from tests.helpers import REPO
from tests.helpers.imports import find_cycle, graph, module_name

BASE = ["--batch-size", "8", "--eval-batch-size", "64", "--precision", "fp32", "--device", "cpu", "--tasks", "sst"]


class StopAt(training.Callback):
    """Asks the run to stop after step `at`, and notes the hooks it is called with."""

    def __init__(self, at: int):
        self.at, self.hooks = at, []

    def __getattribute__(self, name):
        if name.startswith("on_"):
            object.__getattribute__(self, "hooks").append(name)
        return object.__getattribute__(self, name)

    def on_step(self, run, info):
        if run.state.global_step == self.at:
            run.request_stop(f"asked at step {self.at}")
            run.request_stop("a later request")  # the first one stands


def config_for(tiny_model, small_data_dir, *extra):
    argv = BASE + ["--model", str(tiny_model), "--data-dir", str(small_data_dir), *extra]
    return training.parse_train_command(argv).config


def test_request_stop_ends_the_run_at_that_step_and_records_why(tiny_model, small_data_dir, tmp_path):
    config = config_for(tiny_model, small_data_dir, "--max-steps", "6")
    stop = StopAt(2)
    result = training.fit(config, prepare(config), tmp_path / "run", callbacks=[stop])
    assert result["steps"] == 2 and result["stop_reason"] == "asked at step 2"
    assert [e["step"] for e in result["history"]] == [2]  # the stop step's dev evaluation is the last
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["stop_reason"] == "asked at step 2" and metrics["steps"] == 2
    loop = json.loads(json.dumps({k: v for k, v in result.items() if k != "model"}))
    assert {k: v for k, v in metrics.items() if k != "schema"} == loop   # the typed record drops none of it
    assert json.loads((tmp_path / "run" / "config.json").read_text())["total_steps"] == 6  # the schedule's span
    hooks = [h for h in stop.hooks if h != "on_log"]
    assert hooks[0] == "on_begin" and hooks[-2:] == ["on_finish", "on_close"]
    assert {"on_plan", "on_step", "on_epoch_end", "on_evaluate", "on_best", "on_checkpoint"} <= set(hooks)


def test_a_run_not_stopped_records_no_reason(tiny_model, small_data_dir):
    config = config_for(tiny_model, small_data_dir, "--max-steps", "2")
    result = training.fit(config, prepare(config), training.InMemory())
    assert result["steps"] == 2 and "stop_reason" not in result


def test_no_import_circle_in_training_counting_type_checking_imports():
    """No module of tasks/training imports under TYPE_CHECKING, so the runtime imports are all of them."""
    paths = [p for p in (REPO / "tasks" / "training").glob("*.py") if p.name != "__init__.py"]
    assert not [p.name for p in paths if "TYPE_CHECKING" in p.read_text(encoding="utf-8")]
    modules = {module_name(p) for p in paths}
    edges = {name: targets & modules for name, targets in graph().items() if name in modules}
    assert find_cycle(edges) is None

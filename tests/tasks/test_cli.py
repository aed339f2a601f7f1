"""The command-line runner (tasks/cli.py): one place turns what can go wrong into one line and an exit status."""
import pytest

import classifier
import predict
import prepare_submit
from minbert import DataError, RunFailure, UserError
from tasks.cli import run_command
from tasks.course import starter_data
from tests.helpers import run_cli


class Stopped(Exception):
    """Like tasks.training.Interrupted: a run stopped by a signal, its checkpoint saved."""

    def __init__(self, signum, message):
        super().__init__(message)
        self.exit_code = 128 + signum


def _main(run, parse=lambda argv: argv, **options):
    return lambda argv: run_command(argv, parse, run, **options)


def _raise(error):
    def run(args):
        raise error
    return run


@pytest.mark.parametrize("status, expected", [(None, 0), (0, 0), (1, 1), (2, 2)])
def test_the_runs_own_status_is_the_commands(status, expected):
    seen = []
    code, out, err = run_cli(_main(lambda args: seen.append(args) or status), ["--x"])
    assert (code, seen, err) == (expected, [["--x"]], "")


@pytest.mark.parametrize("error, expected", [
    (UserError("bad option --x"), (2, "error: bad option --x\n")),
    (DataError("f.csv: line 3: not a number"), (2, "error: f.csv: line 3: not a number\n")),
    (RunFailure("loss is nan at step 4"), (1, "error: loss is nan at step 4\n")),
])
def test_a_users_mistake_is_one_line_and_status_2_a_failed_run_1(error, expected):
    code, out, err = run_cli(_main(_raise(error)), [])
    assert (code, err) == expected and out == ""


def test_a_stop_carries_its_exit_status_and_ctrl_c_says_how_to_go_on():
    stopped = _main(_raise(Stopped(15, "stopped by SIGTERM at step 7; checkpoint saved")), stops=(Stopped,))
    assert run_cli(stopped, []) == (143, "", "stopped by SIGTERM at step 7; checkpoint saved\n")
    hint = lambda args: f"interrupted; resume with --resume {args}" if args else "interrupted"
    assert run_cli(_main(_raise(KeyboardInterrupt()), interrupted=hint), "runs/x") == (
        130, "", "interrupted; resume with --resume runs/x\n")
    assert run_cli(_main(None, parse=_raise(KeyboardInterrupt()), interrupted=hint), []) == (130, "", "interrupted\n")
    assert run_cli(_main(_raise(KeyboardInterrupt())), []) == (130, "", "interrupted\n")


def test_a_bug_keeps_its_traceback():
    with pytest.raises(ZeroDivisionError):
        run_command([], lambda argv: argv, lambda args: 1 / 0)
    with pytest.raises(Stopped):  # not declared as a stop of this command
        run_command([], lambda argv: argv, _raise(Stopped(2, "x")))


def test_the_scripts_run_through_it(tmp_path):
    code, _, err = run_cli(predict.main, [str(tmp_path / "no-such-run")])
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    code, _, err = run_cli(classifier.main, ["--use_gpu", "--device", "cpu"])
    assert (code, err) == (2, "error: --use_gpu and --device cpu disagree\n")
    code, _, err = run_cli(prepare_submit.main, ["--allow", "nonsense", "--out", str(tmp_path / "x.zip")])
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    code, _, err = run_cli(starter_data.main, ["--dest", str(tmp_path / "d"), "--base-url", "http://127.0.0.1:9/",
                                               "--timeout", "1"])
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1

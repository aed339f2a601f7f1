"""Tests of tasks/data.py against the real course files, and of tasks/course/starter_data.py."""

import http.server
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from minbert.errors import DataError  # noqa: E402
from tasks import data  # noqa: E402
from tasks.course import starter_data as download  # noqa: E402
from tasks.registry import REGISTRY  # noqa: E402

# Row counts of the shared copy (see /work/shared/data/README.md and data/README.md).
EXPECTED_ROWS = {
    ("sst", "train"): 8544,
    ("sst", "dev"): 1101,
    ("sst", "test"): 2210,
    ("quora", "train"): 16171,
    ("quora", "dev"): 4043,
    ("sts", "train"): 6040,
    ("sts", "dev"): 863,
    ("sts", "test"): 1725,
}


class Warnings(list):
    def __call__(self, message):
        assert isinstance(message, str)
        self.append(message)


@pytest.fixture(scope="module")
def loaded(data_dir):
    """Every task read once: {task: (datasets, warnings)}."""
    out = {}
    for task in data.TASKS:
        w = Warnings()
        out[task] = (data.read_task(data_dir, task, warn=w), w)
    return out


# ---------------------------------------------------------------- paths, names


def test_split_path_names(tmp_path):
    assert data.split_path(tmp_path, "sst", "train") == tmp_path / "ids-sst-train.csv"
    assert data.split_path(tmp_path, "sst", "test") == tmp_path / "ids-sst-test-student.csv"
    assert data.split_path(tmp_path, "quora", "dev") == tmp_path / "quora-dev.csv"
    assert data.split_path(str(tmp_path), "sts", "test") == tmp_path / "sts-test-student.csv"


def test_data_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
    assert data.split_path(None, "sts", "dev") == tmp_path / "sts-dev.csv"
    monkeypatch.delenv(data.DATA_DIR_ENV)
    assert data.split_path(None, "sts", "dev") == REPO / "data" / "sts-dev.csv"


# ---------------------------------------------------------------- real files


@pytest.mark.parametrize("task,split", sorted(EXPECTED_ROWS))
def test_real_row_counts(loaded, task, split):
    ds = loaded[task][0][split]
    assert ds.task == task and ds.split == split
    assert ds.n_rows == EXPECTED_ROWS[task, split]
    assert len(ds.examples) == ds.n_rows - sum(ds.skipped.values())
    assert len(ds.sha256) == 64


# What a label of each course task is: SST's five classes, Quora's two, STS's similarity from 0 to 5.
LABEL_OK = {"sst": lambda v: type(v) is int and 0 <= v <= 4,
            "quora": lambda v: type(v) is int and v in (0, 1),
            "sts": lambda v: type(v) is float and 0.0 <= v <= 5.0}


@pytest.mark.parametrize("task", data.TASKS)
def test_real_labels_and_sentences(loaded, task):
    for split, ds in loaded[task][0].items():
        if ds is None:
            continue
        ids = [e.id for e in ds.examples]
        assert len(set(ids)) == len(ids)
        lines = [e.line for e in ds.examples]
        assert lines == sorted(lines) and lines[0] == 2
        for e in ds.examples:
            assert e.a and e.a == e.a.strip()
            assert e.b is None if task == "sst" else e.b and e.b == e.b.strip()
            assert e.label is None if split == "test" else LABEL_OK[task](e.label), (split, e.line, e.label)


def test_real_sst_starts_with_its_first_sentences_and_has_every_label(loaded):
    sst = loaded["sst"][0]
    assert sst["train"].examples[0].a.startswith("The Rock is destined")
    assert {e.label for e in sst["train"].examples} == {0, 1, 2, 3, 4}
    assert sst["test"].examples[0].a == "Effective but too-tepid biopic"


def test_real_quora_empty_label_row_skipped_with_one_warning(loaded):
    datasets, warnings = loaded["quora"]
    for split in ("train", "dev"):
        ds = datasets[split]
        assert ds.skipped == {"empty label": 1}
        assert len(ds.skipped_lines) == 1
        mine = [w for w in warnings if w.startswith(f"quora-{split}.csv:")]
        assert len(mine) == 1
        msg = mine[0]
        assert "\n" not in msg
        assert f"skipped 1 of {ds.n_rows} rows (empty label: 1) at lines {ds.skipped_lines[0]}" in msg
    # The record named by the warning is the one whose quotes swallow the rest of the row.
    line = datasets["train"].skipped_lines[0]
    with open(datasets["train"].path, encoding="utf-8") as fp:
        text = fp.read().split("\n")[line - 1]
    assert '\t"""' in text or text.split("\t")[2].startswith('"')
    assert datasets["train"].describe() == {
        "path": str(datasets["train"].path),
        "sha256": datasets["train"].sha256,
        "n_rows": 16171,
        "n_used": 16170,
        "skipped": {"empty label": 1},
    }


def test_real_quora_strict_raises(data_dir):
    with pytest.raises(DataError) as exc:
        data.read_split(data_dir, "quora", "dev", strict=True, warn=Warnings())
    msg = str(exc.value)
    assert msg.startswith("quora-dev.csv: line ") and "empty label" in msg and "\n" not in msg


def test_real_quora_test_missing_is_none_with_warning(loaded):
    datasets, warnings = loaded["quora"]
    assert datasets["test"] is None
    mine = [w for w in warnings if w.startswith("quora-test-student.csv")]
    assert len(mine) == 1 and "not found" in mine[0] and "\n" not in mine[0]
    assert len(warnings) == 3  # train, dev, test: one line each


def test_real_clean_tasks_warn_nothing(loaded):
    for task in ("sst", "sts"):
        datasets, warnings = loaded[task]
        assert warnings == []
        assert all(ds.skipped == {} and ds.skipped_lines == [] for ds in datasets.values())


def test_real_default_warn_prints_to_stderr(data_dir, capsys):
    assert data.read_split(data_dir, "quora", "test") is None
    err = capsys.readouterr().err
    assert err.startswith("warning: quora-test-student.csv not found") and err.count("\n") == 1


def test_real_sst_file_as_sts_is_rejected(data_dir, tmp_path):
    (tmp_path / "sts-train.csv").write_bytes((data_dir / "ids-sst-train.csv").read_bytes())
    with pytest.raises(DataError) as exc:
        data.read_split(tmp_path, "sts", "train")
    msg = str(exc.value)
    assert msg.startswith("sts-train.csv: ") and "sentence1" in msg and "\n" not in msg


def test_real_sha256_matches_bytes(loaded):
    import hashlib

    ds = loaded["sts"][0]["dev"]
    assert ds.sha256 == hashlib.sha256(ds.path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- subsample


def test_subsample_deterministic(loaded):
    examples = loaded["sst"][0]["train"].examples
    a = data.subsample(examples, 0.1, seed=3)
    b = data.subsample(examples, 0.1, seed=3)
    c = data.subsample(examples, 0.1, seed=4)
    assert [e.id for e in a] == [e.id for e in b]
    assert [e.id for e in a] != [e.id for e in c]
    assert len(a) == round(0.1 * len(examples))
    assert [e.line for e in a] == sorted(e.line for e in a)  # file order kept
    assert len({e.id for e in a}) == len(a)
    assert data.subsample(examples, 1.0, seed=0) == examples
    assert data.subsample(examples, 1, seed=0) is not examples


def test_subsample_keeps_at_least_one():
    ex = [data.Example(id=str(i), a="x", b=None, label=0, line=i + 2) for i in range(10)]
    assert len(data.subsample(ex, 1e-9, seed=0)) == 1
    assert data.subsample([], 0.5, seed=0) == []


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, float("nan"), float("inf"), "0.5", None, True])
def test_subsample_bad_fraction(fraction):
    with pytest.raises(DataError) as exc:
        data.subsample([], fraction, seed=0)
    assert "\n" not in str(exc.value)


# ---------------------------------------------------------------- download


def test_course_files_names():
    assert len(download.COURSE_FILES) == 12
    for task in REGISTRY:
        for split in data.SPLITS:
            assert data.split_path(".", task, split).name in download.COURSE_FILES
    assert download.BASE_URL == (
        "https://raw.githubusercontent.com/gpoesia/minbert-default-final-project/main/data/"
    )


@pytest.fixture
def server(tmp_path):
    """A local HTTP server serving tmp_path/served."""
    root = tmp_path / "served"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def test_download_from_local_server(server, tmp_path):
    root, url = server
    body = "\tid\tsentence\tsentiment\n0\tx1\t hello .\t3\n"
    (root / "ids-sst-train.csv").write_text(body, encoding="utf-8")
    dest = tmp_path / "dest"
    logs = []
    paths = download.download_course_data(
        dest, timeout=5, base_url=url, files=("ids-sst-train.csv",), log=logs.append
    )
    assert paths == [dest / "ids-sst-train.csv"]
    assert (dest / "ids-sst-train.csv").read_text(encoding="utf-8") == body
    assert os.listdir(dest) == ["ids-sst-train.csv"]  # no temp files left behind
    # Present files are kept unless forced.
    (root / "ids-sst-train.csv").write_text(body + "1\tx2\t bye .\t1\n", encoding="utf-8")
    download.download_course_data(dest, timeout=5, base_url=url, files=("ids-sst-train.csv",), log=logs.append)
    assert (dest / "ids-sst-train.csv").read_text(encoding="utf-8") == body
    download.download_course_data(
        dest, timeout=5, base_url=url, files=("ids-sst-train.csv",), force=True, log=logs.append
    )
    assert "bye" in (dest / "ids-sst-train.csv").read_text(encoding="utf-8")


def test_download_http_404_and_html_page(server, tmp_path):
    root, url = server
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as exc:
        download.download_course_data(dest, timeout=5, base_url=url, files=("sts-dev.csv",), log=lambda m: None)
    assert str(exc.value).startswith("sts-dev.csv: ") and "404" in str(exc.value)
    (root / "sts-dev.csv").write_text("<html>rate limited</html>\n")
    with pytest.raises(DataError) as exc:
        download.download_course_data(dest, timeout=5, base_url=url, files=("sts-dev.csv",), log=lambda m: None)
    assert str(exc.value).startswith("sts-dev.csv: ") and "\n" not in str(exc.value)
    assert os.listdir(dest) == []  # nothing half-written


@pytest.mark.parametrize("base_url", ["https://minbert-test.invalid/data/", "http://10.255.255.1:9/data/"])
def test_download_unreachable_fails_fast(tmp_path, base_url):
    # A name that never resolves, and an address that usually drops packets.
    start = time.monotonic()
    with pytest.raises(DataError) as exc:
        download.download_course_data(tmp_path / "d", timeout=1, base_url=base_url, log=lambda m: None)
    assert time.monotonic() - start < 5
    assert "\n" not in str(exc.value)
    assert not any((tmp_path / "d").iterdir())


def test_download_refused_connection(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(DataError) as exc:
        download.download_course_data(
            tmp_path, timeout=2, base_url=f"http://127.0.0.1:{port}/", files=("sts-dev.csv",), log=lambda m: None
        )
    assert str(exc.value).startswith("sts-dev.csv: ") and "\n" not in str(exc.value)


def test_download_script_exit_status(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "data" / "download.py"), "--dest", str(tmp_path), "--timeout", "2",
         "--base-url", "https://minbert-test.invalid/"],
        capture_output=True,
        text=True,
        timeout=180,  # a bound on a hang, not a speed target: a loaded 2-core machine starts Python slowly
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1

import errno
import json
import os

import pytest
import torch

from minbert.errors import DataError, UserError
from minbert.loading import sha256_of
from tasks.fileio import (
    append_jsonl,
    atomic_save_torch,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    read_jsonl,
    safe_join,
)


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_atomic_writes_round_trip(tmp_path):
    atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01")
    atomic_write_text(tmp_path / "t.txt", "héllo\n")
    atomic_write_json(tmp_path / "sub" / "j.json", {"b": 1, "a": [1.5, None]})
    atomic_save_torch(tmp_path / "w.pt", {"w": torch.arange(3)})
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "héllo\n"
    text = (tmp_path / "sub" / "j.json").read_text()
    assert list(json.loads(text)) == ["b", "a"] and text.startswith('{\n  "b"')
    assert torch.equal(torch.load(tmp_path / "w.pt")["w"], torch.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "sub", "t.txt", "w.pt"]


def test_new_files_get_the_mode_of_a_plain_open_and_replaced_files_keep_theirs(tmp_path):
    previous = os.umask(0o027)  # group-readable: distinct from a private (0600) temporary file
    try:
        path = atomic_write_text(tmp_path / "x", "1")
        (tmp_path / "plain").write_text("1")
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == (tmp_path / "plain").stat().st_mode & 0o777 == 0o640
    os.chmod(path, 0o604)
    atomic_write_text(path, "2")
    assert path.stat().st_mode & 0o777 == 0o604 and path.read_text() == "2"


def test_failed_replace_keeps_old_content_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    atomic_write_json(path, {"old": True})
    monkeypatch.setattr(os, "replace", _enospc)
    with pytest.raises(OSError) as failure:
        atomic_write_json(path, {"new": True})
    assert failure.value.errno == errno.ENOSPC
    assert json.loads(path.read_text()) == {"old": True}
    assert os.listdir(tmp_path) == ["metrics.json"]


def test_failed_write_keeps_old_content_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "log.txt"
    atomic_write_text(path, "old")
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(OSError):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["log.txt"]


def test_failed_torch_save_keeps_old_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    atomic_save_torch(path, {"step": 1})
    with pytest.raises(Exception):
        atomic_save_torch(path, {"step": 2, "bad": lambda: None})  # lambdas cannot be pickled
    assert torch.load(path)["step"] == 1
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_json_rejects_nan_before_touching_the_file(tmp_path):
    path = tmp_path / "m.json"
    atomic_write_json(path, {"loss": 1.0})
    with pytest.raises(ValueError):
        atomic_write_json(path, {"loss": float("nan")})
    assert json.loads(path.read_text()) == {"loss": 1.0}


def test_jsonl_append_and_read(tmp_path):
    path = tmp_path / "log.jsonl"
    assert read_jsonl(path) == []
    for step in range(3):
        append_jsonl(path, {"step": step})
    assert read_jsonl(path) == [{"step": 0}, {"step": 1}, {"step": 2}]


def test_read_jsonl_ignores_truncated_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"step": 0, "loss": 1.25})
    append_jsonl(path, {"step": 1, "loss": 0.5})
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # killed in the middle of the second record
    assert read_jsonl(path) == [{"step": 0, "loss": 1.25}]
    # a half-written multi-byte character is also just a torn line
    path.write_bytes(data + '{"name": "é'.encode()[:-1])
    assert read_jsonl(path) == [{"step": 0, "loss": 1.25}, {"step": 1, "loss": 0.5}]


def test_append_after_a_torn_line_keeps_the_log_readable(tmp_path):
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"step": 0})
    with open(path, "ab") as handle:
        handle.write(b'{"step": 1, "lo')
    append_jsonl(path, {"step": 1})
    assert read_jsonl(path) == [{"step": 0}, {"step": 1}]


def test_damage_in_the_middle_is_reported(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 0}\nnot json\n{"step": 2}\n')
    with pytest.raises(DataError, match="line 2"):
        read_jsonl(path)


def test_sha256_of(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"abc")
    assert sha256_of(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", "", "a\0b", ".."])
def test_safe_join_rejects_escapes(tmp_path, name):
    with pytest.raises(UserError) as failure:
        safe_join(tmp_path, name)
    assert "\n" not in str(failure.value)


def test_safe_join_rejects_symlink_out_of_root(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(UserError):
        safe_join(root, "link", "x")


def test_safe_join_accepts_names_inside(tmp_path):
    assert safe_join(tmp_path, "run1", "metrics.json") == tmp_path / "run1" / "metrics.json"
    assert safe_join(tmp_path, "a/../b") == tmp_path / "b"

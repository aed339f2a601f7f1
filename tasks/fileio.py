"""Crash-safe file writes: everything a run writes goes through here.

A training run can be killed at any moment (out of memory, pre-emption,
Ctrl-C, a full disk).  Whatever it leaves behind must be either the old file
or the new file, never half of one, so that `--resume` and the evaluation
tools can trust what they read.  Whole files are therefore written to a
temporary file in the same folder, flushed to disk and renamed over the
target; logs are append-only JSON lines whose torn last line is ignored.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from pathlib import Path
from typing import Any, BinaryIO, Callable

from minbert.errors import DataError, UserError

_TEMP_SUFFIX = ".tmp"


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable, not just the file contents."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        # Some filesystems refuse to fsync a directory; the rename has
        # already happened, so there is nothing left to undo.
        pass
    finally:
        os.close(fd)


def _create_temp(folder: Path, name: str) -> tuple[int, str]:
    """Create and open a new temporary file in `folder` for writing `name`.

    Created with mode 0666, so the umask (and any default ACL) gives it the permission
    bits a plain open() would; mkstemp's 0600 would make checkpoints unreadable to the
    user's group.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp_name = str(folder / f".{name}.{secrets.token_hex(4)}{_TEMP_SUFFIX}")
        try:
            return os.open(tmp_name, flags, 0o666), tmp_name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(folder / f".{name}.*{_TEMP_SUFFIX}"))


def atomic_write_with(path: str | os.PathLike, fill: Callable[[BinaryIO], None]) -> Path:
    """Write `path` through `fill(binary_file)` so it is replaced all at once.

    If `fill` or any step of the protocol fails (or the process is
    interrupted) the temporary file is removed, the previous content of
    `path` stays intact and the exception propagates.
    """
    path = Path(path)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = _create_temp(folder, path.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.chmod(tmp_name, path.stat().st_mode & 0o7777)  # a replaced file keeps its permissions
        except FileNotFoundError:
            pass
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(folder)
    return path


def remove_stale_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Delete, below `folder`, the temporary files of writers that were killed mid-write.

    SIGKILL or a power cut skips the cleanup above, and a checkpoint's temporary
    file is as large as the checkpoint.  Only call this when nothing else is
    writing there (a run folder being resumed).
    """
    stale = sorted(Path(folder).rglob(f".*{_TEMP_SUFFIX}"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write_with(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write `obj` as indented JSON; NaN/inf are rejected, not written.

    Strict JSON keeps the files readable by any tool; turning NaN into None
    is the caller's decision because only it knows what the value means.
    The object is serialised before the file is touched.
    """
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"
    return atomic_write_text(path, text)


def atomic_save_torch(path: str | os.PathLike, obj: Any) -> Path:
    import torch  # only checkpoints need torch; keep this module light to import

    return atomic_write_with(path, lambda handle: torch.save(obj, handle))


def _parse_record(line: bytes) -> dict | None:
    """One JSON-lines record, or None if the bytes are not a complete record."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _repair_torn_tail(fd: int) -> None:
    """Drop an incomplete last line left by a killed writer before appending.

    Without this the next record would be glued onto the torn one and the
    damage would move from the (ignored) last line into the middle.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    data = os.pread(fd, size, 0)
    start = data.rfind(b"\n") + 1
    if _parse_record(data[start:]) is not None:
        # A complete record that merely lacks its newline: keep it.
        os.write(fd, b"\n")
    else:
        os.ftruncate(fd, start)


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one record as one line and force it to disk.

    The line goes out in a single write on an O_APPEND descriptor, so a
    kill mid-write can only leave a torn last line, which `read_jsonl`
    ignores and the next append removes.
    """
    line = (json.dumps(record, allow_nan=False) + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)  # the umask applies
    try:
        _repair_torn_tail(fd)
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """All complete records of a JSON-lines log; [] if it does not exist yet.

    A last line that is cut short or does not parse is what a killed writer
    leaves behind, so it is dropped silently.  A bad line anywhere else means
    the file was damaged some other way, and that is reported.
    """
    return [record for _, record in read_numbered_jsonl(path)]


def read_numbered_jsonl(path: str | os.PathLike) -> list[tuple]:
    """`read_jsonl`'s records, each as (its line number in the file, counting from 1, record): for a reader that
    names the line a record it cannot use came from."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        record = _parse_record(line)
        if record is not None:
            records.append((i + 1, record))
        elif i != last:
            raise DataError(f"{path}: line {i + 1} is not a JSON object; the log is damaged")
    return records


def safe_join(root: str | os.PathLike, *parts: str) -> Path:
    """Join user-supplied names below `root`, refusing anything that leaves it.

    Run names, task names and file names come from the command line; a name
    like '../x' or a symlink pointing elsewhere must not let a run overwrite
    files outside its own folder.
    """
    for part in parts:
        part = os.fspath(part)
        if not part or not part.strip():
            raise UserError(f"empty path component below {root}")
        if "\0" in part:
            raise UserError(f"path component {part!r} contains a NUL character")
        if os.path.isabs(part) or part.startswith(("/", "\\")):
            raise UserError(f"path component {part!r} must be relative to {root}")
    root_real = Path(os.path.realpath(root))
    joined = Path(os.path.normpath(os.path.join(os.fspath(root), *map(os.fspath, parts))))
    target_real = Path(os.path.realpath(joined))
    if target_real != root_real and root_real not in target_real.parents:
        shown = "/".join(map(os.fspath, parts))
        raise UserError(f"path {shown!r} would leave {root}")
    return joined

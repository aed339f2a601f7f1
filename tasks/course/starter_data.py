"""Fetch the CS224N default-project data files from the course's public starter repository.

    python data/download.py [--dest data/] [--force] [--timeout 10]

Each file is written to a temporary file in the destination folder and moved
into place with `os.replace`, so an interrupted download never leaves a
truncated CSV behind. Network problems become one-line `DataError`s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import socket
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request

from minbert.errors import DataError
from tasks.cli import run_command
from tasks.registry import REGISTRY
from tasks.text_files import one_line

BASE_URL = "https://raw.githubusercontent.com/gpoesia/minbert-default-final-project/main/data/"

# Every registered task's train, dev and test-student files (Part 1's CFIMDB included).
COURSE_FILES = tuple(name for task in REGISTRY.values() for name in task.files.values())

DEFAULT_DEST = pathlib.Path(__file__).resolve().parents[2] / "data"
_CHUNK = 1 << 16


def _resolve_host(host: str, port: int, timeout: float) -> None:
    """Fail within `timeout` seconds if `host` cannot be resolved.

    urllib's timeout does not cover name resolution, which can block for a
    long time on machines without a reachable resolver, so resolve in a
    daemon thread and stop waiting after `timeout`.
    """
    result: dict[str, object] = {}

    def work():
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            result["ok"] = True
        except OSError as exc:
            result["error"] = exc

    thread = threading.Thread(target=work, name="minbert-dns", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise DataError(f"cannot reach {host}: name lookup timed out after {timeout:g} s")
    if "error" in result:
        raise DataError(f"cannot reach {host}: {one_line(result['error'])}")


def _stream(response, out) -> tuple:
    """Copy `response` into the file `out` a chunk at a time, then to disk; (bytes, the first 4 KiB)."""
    size, first = 0, b""
    while chunk := response.read(_CHUNK):
        first += chunk[: 4096 - len(first)]
        out.write(chunk)
        size += len(chunk)
    out.flush()
    os.fsync(out.fileno())
    return size, first


def _fetch(url: str, target: pathlib.Path, timeout: float) -> int:
    """Download `url` into `target` atomically; returns the number of bytes."""
    name = target.name
    tmp_name = None
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=target.parent)
            with os.fdopen(fd, "wb") as out:
                size, first = _stream(response, out)
        header = first.split(b"\n", 1)[0]
        if b"\tid\t" not in header and not header.endswith(b"\tid"):
            raise DataError(
                f"{name}: downloaded from {url} but it does not look like a course data "
                f"file (no tab-separated 'id' column in its header)"
            )
        os.replace(tmp_name, target)
        tmp_name = None
        return size
    except urllib.error.HTTPError as exc:
        raise DataError(f"{name}: download from {url} failed: HTTP {exc.code} {one_line(exc.reason)}") from None
    except urllib.error.URLError as exc:
        raise DataError(f"{name}: cannot download {url}: {one_line(exc.reason)}") from None
    except (TimeoutError, socket.timeout):
        raise DataError(f"{name}: download from {url} timed out after {timeout:g} s") from None
    except OSError as exc:
        raise DataError(f"{name}: download from {url} failed: {one_line(exc)}") from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def download_course_data(
    dest=DEFAULT_DEST,
    timeout: float = 10,
    base_url: str = BASE_URL,
    files=None,
    force: bool = False,
    log=None,
) -> list[pathlib.Path]:
    """Download the course files into `dest`; returns the paths written or kept.

    Files already present are kept unless `force`. Raises `DataError` (one
    line) when the server cannot be reached or a download fails.
    """
    log = (lambda msg: print(msg, file=sys.stderr)) if log is None else log
    dest = pathlib.Path(dest).expanduser()
    if files is None:
        files = COURSE_FILES
    if not base_url.endswith("/"):
        base_url += "/"
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"{dest}: cannot create folder: {one_line(exc)}") from None

    todo = [f for f in files if force or not (dest / f).exists()]
    done = [dest / f for f in files if f not in todo]
    for path in done:
        log(f"{path.name}: already in {dest}, kept (use --force to download again)")
    if not todo:
        return done

    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme in ("http", "https") and parsed.hostname:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            _resolve_host(parsed.hostname, port, timeout)
        except DataError as exc:
            raise DataError(f"{exc}; copy the course files into {dest} by hand (see data/README.md)") from None

    for name in todo:
        url = base_url + urllib.parse.quote(name)
        size = _fetch(url, dest / name, timeout)
        log(f"{name}: {size:,} bytes from {url}")
        done.append(dest / name)
    return done


def main(argv=None) -> int:
    return run_command(argv, parse_args, run)


def run(args) -> None:
    download_course_data(args.dest, timeout=args.timeout, base_url=args.base_url, force=args.force)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="data/download.py",
        description="Download the CS224N default-project data files (SST, Quora, STS, CFIMDB) "
        "from the course's public starter repository.",
    )
    parser.add_argument("--dest", default=str(DEFAULT_DEST), help="folder to write to (default: data/)")
    parser.add_argument("--timeout", type=float, default=10, help="network timeout in seconds (default: 10)")
    parser.add_argument("--base-url", default=BASE_URL, help="where the files live (default: the course repo)")
    parser.add_argument("--force", action="store_true", help="download files that are already present again")
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error("--timeout must be positive")
    return args


if __name__ == "__main__":
    sys.exit(main())

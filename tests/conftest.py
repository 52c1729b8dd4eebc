"""Shared test helpers: fixture discovery and CLI invocation."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# CLI runs in the tests share one fresh cache per session, never the user's.
CACHE_DIR = Path(tempfile.mkdtemp(prefix="dupfind-test-cache-"))
atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)
FIXTURES = ROOT / "fixtures"


def run_cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m dupfind ARGS` as a user would; returns the completed process (bytes)."""
    full_env = {**os.environ, "COLUMNS": "100", "DUPFIND_CACHE_DIR": str(CACHE_DIR)}
    full_env.pop("DUPFIND_DEBUG", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "dupfind", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        cwd=cwd or ROOT,
        env=full_env,
        timeout=300,
    )


def rename_worker_keeping_size_and_mtime(log: Path) -> tuple[bytes, bytes]:
    """In a `worker-<id>.log`, change the worker id by its last letter (the same length), then put
    the mtime back, as `tar x`, `cp -p` or `rsync -t` leave a file they rewrite: (old id, new id)."""
    worker = log.stem.removeprefix("worker-").encode()
    renamed = worker[:-1] + (b"x" if worker[-1:] != b"x" else b"y")
    stat, data = log.stat(), log.read_bytes()
    assert worker in data
    log.write_bytes(data.replace(worker, renamed))
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (log.stat().st_size, log.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    return worker, renamed


@pytest.fixture
def cli():
    return run_cli

"""Shared test helpers: fixture discovery and CLI invocation."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# CLI runs in the tests share one fresh cache per session, never the user's.
CACHE_DIR = Path(tempfile.mkdtemp(prefix="dupfind-test-cache-"))
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


@pytest.fixture
def cli():
    return run_cli

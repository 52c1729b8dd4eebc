"""Cache files written whole or not at all: staged beside their target, then renamed into place."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_staged(folder: str | Path, *chunks: bytes) -> Path:
    """The chunks written to a new `.tmp-` file in `folder` (removed again if that fails)."""
    return stage_chunks(folder, chunks)


def stage_chunks(folder: str | Path, chunks: Iterable[bytes]) -> Path:
    """write_staged of chunks made as they are written (a generator that raises leaves no file)."""
    fd, staging = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.writelines(chunks)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return Path(staging)


def write_atomic(target: str | Path, *chunks: bytes) -> None:
    """`target` holding these chunks: a reader sees its old content or the new, never a part."""
    place_chunks(target, chunks)


def place_chunks(target: str | Path, chunks: Iterable[bytes]) -> None:
    """write_atomic of chunks made as they are written: none is held after its write."""
    staging = stage_chunks(os.path.dirname(target), chunks)
    try:
        os.replace(staging, target)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise

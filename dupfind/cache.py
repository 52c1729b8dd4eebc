"""Per-file cache of the canonical table: a re-run over unchanged files skips parsing."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path

import orjson
import polars as pl

from dupfind import __version__
from dupfind.ingest import FileReport

CACHE_FORMAT = "1"
ENV_DIR = "DUPFIND_CACHE_DIR"


def default_cache_dir() -> Path:
    """DUPFIND_CACHE_DIR, else the platform's user cache location."""
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "dupfind"
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "dupfind" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dupfind"


def _report_to_json(report: FileReport) -> bytes:
    data = asdict(report)
    data["rejected"] = dict(report.rejected)
    for key in ("first_ts", "last_ts"):
        data[key] = data[key].isoformat() if data[key] else None
    return orjson.dumps(data)


def _report_from_json(raw: bytes, path: str) -> FileReport:
    data = orjson.loads(raw)
    known = {f.name for f in fields(FileReport)}
    if set(data) != known:
        raise ValueError("cached report has other fields")
    data["rejected"] = Counter(data["rejected"])
    for key in ("first_ts", "last_ts"):
        data[key] = datetime.fromisoformat(data[key]) if data[key] else None
    data["path"] = path
    return FileReport(**data)


class TableCache:
    """Entries keyed by a file's absolute path, size and mtime, dupfind's version and the
    effective configuration; anything unreadable is discarded and rebuilt, never trusted."""

    def __init__(self, root: Path, config_digest: str) -> None:
        self.root = root
        self.config_digest = config_digest
        self.hits = 0
        self.misses = 0

    def key(self, path: Path) -> str | None:
        try:
            stat = path.stat()
            resolved = path.resolve()
        except OSError:
            return None
        text = f"{CACHE_FORMAT}|{__version__}|{resolved}|{stat.st_size}|{stat.st_mtime_ns}|{self.config_digest}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def load(self, key: str, path: str) -> tuple[FileReport, pl.DataFrame, pl.DataFrame] | None:
        entry = self._entry(key)
        if not entry.is_dir():
            self.misses += 1
            return None
        try:
            report = _report_from_json((entry / "report.json").read_bytes(), path)
            table = pl.read_ipc(entry / "table.arrow").with_columns(source=pl.lit(path, dtype=pl.String))
            rejects = pl.read_ipc(entry / "rejects.arrow").with_columns(source=pl.lit(path, dtype=pl.String))
            if table.height != report.records:
                raise ValueError("row count differs from the report")
        except Exception:  # a corrupt or foreign entry: drop it and parse the file again
            shutil.rmtree(entry, ignore_errors=True)
            self.misses += 1
            return None
        self.hits += 1
        try:
            os.utime(entry)  # recently used: kept by the result cache's pruning of old entries
        except OSError:
            pass
        return report, table, rejects

    def store(self, key: str, report: FileReport, table: pl.DataFrame, rejects: pl.DataFrame) -> None:
        entry = self._entry(key)
        staging: Path | None = None
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
            table.write_ipc(staging / "table.arrow", compression="lz4")
            rejects.write_ipc(staging / "rejects.arrow", compression="lz4")
            (staging / "report.json").write_bytes(_report_to_json(report))
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(staging, entry)
            staging = None
        except OSError:
            pass  # a read-only or full cache directory must never break an analysis
        finally:
            if staging is not None:  # not stored (an error, or Ctrl-C): nothing half-written is left
                shutil.rmtree(staging, ignore_errors=True)

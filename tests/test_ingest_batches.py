"""Small files parsed together in batches give exactly what reading each file by itself gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import dupfind.ingest as ingest_module
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings

FORMATS = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
CONFIG = load_config(cwd=Path("/"))


def _mixed_dir(root: Path) -> Path:
    """Two copies of several fixture logs (record layouts named after their worker file, framework
    grammars, dirty NDJSON), plus files with blank, undecodable and cut-off lines."""
    logs = root / "logs"
    logs.mkdir()
    for case in ("laravel-queue", "sidekiq", "celery-worker", "logger-conventions", "ndjson-dirty", "plain-text"):
        for path in sorted((FORMATS / case / "logs").iterdir()):
            for copy in ("a", "b"):
                shutil.copy(path, logs / f"{case}-{copy}-{path.name}")
    good = b'{"ts":"2026-07-21T10:00:00Z","event":"job_started","job_id":"q-1"}\n'
    (logs / "dirty-1.log").write_bytes(
        good + b"\n   \n" + b'{"ts":"2026-07-21T10:00:01Z","event":"job_ac' + b"\n" + good
    )
    (logs / "dirty-2.log").write_bytes(b"\xff\xfe not utf-8\n" + good + b'{"event":"no time"}\n' + good.rstrip(b"\n"))
    (logs / "dirty-3.log").write_bytes(b'{"ts":"2026-07-21T10:00:02Z","event":"job_acked","job_id":"q-1"}{"ts":\n\n')
    return logs


def _read(path: Path, batch_bytes: int, monkeypatch, batched: list | None = None) -> tuple:
    monkeypatch.setattr(ingest_module, "BATCH_BYTES", batch_bytes)
    if batched is not None:
        read_batch = ingest_module.Ingestor._read_batch

        def spy(self, items):
            done = read_batch(self, items)
            batched.append((len(items), done))
            return done

        monkeypatch.setattr(ingest_module.Ingestor, "_read_batch", spy)
    result = ingest([str(path)], CONFIG)
    monkeypatch.undo()
    reports = [
        (
            r.path,
            r.format,
            r.lines,
            r.parsed,
            r.records,
            r.blank,
            dict(r.rejected),
            r.examples,
            r.fields,
            r.first_ts,
            r.last_ts,
        )
        for r in result.files
    ]
    return result.table, result.rejects.sort("source", "line"), reports


@pytest.mark.parametrize("batch_bytes", [2048, 4096])
def test_batches_equal_file_by_file(tmp_path, monkeypatch, batch_bytes):
    logs = _mixed_dir(tmp_path)
    batched: list = []
    table, rejects, reports = _read(logs, batch_bytes, monkeypatch, batched)
    alone_table, alone_rejects, alone_reports = _read(logs, 0, monkeypatch)  # a batch of one: file by file
    assert any(done and size > 1 for size, done in batched)  # some files were parsed together
    assert any(not done for _, done in batched)  # framework logs: their batch is read file by file
    assert reports == alone_reports
    assert as_strings(table).equals(as_strings(alone_table))  # labels as text: each table has a pool of its own
    assert rejects.equals(alone_rejects)
    assert table.height > 0 and rejects.height > 0
    laravel = table.filter(pl.col("format") == "laravel-queue")
    assert laravel.height and laravel["worker_id"].null_count() == 0

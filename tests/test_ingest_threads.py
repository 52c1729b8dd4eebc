"""Normalising on a second thread while the next block is parsed gives what one thread gives."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_ingest_batches import _mixed_dir

import dupfind.ingest as ingest_module
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings

CONFIG = load_config(cwd=Path("/"))


class _Inline:
    """The normaliser called in the reading thread, as before the normalising thread existed."""

    def __init__(self, normaliser) -> None:
        self.add = normaliser.add

    def close(self) -> None:
        pass


def _snapshot(result) -> tuple:
    reports = [
        (r.path, r.format, r.lines, r.parsed, r.records, r.blank, dict(r.rejected), r.examples, r.fields,
         r.first_ts, r.last_ts, r.naive_ts, r.unmapped_events, r.notes)
        for r in result.files
    ]
    return result.table, result.rejects, reports, result.filtered_out


def _normalised_in(monkeypatch) -> list[str]:
    """The names of the threads that ran each normalize call."""
    threads: list[str] = []
    normalize = ingest_module.normalize

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return normalize(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "normalize", spy)
    return threads


def test_normalising_thread_equals_one_thread(tmp_path, monkeypatch):
    logs = _mixed_dir(tmp_path)
    # A file whose time field changes name halfway, read in small chunks: its report lists both
    # names in the order met (not the aliases' order).
    lines = [f'{{"time":"2026-07-21T10:00:{i:02d}Z","event":"job_started","job_id":"t-{i}"}}' for i in range(20)]
    lines += [f'{{"timestamp":"2026-07-21T10:01:{i:02d}Z","event":"job_acked","job_id":"t-{i}"}}' for i in range(20)]
    (logs / "renamed-time.log").write_text("\n".join(lines) + "\n")
    # Many small blocks and normaliser batches: the queue fills and both threads work at once.
    monkeypatch.setattr(ingest_module, "NORMALISE_BATCH_ROWS", 5)
    threads = _normalised_in(monkeypatch)
    table, rejects, reports, filtered = _snapshot(ingest([str(logs)], CONFIG, block_bytes=512))
    # Every block went to the second thread, but the rows left over when reading is done (if the
    # last block did not fill a batch), normalised in the reading thread.
    assert threads.count("dupfind-normalise") > 10
    assert set(threads) <= {"dupfind-normalise", threading.current_thread().name}
    monkeypatch.setattr(ingest_module, "_NormalisingThread", _Inline)
    threads.clear()
    alone = _snapshot(ingest([str(logs)], CONFIG, block_bytes=512))
    assert set(threads) == {threading.current_thread().name}
    assert table.height > 0 and rejects.height > 0
    assert as_strings(table).equals(as_strings(alone[0]))  # labels as text: each table has a pool of its own
    assert rejects.equals(alone[1])  # same rows in the same order, not only the same set
    assert reports == alone[2]
    renamed = next(r for r in reports if r[0].endswith("renamed-time.log"))
    assert renamed[8]["ts"] == ["time", "timestamp"]
    assert filtered == alone[3]


def _no_normalising_thread_left() -> bool:
    return not any(t.name == "dupfind-normalise" for t in threading.enumerate())


def _parse_calls(monkeypatch) -> list[int]:
    calls: list[int] = []
    parse_block = ingest_module.LineParser.parse_block

    def spy(self, *args, **kwargs):
        calls.append(1)
        return parse_block(self, *args, **kwargs)

    monkeypatch.setattr(ingest_module.LineParser, "parse_block", spy)
    return calls


def test_error_while_normalising_is_raised_in_the_caller(tmp_path, monkeypatch):
    logs = _mixed_dir(tmp_path)
    monkeypatch.setattr(ingest_module, "BATCH_BYTES", 2048)
    monkeypatch.setattr(ingest_module, "NORMALISE_BATCH_ROWS", 5)
    parsed = _parse_calls(monkeypatch)
    ingest([str(logs)], CONFIG)
    every_block = len(parsed)
    parsed.clear()
    calls = []
    normalize = ingest_module.normalize

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("normalize broke")
        return normalize(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "normalize", failing)
    with pytest.raises(RuntimeError, match="normalize broke"):
        ingest([str(logs)], CONFIG)
    assert len(calls) == 3  # nothing was normalised after the error
    assert len(parsed) < every_block - 2  # and reading stopped soon after it
    assert _no_normalising_thread_left()


def test_error_while_reading_stops_the_normalising_thread(tmp_path, monkeypatch):
    logs = _mixed_dir(tmp_path)
    monkeypatch.setattr(ingest_module, "BATCH_BYTES", 2048)
    parse_block = ingest_module.LineParser.parse_block
    calls = []

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("parsing broke")
        return parse_block(self, *args, **kwargs)

    monkeypatch.setattr(ingest_module.LineParser, "parse_block", failing)
    with pytest.raises(RuntimeError, match="parsing broke"):
        ingest([str(logs)], CONFIG)
    assert _no_normalising_thread_left()

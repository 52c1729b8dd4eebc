"""The per-file table cache: warm runs equal cold ones, and nothing stale or corrupt is trusted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from dupfind.cache import TableCache
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings

from conftest import FIXTURES

SCENARIO = FIXTURES / "synth" / "double-publish" / "logs"


@pytest.fixture
def logs(tmp_path):
    target = tmp_path / "logs"
    shutil.copytree(SCENARIO, target)
    return target


def _run(logs: Path, cache_dir: Path, config=None):
    config = config or load_config(cwd=Path("/"))
    cache = TableCache(cache_dir, config.digest())
    return ingest([str(logs)], config, cache=cache), cache


def test_warm_run_equals_cold_run(logs, tmp_path):
    cold, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == 0 and cache.misses == len(cold.files)
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == len(cold.files) and cache.misses == 0
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels
    assert warm.rejects.sort("source", "line").equals(cold.rejects.sort("source", "line"))
    assert warm.totals() == cold.totals()
    for a, b in zip(cold.files, warm.files):
        assert (a.path, a.format, a.lines, a.records, dict(a.rejected), a.fields, a.first_ts) == (
            b.path, b.format, b.lines, b.records, dict(b.rejected), b.fields, b.first_ts)


def _ingest_storing_later(logs: Path, tmp_path: Path, monkeypatch, before_each_store, meanwhile=None):
    """ingest with store_later as the command line runs it: the files' store deferred until the
    output (dupfind.background.run_deferred), `before_each_store()` called as each file is stored,
    `meanwhile()` after ingest returns and before the deferred work runs. The cold result."""
    import dupfind.background
    import dupfind.cache

    real_store = dupfind.cache.TableCache.store

    def store(self, *args):
        before_each_store()
        return real_store(self, *args)

    monkeypatch.setattr(dupfind.cache.TableCache, "store", store)
    config = load_config(cwd=Path("/"))
    dupfind.background.defer_until_output()
    try:
        cold = ingest([str(logs)], config, cache=TableCache(tmp_path / "cache", config.digest()), store_later=True)
        if meanwhile is not None:
            meanwhile()
    finally:
        dupfind.background.run_deferred()
    return cold


def test_files_are_stored_after_the_output_and_the_other_cache_writes(logs, tmp_path, monkeypatch):
    """With store_later (the command line), ingest returns before its files are stored: they are
    written once the output is out (dupfind.background.run_deferred), after the cache writes
    deferred meanwhile (the set, the analysis), and then serve a warm run equal to the cold one."""
    import dupfind.background

    order: list[str] = []

    def meanwhile() -> None:
        dupfind.background.defer(order.append, "set")  # deferred after the files, written before them
        assert order == [] and not list((tmp_path / "cache").rglob("table.arrow"))

    cold = _ingest_storing_later(logs, tmp_path, monkeypatch, lambda: order.append("file"), meanwhile)
    assert order == ["set"] + ["file"] * len(cold.files)
    assert len(list((tmp_path / "cache").rglob("table.arrow"))) == len(cold.files)
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == len(cold.files) and cache.misses == 0
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels


def test_changed_file_is_parsed_again_others_are_served(logs, tmp_path):
    _run(logs, tmp_path / "cache")
    victim = sorted(logs.glob("worker-*.log"))[0]
    lines = victim.read_bytes().splitlines(keepends=True)
    victim.write_bytes(b"".join(lines[:-5]))
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 1 and cache.hits == len(warm.files) - 1
    report = next(f for f in warm.files if f.path == str(victim))
    assert report.lines == len(lines) - 5


def test_config_change_invalidates(logs, tmp_path):
    _run(logs, tmp_path / "cache")
    config_file = tmp_path / "dupfind.toml"
    config_file.write_text('[ingest]\nassume_tz = "Europe/Berlin"\n')
    _, cache = _run(logs, tmp_path / "cache", load_config(config_file))
    assert cache.hits == 0


def test_corrupt_entries_are_ignored_and_rebuilt(logs, tmp_path):
    cold, _ = _run(logs, tmp_path / "cache")
    entries = sorted((tmp_path / "cache").glob("*/*"))
    assert entries
    (entries[0] / "table.arrow").write_bytes(b"not arrow at all")
    (entries[1] / "report.json").write_bytes(b"{")
    (entries[2] / "rejects.arrow").unlink()
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 3
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels
    again, cache = _run(logs, tmp_path / "cache")
    assert cache.misses == 0  # rebuilt


def test_unwritable_cache_never_breaks_a_run(logs, tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    result, cache = _run(logs, blocker)
    assert result.table.height > 0 and cache.hits == 0


def test_cli_uses_the_cache_dir_and_no_cache(cli, tmp_path, logs):
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cli-cache")}
    first = cli("analyze", str(logs), "--format", "json", env=env)
    assert first.returncode == 0
    assert any((tmp_path / "cli-cache").glob("*/*/table.arrow"))
    second = cli("analyze", str(logs), "--format", "json", env=env)
    assert orjson.loads(second.stdout) == orjson.loads(first.stdout)
    uncached = cli("analyze", str(logs), "--format", "json", "--no-cache", env={"DUPFIND_CACHE_DIR": str(tmp_path / "other")})
    assert orjson.loads(uncached.stdout) == orjson.loads(first.stdout)
    assert not (tmp_path / "other").exists()
    os.utime(next(logs.iterdir()), None)  # touched: same bytes, new mtime -> parsed again, same answer
    third = cli("analyze", str(logs), "--format", "json", env=env)
    assert orjson.loads(third.stdout) == orjson.loads(first.stdout)


def test_a_time_window_reads_through_the_cache_but_never_stores_its_rows(logs, tmp_path):
    """--since/--until drop records batch by batch, so a windowed run must not store a file's
    rows (they are only the window's); it may read entries a full run stored."""
    config = load_config(cwd=Path("/"))
    full = ingest([str(logs)], config).table
    first, last = full["ts"].min(), full["ts"].max()
    since, until = first + (last - first) * 0.3, first + (last - first) * 0.6

    def windowed(cache_dir: Path | None):
        cache = TableCache(cache_dir, config.digest()) if cache_dir else None
        return ingest([str(logs)], config, since=since, until=until, cache=cache), cache

    cold, _ = windowed(None)
    assert 0 < cold.table.height < full.height
    assert cold.filtered_out == full.height - cold.table.height
    assert cold.table["ts"].min() >= since and cold.table["ts"].max() <= until
    # Per-file reports still describe every record of the file, not the window.
    assert min(f.first_ts for f in cold.files) == first and max(f.last_ts for f in cold.files) == last
    assert sum(f.records for f in cold.files) == full.height

    after_window, cache = windowed(tmp_path / "cache")
    assert cache.hits == 0 and not any((tmp_path / "cache").rglob("table.arrow"))
    assert as_strings(after_window.table).equals(as_strings(cold.table))

    _run(logs, tmp_path / "cache")  # a full run stores every file
    from_entries, cache = windowed(tmp_path / "cache")
    assert cache.hits == len(cold.files)
    assert as_strings(from_entries.table).equals(as_strings(cold.table)) and from_entries.filtered_out == cold.filtered_out


def test_a_stopped_store_skips_the_files_not_started_and_they_are_parsed_again(logs, tmp_path, monkeypatch):
    """Ctrl-C stops the deferred file store at its next file (dupfind.background.stop): the files
    being written finish, the others are not written, and the next run parses just those again."""
    import dupfind.background
    import dupfind.cache

    real_store = dupfind.cache.TableCache.store
    # Ctrl-C while the first files are written.
    cold = _ingest_storing_later(logs, tmp_path, monkeypatch, dupfind.background.stop)
    assert len(cold.files) > 2
    dupfind.background.wait()
    written = len(list((tmp_path / "cache").rglob("table.arrow")))
    assert 1 <= written <= 2 < len(cold.files)  # the files already started (two threads), no other
    assert not dupfind.background.stopping()  # a later command's stores run again
    monkeypatch.setattr(dupfind.cache.TableCache, "store", real_store)
    warm, cache = _run(logs, tmp_path / "cache")
    assert cache.hits == written and cache.misses == len(cold.files) - written
    assert as_strings(warm.table).equals(as_strings(cold.table))  # each table has its own pool of labels


def test_an_interrupted_store_leaves_no_half_written_entry(tmp_path, monkeypatch):
    """Ctrl-C (raised by polars in the storing thread) in the middle of an entry: its staging
    folder is removed and the interrupt goes on; an unwritable directory still only means no entry."""
    import polars as pl

    config = load_config(cwd=Path("/"))
    cache = TableCache(tmp_path / "cache", config.digest())
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_ipc", interrupted)
    from dupfind.ingest import FileReport

    with pytest.raises(KeyboardInterrupt):
        cache.store("ab" + "0" * 30, FileReport(path="x.log"), pl.DataFrame({"a": [1]}), pl.DataFrame({"b": [2]}))
    assert calls and not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() or p.name.startswith(".tmp-")]

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
    assert warm.table.equals(cold.table)
    assert warm.rejects.sort("source", "line").equals(cold.rejects.sort("source", "line"))
    assert warm.totals() == cold.totals()
    for a, b in zip(cold.files, warm.files):
        assert (a.path, a.format, a.lines, a.records, dict(a.rejected), a.fields, a.first_ts) == (
            b.path, b.format, b.lines, b.records, dict(b.rejected), b.fields, b.first_ts)


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
    assert warm.table.equals(cold.table)
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

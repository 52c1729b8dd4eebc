"""Near-empty columns the correlation holds apart: every reader still sees them, the read lets go."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import dupfind.correlate
import dupfind.pipeline
from dupfind.cli import app
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.pipeline import correlate_inputs, load_correlated
from dupfind.schema import as_strings

CONFIG = load_config(cwd=Path("/"))
# A visibility timeout stated at each worker's start and an error now and then: a few rows of hundreds.
LOGS = FIXTURES / "synth" / "visibility-timeout" / "logs"


def test_a_near_empty_column_is_held_apart_and_given_back_whole(monkeypatch):
    loaded = load_correlated([str(LOGS)], CONFIG, use_cache=False)
    correlation = loaded.correlation
    assert {"visibility_timeout_s", "error"} <= set(correlation.apart_names)
    assert not set(correlation.apart_names) & set(correlation.table.columns)
    assert not set(correlation.apart_names) & set(loaded.result.table.columns)  # the read let go of them too
    # Every column, in the order correlation made them, those held apart in their places.
    whole = correlation.table_slice(0, correlation.table.height)
    with monkeypatch.context() as m:
        m.setattr(dupfind.correlate, "APART_COLUMNS", ())
        read = ingest([str(LOGS)], CONFIG)
        reference = correlate_inputs(read.table, CONFIG, 25, read.texts)
    assert reference.apart is None and whole.columns == correlation.column_names == reference.table.columns
    assert as_strings(correlation.texts.decoded(whole)).equals(as_strings(reference.texts.decoded(reference.table)))
    apart_rows = correlation.apart["rid"].to_list()
    assert 0 < len(apart_rows) <= dupfind.correlate.APART_SHARE * whole.height * 2
    names = ["kind", *correlation.apart_names, "rid"]
    assert correlation.columns(*names).equals(whole.select(names))
    picks = [whole.height - 1, *apart_rows[:3], 0, apart_rows[0], whole.height // 2]  # unordered, repeated
    assert as_strings(correlation.rows(picks)).equals(as_strings(whole[picks]))
    assert as_strings(correlation.rows([])).equals(as_strings(whole.clear()))
    for start, length in ((0, 7), (apart_rows[0], 1), (apart_rows[1] - 3, 40), (whole.height - 5, 50)):
        assert correlation.table_slice(start, length).equals(whole.slice(start, length))
    spread = correlation.table_with("error")
    assert spread.columns == [c for c in whole.columns if c in correlation.table.columns or c == "error"]
    assert spread["error"].equals(whole["error"])
    assert as_strings(correlation.text_table()).equals(as_strings(correlation.texts.decoded(whole)))
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        correlation.columns("error", "no_such_column")


def test_the_files_pack_stored_after_the_output_lets_go_of_them_and_stores_them_whole(tmp_path, monkeypatch):
    """With the cache on, the pack of the files read, stored after the report, holds the columns
    held apart as the correlation does, and stores them apart (their rows with a value); a read
    of the pack puts them back in their rows: the same table as the first read."""
    from dupfind import background
    from dupfind.cache import TableCache

    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))
    background.defer_until_output()
    try:
        read = ingest([str(LOGS)], CONFIG, cache=TableCache(tmp_path / "cache", CONFIG.digest()), store_later=True)
        original = read.table
        assert {"visibility_timeout_s", "error"} <= set(original.columns)
        assert read.pack is not None and read.pack.table is original
        correlation = dupfind.pipeline.correlated_read(read, CONFIG)
        assert read.pack.table is read.table and read.pack.apart is correlation.apart
        assert not set(correlation.apart_names) & set(read.pack.table.columns)
        assert read.pack.whole().select(original.columns).equals(original)
    finally:
        background.run_deferred()
    assert read.pack.table is None and read.pack.apart is None  # let go of once stored
    (held,) = (tmp_path / "cache" / "packs").glob("*/apart.arrow")  # stored apart in the pack too
    assert set(correlation.apart_names) == set(pl.read_ipc(held).columns) - {"rid"}
    assert not set(correlation.apart_names) & set(pl.read_ipc_schema(held.parent / "table.arrow"))
    cache = TableCache(tmp_path / "cache", CONFIG.digest())
    again = ingest([str(LOGS)], CONFIG, cache=cache)
    assert again.pack is None and cache.hits == len(again.files) and cache.misses == 0
    assert as_strings(again.texts.decoded(again.table)).equals(as_strings(read.texts.decoded(original)))
    held.write_bytes(held.read_bytes()[:60])  # damaged: the pack is dropped, its files parsed again
    cache = TableCache(tmp_path / "cache", CONFIG.digest())
    third = ingest([str(LOGS)], CONFIG, cache=cache)
    assert cache.hits == 0 and not held.parent.exists()
    assert as_strings(third.texts.decoded(third.table)).equals(as_strings(read.texts.decoded(original)))


def test_a_column_with_values_on_more_rows_stays_in_the_table(tmp_path):
    path = tmp_path / "worker.log"
    lines = [{"ts": f"2026-07-21T10:00:{i:02d}.000Z", "level": "info", "worker": "w-1", "event": "job_started",
              "job_id": f"j-{i}", **({"error": "boom"} if i % 10 == 0 else {})} for i in range(60)]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    correlation = load_correlated([str(path)], CONFIG, use_cache=False).correlation
    assert correlation.apart is None and "error" in correlation.table.columns  # on a tenth of the rows
    assert correlation.column_names == correlation.table.columns


def _report(logs: Path) -> bytes:
    result = CliRunner().invoke(app, ["analyze", str(logs), "--format", "json", "--no-cache"])
    assert result.exit_code in (0, 1), result.output
    return result.stdout_bytes


@pytest.mark.parametrize(("folder", "share", "expected"), [
    ("visibility-timeout", None, {"visibility_timeout_s", "error"}),
    # Exit codes and grace periods on a few per cent of a deploy's records: held apart at a larger share.
    ("deploy-overlap", 0.5, {"exit_code", "grace_period_s", "visibility_timeout_s"}),
])
def test_holding_columns_apart_changes_no_finding(monkeypatch, folder, share, expected):
    logs = FIXTURES / "synth" / folder / "logs"
    if share is not None:
        monkeypatch.setattr(dupfind.correlate, "APART_SHARE", share)
    assert expected <= set(load_correlated([str(logs)], CONFIG, use_cache=False).correlation.apart_names)
    held = _report(logs)
    monkeypatch.setattr(dupfind.correlate, "APART_COLUMNS", ())
    whole = _report(logs)
    assert orjson.loads(held)["findings"] and held == whole

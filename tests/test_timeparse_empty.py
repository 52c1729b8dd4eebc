"""A column of timestamps with no value (a JSON record's leading and envelope times) is not parsed,
and gives what parsing it would: no time, not naive, one row each."""

from __future__ import annotations

import polars as pl
import pytest

from dupfind import schema
from dupfind.timeparse import parse_timestamps


@pytest.mark.parametrize("values", [
    pl.Series([None, None, None], dtype=pl.String),
    pl.Series([None, None], dtype=pl.Null),
    pl.Series([], dtype=pl.String),
])
def test_no_value_gives_no_time(values):
    parsed = parse_timestamps(values)
    assert parsed.schema == pl.Schema({"ts": schema.TS_TYPE, "naive": pl.Boolean})
    assert parsed.height == values.len()
    assert parsed["ts"].null_count() == values.len() and not parsed["naive"].any()


def test_a_column_with_one_value_is_parsed():
    parsed = parse_timestamps(pl.Series([None, "2026-07-21T10:00:01.250Z", None]))
    assert parsed["ts"].to_list()[1].isoformat() == "2026-07-21T10:00:01.250000+00:00"
    assert parsed["ts"].null_count() == 2 and not parsed["naive"].any()

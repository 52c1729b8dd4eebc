"""The Zulu fast pass of parse_timestamps gives what polars' parse of the format `_ISO_ZULU` gives,
value for value, on the common shape and on the near misses that pass must hand back."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.timeparse import _ISO_ZULU, _zulu_seconds_first, parse_timestamps

NEAR_MISSES = [
    "2026-07-21T10:00:00Z", "2026-07-21T10:00:00.Z", "2026-07-21T10:00:00.1234567891Z", "2026-02-30T00:00:00Z",
    "2026-07-21T23:59:60Z", "2026-07-21T23:59:60.5Z", "2026-07-21T24:00:00Z", "2026-07-21 10:00:00Z",
    "2026-07-21T10:00:00z", " 2026-07-21T10:00:00Z", "2026-07-21T10:00:00Z ", "+2026-07-21T10:00:00Z",
    "2026-7-21T10:00:00.000Z", "2026-07-21T10:00Z", "2026-07-21T1:00:00Z", "2026-07-21T10:00:00.999999999Z",
    "2026-07-21T10:00:00.0000005Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2026-07-21T10:00:00.-1Z",
    "2026-07-21T10:00:00.+1Z", "2026-07-21T10:00:00.1 Z", "2026-07-21T10:00:00.\u0661Z", "2026-07-21T10:60:00Z",
    "2026-13-01T00:00:00Z", "2026-07-21T10:00:00ZZ", "2026-07-21T10:00:00.5ZZ", "2023-02-29T00:00:00Z",
    "2024-02-29T00:00:00.5Z", "", "Z",
    # Digits of other scripts: six characters of the fraction, more than six bytes.
    "2026-07-21T10:00:00.\u0661\u0662\u0663\u0664Z", "2026-07-21T10:00:00.\u0661\u0662\u0663\u0664\u0665\u0666\u0667Z",
    "2026-07-21T10:00:00.12\u00e9456Z",
]


def _polars_zulu(values: pl.Series) -> pl.Series:
    return values.str.to_datetime(_ISO_ZULU, strict=False, time_unit="us")


@st.composite
def zulu_texts(draw) -> str:
    """The common shape with any fraction length, or a near miss of it."""
    year, month, day = draw(st.integers(1, 9999)), draw(st.integers(1, 13)), draw(st.integers(1, 31))
    hour, minute, second = draw(st.integers(0, 24)), draw(st.integers(0, 60)), draw(st.integers(0, 60))
    digits = draw(st.text(draw(st.sampled_from(["0123456789", "0123456789\u0661\u00e9"])), max_size=11))
    fraction = draw(st.sampled_from(["", "."])) + digits if digits else draw(st.sampled_from(["", "."]))
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}Z"
    return draw(st.sampled_from([text, text, text, " " + text, text + " ", text.replace("T", " "), text.lower()]))


def test_near_misses_match_polars_parse_of_the_format():
    values = pl.Series(NEAR_MISSES + [None], dtype=pl.String)
    fast = _zulu_seconds_first(values)
    reference = _polars_zulu(values)
    # What the pass reads, it reads as polars does; what it leaves, parse_timestamps hands to polars.
    assert fast.drop_nulls().len() >= 8
    assert (fast.is_null() | (fast == reference)).all()
    parsed = parse_timestamps(values)["ts"].dt.replace_time_zone(None)
    assert parsed.filter(reference.is_not_null()).equals(reference.drop_nulls().cast(parsed.dtype))


@settings(max_examples=300, deadline=None)
@given(st.lists(zulu_texts(), min_size=1, max_size=30))
def test_every_zulu_value_parses_as_polars_parses_the_format(texts):
    values = pl.Series(texts, dtype=pl.String)
    reference = _polars_zulu(values)
    parsed = parse_timestamps(values)
    ts = parsed["ts"].dt.replace_time_zone(None).cast(reference.dtype)
    # polars' parse of the format is the whole answer wherever it has one (the general path, with
    # zones and offsets, only sees what it leaves); such values are never naive.
    assert ts.filter(reference.is_not_null()).equals(reference.drop_nulls())
    assert not parsed["naive"].filter(reference.is_not_null()).any()

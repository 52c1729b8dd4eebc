"""Timestamps written in reports: the fast formatting gives what strftime gives, for every datetime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from dupfind.timefmt import iso, iso_us

ZONES = st.sampled_from([None, UTC, ZoneInfo("UTC"), ZoneInfo("Europe/Paris"), timezone(timedelta(hours=5, minutes=30)),
                        timezone(timedelta(hours=-8))])


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999), timezones=ZONES))
def test_iso_is_what_strftime_writes(ts):
    assert iso_us(ts) == ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert iso(ts) == ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def test_iso_of_nothing_is_nothing():
    assert iso(None) is None and iso_us(None) is None


def test_iso_keeps_the_wall_time_of_the_zone_given():
    ts = datetime(2026, 3, 2, 14, 0, 5, 120, tzinfo=timezone(timedelta(hours=2)))
    assert (iso(ts), iso_us(ts)) == ("2026-03-02T14:00:05.000Z", "2026-03-02T14:00:05.000120Z")

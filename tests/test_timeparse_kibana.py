"""Kibana's CSV reports write times in its own date format, in the browser's zone, without an offset."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from dupfind.timeparse import parse_timestamps


def test_kibana_report_times_are_local_times_of_the_assumed_zone():
    parsed = parse_timestamps(pl.Series(["Nov 29, 2026 @ 08:16:41.622", "Jul 1, 2026 @ 02:03:04.120", "Nov 29, 2026 @ 08:16:41"]),
                              "Europe/Berlin")
    assert parsed["ts"].to_list() == [
        datetime(2026, 11, 29, 7, 16, 41, 622000, tzinfo=UTC),  # CET, UTC+1
        datetime(2026, 7, 1, 0, 3, 4, 120000, tzinfo=UTC),  # CEST, UTC+2
        datetime(2026, 11, 29, 7, 16, 41, tzinfo=UTC),
    ]
    assert parsed["naive"].to_list() == [True, True, True]


def test_text_with_an_at_sign_that_is_not_such_a_time_stays_no_time():
    parsed = parse_timestamps(pl.Series(["Nov 29, 2026 @ noon", "deploy @ 08:16", "2026-11-29T07:16:41Z"]), "UTC")
    assert parsed["ts"].to_list()[:2] == [None, None]
    assert parsed["ts"][2] == datetime(2026, 11, 29, 7, 16, 41, tzinfo=UTC)

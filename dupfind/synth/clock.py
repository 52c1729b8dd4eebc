"""Simulated time to log timestamps: ISO-8601 UTC (ms, µs, ns) and epoch milliseconds."""

from __future__ import annotations

import calendar
import time

# The simulated world starts here; engine time 0 is this instant.
BASE_EPOCH_S = calendar.timegm((2026, 7, 21, 10, 0, 0, 0, 0, 0))
BASE_EPOCH_US = BASE_EPOCH_S * 1_000_000


class TimeFormatter:
    """Formats engine times (µs since BASE) quickly: the date part is cached per day."""

    def __init__(self) -> None:
        self._days: dict[int, str] = {}

    def _second(self, sec: int) -> str:
        day, rest = divmod(BASE_EPOCH_S + sec, 86400)
        date = self._days.get(day)
        if date is None:
            date = time.strftime("%Y-%m-%dT", time.gmtime(day * 86400))
            self._days[day] = date
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"{date}{hours:02d}:{minutes:02d}:{seconds:02d}"

    def iso_ms(self, t: int) -> str:
        sec, frac = divmod(t, 1_000_000)
        return f"{self._second(sec)}.{frac // 1000:03d}Z"

    def iso_us(self, t: int) -> str:
        sec, frac = divmod(t, 1_000_000)
        return f"{self._second(sec)}.{frac:06d}Z"

    def iso_ns(self, t: int, extra_ns: int) -> str:
        sec, frac = divmod(t, 1_000_000)
        return f"{self._second(sec)}.{frac:06d}{extra_ns:03d}Z"

    @staticmethod
    def epoch_ms(t: int) -> int:
        return (BASE_EPOCH_US + t) // 1000


_TRUE = TimeFormatter()


def iso_true(t: int) -> str:
    """Engine time as an ISO-8601 UTC string with microseconds (used for truth times)."""
    return _TRUE.iso_us(t)

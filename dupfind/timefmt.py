"""Format timestamps and durations for reports."""

from __future__ import annotations

from datetime import datetime


def iso(ts: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and Z, or None."""
    if ts is None:
        return None
    if ts.year < 1000:  # strftime writes such a year without its leading zeros
        return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    return ts.isoformat(timespec="milliseconds")[:23] + "Z"


def iso_us(ts: datetime | None) -> str | None:
    """ISO-8601 UTC with microseconds and Z, or None."""
    if ts is None:
        return None
    if ts.year < 1000:
        return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # isoformat: a tenth of strftime's time (a report cites tens of thousands of records).
    return ts.isoformat(timespec="microseconds")[:26] + "Z"

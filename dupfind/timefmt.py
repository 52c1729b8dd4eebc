"""Format timestamps and durations for reports."""

from __future__ import annotations

from datetime import datetime

# Formatted from the fields: strftime and isoformat ask the zone (zoneinfo's UTC, on every time
# polars gives) for each value; a report cites hundreds of thousands of records.
_MS = "%d-%02d-%02dT%02d:%02d:%02d.%03dZ"
_US = "%d-%02d-%02dT%02d:%02d:%02d.%06dZ"


def iso(ts: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and Z, or None."""
    if ts is None:
        return None
    if ts.year < 1000:  # strftime writes such a year without its leading zeros
        return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    return _MS % (ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond // 1000)


def iso_us(ts: datetime | None) -> str | None:
    """ISO-8601 UTC with microseconds and Z, or None."""
    if ts is None:
        return None
    if ts.year < 1000:
        return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return _US % (ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond)

"""Format timestamps and durations for reports."""

from __future__ import annotations

from datetime import datetime


def iso(ts: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and Z, or None."""
    if ts is None:
        return None
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def iso_us(ts: datetime | None) -> str | None:
    """ISO-8601 UTC with microseconds and Z, or None."""
    if ts is None:
        return None
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

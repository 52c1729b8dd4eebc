"""Which rows of a long terminal table to show: the most telling ones, in their own order."""

from __future__ import annotations

from typing import Any


def most_telling(rows: list[dict[str, Any]], limit: int, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """At most `limit` rows (0: all), those with the highest values of `keys` (the first key first,
    a missing value as 0, ties in their order), in their own order."""
    if not limit or len(rows) <= limit:
        return rows
    ranked = sorted(range(len(rows)), key=lambda i: (*(-(rows[i].get(k) or 0) for k in keys), i))
    return [rows[i] for i in sorted(ranked[:limit])]

"""JSON that gives back exactly the Python values it was given (the result cache's findings and summaries).

Plain JSON loses types: a datetime becomes a string, a tuple a list, NaN becomes null, an int key a
string. `encode` turns a value into JSON-safe data in which such values are tagged (a one-key dict
whose key starts with `$`), `decode` undoes it. A value of any other type raises TypeError, so
that a cache never stores what it could not give back.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

TAGS = ("$dt", "$date", "$td", "$t", "$f", "$i", "$d")
_INT_RANGE = (-(1 << 63), (1 << 63) - 1)


_ZONES: dict[str, ZoneInfo] = {}


def _zone(key: str) -> ZoneInfo:
    zone = _ZONES.get(key)
    if zone is None:
        zone = _ZONES[key] = ZoneInfo(key)
    return zone


def encode_datetime(value: datetime) -> list:
    """A datetime as [ISO text, zone] (and a third item, 1, for the second of a repeated wall
    time, fold=1): zone is a ZoneInfo key, "" for a fixed offset, None when naive."""
    tz = value.tzinfo
    zone = None if tz is None else (tz.key if isinstance(tz, ZoneInfo) else "")
    if zone == "" and not isinstance(tz, timezone):
        raise TypeError(f"cannot encode the time zone {tz!r}")
    return [value.isoformat(), zone, 1] if value.fold else [value.isoformat(), zone]


def decode_datetime(data: list) -> datetime:
    text, zone, *fold = data
    value = datetime.fromisoformat(text)
    if fold:
        value = value.replace(fold=fold[0])
    # The wall time in its zone again (the ISO text's offset only says which of a repeated hour).
    return value.replace(tzinfo=_zone(zone)) if zone else value


def encode(value: Any) -> Any:
    """JSON-safe data from which `decode` rebuilds an equal value of the same types."""
    kind = type(value)
    if value is None or kind is str or kind is bool:
        return value
    if kind is int:
        return value if _INT_RANGE[0] <= value <= _INT_RANGE[1] else {"$i": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if kind is list:
        return [encode(v) for v in value]
    if kind is dict:
        if all(type(k) is str for k in value) and not (len(value) == 1 and next(iter(value)) in TAGS):
            return {k: encode(v) for k, v in value.items()}
        return {"$d": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is tuple:
        return {"$t": [encode(v) for v in value]}
    if kind is datetime:
        return {"$dt": encode_datetime(value)}
    if kind is date:
        return {"$date": value.isoformat()}
    if kind is timedelta:
        return {"$td": [value.days, value.seconds, value.microseconds]}
    raise TypeError(f"cannot encode a {kind.__name__} exactly")


def encode_values(values: list) -> list:
    """A row of values as [indexes of the values that needed tags, *encoded values]: `decode_values`
    then only walks those (most values of a finding are plain strings and numbers)."""
    encoded = [encode(v) for v in values]
    tagged = [i for i, (e, v) in enumerate(zip(encoded, values)) if not (e is v or (type(e) is type(v) and e == v))]
    return [tagged, *encoded]


def decode_values(state: list, count: int) -> list:
    """The row of `count` values that `encode_values` was given."""
    if len(state) != count + 1:
        raise ValueError(f"expected {count} values, found {len(state) - 1}")
    values = state[1:]
    for i in state[0]:
        value = values[i]
        dt = value.get("$dt") if type(value) is dict and len(value) == 1 else None
        values[i] = decode_datetime(dt) if dt is not None else decode(value)
    return values


def decode(data: Any) -> Any:
    """The value `encode` was given."""
    kind = type(data)
    if kind is list:
        return [decode(v) if type(v) in _CONTAINERS else v for v in data]
    if kind is not dict:
        return data
    if len(data) == 1:
        tag, inner = next(iter(data.items()))
        if tag in TAGS:
            if tag == "$dt":
                return decode_datetime(inner)
            if tag == "$t":
                return tuple(decode(v) for v in inner)
            if tag == "$d":
                return {decode(k): decode(v) for k, v in inner}
            if tag == "$f":
                return float(inner)
            if tag == "$i":
                return int(inner)
            if tag == "$date":
                return date.fromisoformat(inner)
            return timedelta(days=inner[0], seconds=inner[1], microseconds=inner[2])
    return {k: decode(v) if type(v) in _CONTAINERS else v for k, v in data.items()}


_CONTAINERS = (list, dict)

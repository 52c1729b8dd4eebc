"""Vectorised timestamp parsing: ISO-8601 variants and epoch numbers, dateutil as fallback."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import polars as pl

from dupfind import schema
from dupfind.errors import DupfindError

_NUMERIC = r"^[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$"
_HAS_OFFSET = r"(?:[+-]\d{2}(?::?\d{2})?)$"
_ISO_ZULU = "%Y-%m-%dT%H:%M:%S%.fZ"
_ISO_AWARE = "%Y-%m-%dT%H:%M:%S%.f%z"
_ISO_NAIVE = "%Y-%m-%dT%H:%M:%S%.f"
_ISO_NAIVE_MINUTES = "%Y-%m-%dT%H:%M"
# Kibana's CSV reports (its default dateFormat, `MMM D, YYYY @ HH:mm:ss.SSS`, in the browser's zone).
_KIBANA_TIME = "%b %d, %Y @ %H:%M:%S%.f"

# Plausible epoch range: 1990 to 2100, in seconds. Magnitude picks the unit.
_EPOCH_MIN_S = 631_152_000
_EPOCH_MAX_S = 4_102_444_800


def _epoch_to_us(numbers: pl.Expr) -> pl.Expr:
    """Epoch seconds, ms, us or ns (unit from magnitude) to integer microseconds."""
    a = numbers.abs()
    return (
        pl.when(a < 1e11).then(numbers * 1e6)
        .when(a < 1e14).then(numbers * 1e3)
        .when(a < 1e17).then(numbers)
        .otherwise(numbers / 1e3)
        .round(0)
        .cast(pl.Int64, strict=False)
    )


def _epoch_int_to_us(numbers: pl.Expr) -> pl.Expr:
    """Integer epoch values, exact for nanoseconds (floats would lose digits)."""
    a = numbers.abs()
    return (
        pl.when(a < 100_000_000_000).then(numbers * 1_000_000)
        .when(a < 100_000_000_000_000).then(numbers * 1_000)
        .when(a < 100_000_000_000_000_000).then(numbers)
        .otherwise(numbers // 1_000)
    )


# 10**(6 - n): the microseconds of one unit of an n-digit fraction (n = 0..6). A list, not a
# Series: polars is imported lazily, when first used, not when this module is.
_FRACTION_SCALE = [10**6, 10**5, 10**4, 10**3, 100, 10, 1]


def _looks_zulu(raw: pl.Series) -> bool:
    """Whether the column's first values end in `Z` (the common shape): then _zulu_seconds_first first."""
    return bool(raw.drop_nulls().head(8).str.ends_with("Z").any())


def _zulu_seconds_first(raw: pl.Series) -> pl.Series:
    """`YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z` as naive UTC microseconds, null for any other text.

    The same values as polars' parse of the format `_ISO_ZULU` (microseconds truncated), in about
    half its time at 1M values: polars parses the fixed `%Y-%m-%dT%H:%M:%S` prefix on a fast path of
    its own, and the fraction is a number scaled by its length. Text the pattern leaves (leading
    space, unpadded fields, more than nine digits) is null here and parsed with `_ISO_ZULU`."""
    seconds = raw.str.slice(0, 19).str.to_datetime("%Y-%m-%dT%H:%M:%S", strict=False, time_unit="us")
    tail = raw.str.slice(19)
    digits = tail.str.slice(1, 6).str.strip_suffix("Z")  # the fraction's first six characters (or "")
    # Counted in characters, as sliced: a digit of another script is two bytes (`fits` rejects it).
    scale = pl.Series(_FRACTION_SCALE, dtype=pl.Int64).gather(digits.str.len_chars())
    micros = digits.cast(pl.Int64, strict=False) * scale
    fits = tail.str.contains(r"^(?:\.[0-9]{1,9})?Z$")
    return pl.select(
        pl.when(fits).then(seconds + pl.duration(microseconds=micros.fill_null(0)))
    ).to_series().rename(raw.name)


def parse_timestamps(values: pl.Series, assume_tz: str = "UTC") -> pl.DataFrame:
    """Parse text timestamps. Returns columns `ts` (UTC, us) and `naive` (no zone was given).

    Unparseable values give null `ts`. Epoch numbers are always UTC and never naive. The common
    shape (ISO-8601 with `T` and `Z`) is parsed first (_zulu_seconds_first); only the rest takes the
    general path.
    """
    raw = values.cast(pl.String)
    if raw.null_count() == raw.len():  # nothing to parse: a JSON record's leading and envelope times
        return pl.DataFrame({
            "ts": pl.repeat(None, raw.len(), dtype=schema.TS_TYPE, eager=True),
            "naive": pl.repeat(False, raw.len(), dtype=pl.Boolean, eager=True),
        })
    if _looks_zulu(raw):
        fast = _zulu_seconds_first(raw)
        left = (fast.is_null() & raw.is_not_null()).arg_true()
        if left.len():  # Zulu shapes the pass above leaves (a leading space, unpadded fields, 10+ digits)
            fast = fast.scatter(left, raw.gather(left).str.to_datetime(_ISO_ZULU, strict=False, time_unit="us"))
    else:
        fast = raw.str.to_datetime(_ISO_ZULU, strict=False, time_unit="us")
    fast = fast.dt.replace_time_zone("UTC")
    rest = (fast.is_null() & raw.is_not_null()).arg_true()
    if rest.len() == 0:
        return pl.DataFrame({"ts": fast.cast(schema.TS_TYPE), "naive": pl.repeat(False, raw.len(), dtype=pl.Boolean, eager=True)})
    slow = _parse_general(raw.gather(rest), assume_tz)
    naive = pl.repeat(False, raw.len(), dtype=pl.Boolean, eager=True).rename("naive").scatter(rest, slow["naive"])
    return pl.DataFrame({"ts": fast.cast(schema.TS_TYPE).scatter(rest, slow["ts"]), "naive": naive})


def _parse_general(values: pl.Series, assume_tz: str) -> pl.DataFrame:
    """Every supported shape: ISO variants with or without zone, epoch numbers, dateutil."""
    frame = pl.DataFrame({"raw": values})
    cleaned = (
        pl.col("raw").str.strip_chars()
        # Go's log package (`2026/12/06 22:04:14.860574`, LstdFlags|Lmicroseconds): the date with slashes
        .str.replace(r"^(\d{4})/(\d{2})/(\d{2})[ T](\d)", "${1}-${2}-${3}T${4}")
        .str.replace(r"^(\d{4}-\d{2}-\d{2})[ _](\d)", "${1}T${2}")
        .str.replace(r"(T\d{2}:\d{2}:\d{2}),(\d)", "${1}.${2}")
        .str.replace(r"(?i)(?:z| ?utc| ?gmt)$", "+00:00")
        .str.replace(r" ([+-]\d{2}:?\d{2})$", "${1}")
    )
    frame = frame.with_columns(clean=cleaned)
    is_num = pl.col("clean").str.contains(_NUMERIC)
    is_int = pl.col("clean").str.contains(r"^[+-]?\d+$")
    has_offset = pl.col("clean").str.contains(_HAS_OFFSET) & pl.col("clean").str.contains("T")
    epoch_us = (
        pl.when(is_int).then(_epoch_int_to_us(pl.col("clean").cast(pl.Int64, strict=False)))
        .when(is_num).then(_epoch_to_us(pl.col("clean").cast(pl.Float64, strict=False)))
    )
    aware = pl.col("clean").str.to_datetime(_ISO_AWARE, strict=False, time_unit="us", time_zone="UTC")
    naive_local = pl.coalesce(
        pl.col("clean").str.to_datetime(_ISO_NAIVE, strict=False, time_unit="us"),
        pl.col("clean").str.to_datetime(_ISO_NAIVE_MINUTES, strict=False, time_unit="us"),
    )
    naive_utc = _local_to_utc(naive_local, assume_tz)
    frame = frame.with_columns(
        ts=pl.when(is_num)
        .then(pl.from_epoch(epoch_us, time_unit="us").dt.replace_time_zone("UTC"))
        .when(has_offset).then(aware)
        .otherwise(naive_utc),
        naive=~is_num & ~has_offset,
    )
    frame = frame.with_columns(
        ts=pl.when(is_num & ~epoch_us.is_between(_EPOCH_MIN_S * 1_000_000, _EPOCH_MAX_S * 1_000_000))
        .then(None)
        .otherwise(pl.col("ts"))
    )
    missing = frame.filter(pl.col("ts").is_null() & pl.col("clean").is_not_null() & ~is_num)
    if missing.height and missing["clean"].str.contains(" @ ", literal=True).any():
        frame = frame.with_columns(ts=pl.coalesce("ts", _local_to_utc(pl.col("clean").str.to_datetime(
            _KIBANA_TIME, strict=False, time_unit="us"), assume_tz)))
        missing = frame.filter(pl.col("ts").is_null() & pl.col("clean").is_not_null() & ~is_num)
    if missing.height:
        frame = _dateutil_fallback(frame, missing["clean"].unique(), assume_tz)
    return frame.select(
        pl.col("ts").cast(schema.TS_TYPE),
        (pl.col("naive") & pl.col("ts").is_not_null()).fill_null(False).alias("naive"),
    )


def _local_to_utc(local: pl.Expr, assume_tz: str) -> pl.Expr:
    return local.dt.replace_time_zone(assume_tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC")


def _dateutil_fallback(frame: pl.DataFrame, distinct: pl.Series, assume_tz: str) -> pl.DataFrame:
    """Parse the distinct strings polars could not, with dateutil, and join them back."""
    from dateutil import parser as dateutil_parser  # 12 ms to import: only for such strings

    zone = ZoneInfo(assume_tz)
    keys, parsed, naive = [], [], []
    for text in distinct.to_list():
        if not text or len(text) > 64 or not re.search(r"\d{1,2}:\d{2}", text):
            continue
        try:
            # Common Log Format puts a colon between date and time: 29/Nov/2026:07:16:09.
            value = dateutil_parser.parse(re.sub(r"^(\d{1,2}/\w{3}/\d{4}):", r"\1 ", text))
        except (ValueError, OverflowError, TypeError):
            continue
        is_naive = value.tzinfo is None
        if is_naive:
            value = value.replace(tzinfo=zone)
        try:
            value = value.astimezone(timezone.utc)
        except (ValueError, OverflowError):
            continue
        if not (1990 <= value.year <= 2100):
            continue
        keys.append(text)
        parsed.append(value)
        naive.append(is_naive)
    if not keys:
        return frame
    lookup = pl.DataFrame(
        {"clean": keys, "fb_ts": parsed, "fb_naive": naive},
        schema={"clean": pl.String, "fb_ts": schema.TS_TYPE, "fb_naive": pl.Boolean},
    )
    joined = frame.join(lookup, on="clean", how="left", maintain_order="left")
    return joined.with_columns(
        naive=pl.when(pl.col("ts").is_null() & pl.col("fb_ts").is_not_null())
        .then(pl.col("fb_naive")).otherwise(pl.col("naive")),
        ts=pl.coalesce("ts", "fb_ts"),
    ).drop("fb_ts", "fb_naive")


_RELATIVE = re.compile(r"^-?(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|w)$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "w": 604800}


def parse_time_bound(text: str, option: str, now: datetime | None = None, assume_tz: str = "UTC") -> datetime:
    """`--since/--until` values: ISO times, epoch numbers, or relative (`-2h`, `30m` ago)."""
    now = now or datetime.now(timezone.utc)
    match = _RELATIVE.match(text.strip())
    if match:
        amount, unit = float(match.group(1)), match.group(2).lower()
        return now - timedelta(seconds=amount * _UNIT_SECONDS[unit])
    parsed = parse_timestamps(pl.Series([text]), assume_tz)["ts"][0]
    if parsed is None:
        raise DupfindError(
            f"{option} {text!r} is not a time: use ISO-8601 (2026-07-21T10:00:00Z) or a relative one (-2h, 30m)."
        )
    return parsed

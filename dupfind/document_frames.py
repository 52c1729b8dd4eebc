"""A JSON document's records unwrapped by their preset in polars: a block of records as NDJSON lines, one frame."""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Callable

import polars as pl

from dupfind.envelopes import (
    bytes_as_text,
    decoded_record,
    envelope_keys,
    inner_expr,
    kept_inner,
    time_expr,
    with_framework_lines,
)
from dupfind.json_values import element_lines
from dupfind.nested_text import repaired
from dupfind.normalize import FALLBACK_TS, path_expr
from dupfind.presets import ENVELOPE_PREFIX, Preset

# polars takes a high surrogate that no low one follows (as U+FFFD) where orjson, and any strict
# JSON reader, refuses it: such a block is read by orjson (an escaped backslash before `ud800`
# sends a block there too, which is only slower).
_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})")


def _strings(keys: list[str]) -> dict[str, pl.DataType]:
    return {k: pl.String for k in keys} or {"_": pl.String}


def _lines(payload: bytes) -> pl.Series:
    return pl.Series([payload], dtype=pl.Binary).cast(pl.String).str.split("\n").explode().str.strip_chars()


def _strict_read(payload: bytes, schema: dict[str, pl.DataType], count: int | None) -> pl.DataFrame | None:
    """The schema's keys of each line; None unless every one of `count` lines (None: the lines)
    is a JSON object that fits it (polars refuses the block: a cut inside a string, a value that
    is not an object, NaN, bytes that are not UTF-8, a hit whose `_source` is not an object)."""
    try:
        frame = pl.read_ndjson(io.BytesIO(payload), schema=schema)
    except Exception:  # noqa: BLE001 - polars raises several error types on malformed input
        return None
    return frame if count in (None, frame.height) else None


class RecordReader:
    """What a preset takes out of its records, read as NDJSON lines by polars: the same rows
    (`envelopes.unwrapped_frame`) as `presets.unwrap_record` gives one record at a time, for the
    presets whose records need no rewriting (no field/value pairs, key-value or tag lists, lifted
    objects). `tail`: the records are at this key of each line's object (a search hit's
    `_source`); a line without an object there is not a record."""

    def __init__(self, preset: Preset, tail: str = "") -> None:
        self.preset, self.tail = preset, tail
        self.keys = envelope_keys(preset)

    @staticmethod
    def handles(preset: Preset | None) -> bool:
        return preset is not None and preset.kind == "json" and not (
            preset.record_pairs or preset.record_list or preset.kv_lists or preset.tag_lists or preset.lift
        )

    def read(self, elements: bytes, first: int, separator: bytes | None = None) -> tuple[pl.DataFrame, pl.Series, int] | None:
        """The unwrapped rows of array elements written one after the other (ValueCutter.elements,
        `separator` between them if known), numbered from `first` on, the numbers that are not
        records, and how many elements; None if polars refuses one (a cut inside a string or a
        nested array, an element that is not an object)."""
        if _LONE_SURROGATE.search(elements):
            return None
        payload, count = element_lines(elements, separator)
        # A hit's record is read as a struct of the keys (not as its whole text, which polars
        # would write again); a hit without one is not a record.
        schema = {self.tail: pl.Struct(_strings(self.keys))} if self.tail else _strings(self.keys)
        frame = _strict_read(payload, schema, count)
        if frame is None:
            return None
        return (*self._unwrap_read(frame, payload, first), frame.height)

    def _unwrap_read(self, frame: pl.DataFrame, payload: bytes, first: int) -> tuple[pl.DataFrame, pl.Series]:
        lines = pl.int_range(first, first + frame.height, dtype=pl.Int64, eager=True)
        held = frame[self.tail].is_not_null() if self.tail else None
        # the lines' texts, split once if the repair or a record without its inner value needs them
        texts = functools.cache(lambda: _lines(payload) if held is None else _lines(payload).filter(held))
        if held is None:
            frame = repaired(frame, texts, payload)
            return self.unwrapped(frame, lines, texts), lines.clear()
        frame = repaired(frame.filter(held).unnest(self.tail), texts, payload, self.tail)
        records = lambda: texts().str.json_path_match(f"$['{self.tail}']")
        return self.unwrapped(frame, lines.filter(held), records), lines.filter(~held)

    def unwrapped(self, frame: pl.DataFrame, lines: pl.Series, texts: pl.Series | Callable[[], pl.Series]) -> pl.DataFrame:
        """Rows line, text, fallback time and envelope columns, as `envelopes.unwrapped_frame`
        builds them from `unwrap_record`: the first inner path's value is the text (an object
        as JSON text; none: the whole record), every field path's non-empty value an envelope
        column (one that holds no value is left out), the first time path's the fallback time."""
        preset, available = self.preset, set(frame.columns)
        inner = bytes_as_text(frame.select(inner_expr(preset, available).cast(pl.String).alias("text")).to_series())
        if preset.inner_json_only:
            inner = inner.set(~kept_inner(preset, inner), None)
        inner = with_framework_lines(preset, frame, inner)
        decoded = decoded_record(preset, available)
        if decoded is not None:
            inner = inner.set(frame.select(decoded.fill_null(False)).to_series(), None)
        if inner.null_count():  # a record without its inner value is its own text
            inner = inner.fill_null(texts() if callable(texts) else texts)
        exprs, times, named = [inner], [], set()
        for column, paths in preset.fields.items():
            for path in paths:
                value = path_expr(path, available)
                if value is None:
                    continue
                value = value.cast(pl.String)
                if column == "ts":  # OTLP writes 0 for "time unknown": the observed time follows
                    times.append(pl.when(value.str.strip_chars("0") != "").then(value))
                elif ENVELOPE_PREFIX + path not in named:
                    named.add(ENVELOPE_PREFIX + path)
                    exprs.append(pl.when(value != "").then(value).alias(ENVELOPE_PREFIX + path))
        fallback = time_expr(preset, pl.coalesce(times)) if times else pl.lit(None, dtype=pl.String)
        exprs.append(fallback.alias(FALLBACK_TS))
        out = frame.select(exprs)
        paths = [c for c in out.columns if c.startswith(ENVELOPE_PREFIX)]
        held = out.select(pl.col(c).is_not_null().any() for c in paths).row(0) if paths else ()
        envelope = sorted(c for c, hit in zip(paths, held) if hit)
        return out.select(lines.alias("line"), "text", FALLBACK_TS, *envelope)

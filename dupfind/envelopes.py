"""Envelopes: export records and container lines that wrap the real record, unwrapped by their preset."""

from __future__ import annotations

import functools
import operator
from collections.abc import Collection
from typing import Any, Callable

import orjson
import polars as pl

from dupfind import json_exact
from dupfind.grammar import with_pairs
from dupfind.normalize import FALLBACK_TS, LINE, path_expr
from dupfind.presets import (
    AFTER_FIRST_LINE,
    ANSI_ESCAPE,
    ENVELOPE_PREFIX,
    PAIRS_PREFIX,
    Preset,
    Unwrapped,
    text_of_bytes,
)

_NAIVE_TIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?$"
# Prometheus label sets as logcli prints them: {app="notifier", pod="w-1"} -> JSON.
_LABEL_KEY = r'([A-Za-z_][A-Za-z0-9_]*)="'


def _prefixes(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:cut]) for cut in range(1, len(parts) + 1)]


def envelope_keys(preset: Preset) -> list[str]:
    """The keys to read of a preset's envelope (records or lines): every prefix of its inner and
    field paths (a nested path is looked up inside its parent's text, normalize.path_expr)."""
    paths = (*preset.inner, *preset.inner_lines_at, *preset.inner_unless, *(q for ps in preset.fields.values() for q in ps))
    return sorted({k for p in paths for k in _prefixes(p)})


def decoded_record(preset: Preset, available: set[str]) -> pl.Expr | None:
    """Which records name their event or job themselves (a text at one of the preset's
    `inner_unless` paths, not an object: ECS's `event` object is a shipper's): decoded already, an
    ECS logger's or a shipper's JSON parser's, whose `message` is a message even when it holds JSON
    (a provider's response), not the application's line to unwrap (presets._names_itself, record by
    record). None: the preset has no such paths."""
    texts = [e.cast(pl.String) for e in (path_expr(p, available) for p in preset.inner_unless) if e is not None]
    if not texts:
        return None
    return pl.any_horizontal([t.is_not_null() & ~t.str.starts_with("{") & ~t.str.starts_with("[") for t in texts])


def bytes_as_text(inner: pl.Series) -> pl.Series:
    """Inner values read as text that are the JSON array of their bytes (presets.text_of_bytes) as
    the text those bytes spell."""
    arrays = inner.str.starts_with("[").fill_null(False)
    if not arrays.any():
        return inner
    positions = arrays.arg_true()
    values = inner.gather(positions).to_list()
    texts = []
    for value in values:
        try:
            texts.append(text_of_bytes(orjson.loads(value)) or value)
        except orjson.JSONDecodeError:
            texts.append(value)
    return inner.scatter(positions, pl.Series(texts, dtype=pl.String))


def _json_objects(texts: pl.Series) -> pl.Series:
    """Which texts are a JSON object (null: not)."""
    return texts.str.strip_chars_start().str.starts_with("{").fill_null(False)


def _framework_mask(preset: Preset, texts: pl.Series, json: pl.Series) -> pl.Series:
    """Which of `texts` are lines of the preset's `inner_lines` (by their first line: a text of
    several is a record and its traceback). The patterns run only on the texts that are not JSON
    objects (`json`): JSON lines, the usual export, run none (0.4 s a million hits)."""
    found = pl.repeat(False, texts.len(), dtype=pl.Boolean, eager=True)
    candidates = (~json & texts.is_not_null()).arg_true()
    if not preset.inner_line_patterns or candidates.len() == 0:
        return found
    texts = texts.gather(candidates)
    if texts.str.contains("\n", literal=True).any():
        texts = texts.str.replace(AFTER_FIRST_LINE, "")
    matched = functools.reduce(operator.or_, (texts.str.contains(pattern).fill_null(False) for pattern in preset.inner_line_patterns))
    return found.scatter(candidates, matched)


def kept_inner(preset: Preset, inner: pl.Series) -> pl.Series:
    """Which inner texts an envelope with `inner_json_only` unwraps: JSON objects, and lines of
    its `inner_lines`."""
    json = _json_objects(inner)
    return json | _framework_mask(preset, inner, json)


def with_framework_lines(preset: Preset, frame: pl.DataFrame, inner: pl.Series) -> pl.Series:
    """The inner texts, each replaced by the value at the preset's `inner_lines_at` paths where
    that is a line of its `inner_lines` (Datadog's `attributes.message`; presets._framework_text)."""
    available = set(frame.columns)
    paths = [e for e in (path_expr(p, available) for p in preset.inner_lines_at) if e is not None]
    if not paths or not preset.inner_line_patterns:
        return inner
    lines = frame.select(pl.coalesce(paths).cast(pl.String)).to_series()
    return inner.zip_with(~_framework_mask(preset, lines, _json_objects(lines)), lines)


def inner_expr(preset: Preset, available: set[str]) -> pl.Expr:
    """The first of a preset's inner paths that holds a value (null: none does)."""
    inners = [e for e in (path_expr(p, available) for p in preset.inner) if e is not None]
    return pl.coalesce(inners) if inners else pl.lit(None, dtype=pl.String)


def time_expr(preset: Preset, expr: pl.Expr) -> pl.Expr:
    if preset.timezone != "UTC":
        return expr
    stripped = expr.str.strip_chars()
    return pl.when(stripped.str.contains(_NAIVE_TIME)).then(stripped + "Z").otherwise(expr)


def _envelope_columns(preset: Preset, frame: pl.DataFrame) -> list[pl.Expr]:
    """Fallback time and one `envelope.<path>` column per envelope path the preset maps."""
    available = set(frame.columns)
    exprs: list[pl.Expr] = []
    times = [e for e in (path_expr(p, available) for p in preset.fields.get("ts", ())) if e is not None]
    if times:
        exprs.append(time_expr(preset, pl.coalesce(times) if len(times) > 1 else times[0]).alias(FALLBACK_TS))
    seen: set[str] = set()  # a path two columns fall back to (zap's message: the name and the message) is one column
    for column, paths in preset.fields.items():
        if column == "ts":
            continue
        for path in paths:
            if path in seen:
                continue
            expr = path_expr(path, available)
            if expr is not None:
                seen.add(path)
                exprs.append(expr.cast(pl.String).alias(ENVELOPE_PREFIX + path))
    return exprs


def _decode_each(texts: list[str], keys: list[str]) -> pl.DataFrame:
    """Per-line decoding when polars refused the block (a malformed line somewhere in it)."""
    rows = []
    for text in texts:
        try:
            value: Any = json_exact.loads(text)
        except orjson.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            rows.append({k: None for k in keys})
            continue
        row = {}
        for key in keys:
            item = value.get(key)
            row[key] = item if isinstance(item, str) or item is None else json_exact.dumps(item).decode()
        rows.append(row)
    return pl.DataFrame(rows, schema={k: pl.String for k in keys})


def unwrap_json_lines(
    preset: Preset, rows: pl.DataFrame, read_json: Callable[[pl.Series, dict], Any],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """NDJSON lines that are envelopes: (inner rows with envelope columns, lines that are not envelopes)."""
    keys = envelope_keys(preset)
    env = read_json(rows["text"], {k: pl.String for k in keys})
    if env is None:
        env = _decode_each(rows["text"].to_list(), keys)
    inner = inner_expr(preset, set(env.columns))
    values = env.select(inner.cast(pl.String).alias("__inner"), *_envelope_columns(preset, env))
    values = values.with_columns(bytes_as_text(values["__inner"]))
    wrapped = values["__inner"].is_not_null()
    if preset.inner_json_only:
        wrapped = wrapped & kept_inner(preset, values["__inner"])
    if preset.inner_lines_at:
        values = values.with_columns(with_framework_lines(preset, env, values["__inner"].set(~wrapped, None)).alias("__inner"))
        wrapped = values["__inner"].is_not_null()
    decoded = decoded_record(preset, set(env.columns))
    if decoded is not None:
        wrapped = wrapped & ~env.select(decoded.fill_null(False)).to_series()
    loose = rows.filter(~wrapped).select("line", "text")
    inner_rows = pl.concat([rows.select("line"), values], how="horizontal").filter(wrapped).rename({"__inner": "text"})
    return inner_rows, loose


def unwrap_text_lines(
    preset: Preset, rows: pl.DataFrame, keys: Collection[str] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Text lines in an envelope (CRI, logcli): (inner rows with envelope columns, other lines).
    The `key="value"` pairs of the preset's `pairs` groups (RFC 5424's structured data) are
    `envelope.pairs.<key>` columns, of the `keys` the configuration names."""
    clean = pl.col("text").str.replace_all(ANSI_ESCAPE, "")
    rows = rows.with_columns(__clean=clean)
    is_envelope = pl.col("__clean").str.contains(preset.line)
    other = rows.filter(~is_envelope).select("line", "text")
    matched = rows.filter(is_envelope)
    groups = matched.select(pl.col("__clean").str.extract_groups(preset.line)).unnest("__clean")
    if preset.joined:
        groups = groups.with_columns(
            pl.concat_str([pl.col(g).replace("", None) for g in parts], separator=" ", ignore_nulls=True).replace("", None).alias(name)
            for name, parts in preset.joined.items()
        )
    if "labels" in groups.columns:
        groups = groups.with_columns(
            pl.col("labels").str.replace_all(_LABEL_KEY, '"${1}":"').str.replace_all(r'",\s+"', '","')
        )
    if "ts" in groups.columns:
        groups = groups.rename({"ts": "__ts"})
        fields = {**preset.fields, "ts": ("__ts",)}
        preset_view = Preset(**{**preset.__dict__, "fields": fields})
    else:
        preset_view = preset
    extra = groups.select(*_envelope_columns(preset_view, groups))
    if preset.pairs:
        extra = pl.concat([extra, _pair_columns(groups, preset.pairs, keys)], how="horizontal")
    keep = [c for c in groups.columns if c in ("inner", _partial_group(preset))]
    inner_rows = pl.concat([matched.select("line"), groups.select(keep), extra], how="horizontal")
    inner_rows = inner_rows.rename({"inner": "text"})
    inner_rows = inner_rows.with_columns(pl.col("text").fill_null(""))
    return inner_rows, other


def _pair_columns(groups: pl.DataFrame, names: tuple[str, ...], keys: Collection[str] | None) -> pl.DataFrame:
    """One `envelope.pairs.<key>` column per key of the `key="value"` pairs in these groups."""
    frame = groups.select(pl.int_range(pl.len()).alias(LINE), *(g for g in names if g in groups.columns))
    spread = with_pairs(frame, names, keys).drop(LINE, *(g for g in names if g in groups.columns))
    return spread.rename({c: PAIRS_PREFIX + c for c in spread.columns})


def _partial_group(preset: Preset) -> str | None:
    if preset.join_partial and "=" in preset.join_partial:
        return preset.join_partial.split("=", 1)[0]
    return None


def partial_flag(preset: Preset) -> pl.Expr | None:
    """Which inner rows are the first parts of a longer line (joined with what follows)."""
    if preset.join_partial == "missing_newline":
        return ~pl.col("text").str.ends_with("\n")
    group = _partial_group(preset)
    if group is not None:
        return pl.col(group) == preset.join_partial.split("=", 1)[1]
    return None


def unwrapped_frame(items: list[tuple[int, Unwrapped]]) -> pl.DataFrame:
    """Rows (line, text, fallback time, envelope columns) from records unwrapped in Python."""
    columns = sorted({k for _, u in items for k in u.envelope})
    data: dict[str, list] = {"line": [], "text": [], FALLBACK_TS: [], **{c: [] for c in columns}}
    for line, unwrapped in items:
        data["line"].append(line)
        data["text"].append(unwrapped.text)
        data[FALLBACK_TS].append(unwrapped.fallback_ts)
        for column in columns:
            data[column].append(unwrapped.envelope.get(column))
    schema = {"line": pl.Int64, **{c: pl.String for c in data if c != "line"}}
    return pl.DataFrame(data, schema=schema)

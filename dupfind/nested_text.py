"""Nested JSON values that polars' NDJSON reader wrote as text without their escapes, taken again from their lines."""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

# A key read as text whose value is an object or an array comes out of `read_ndjson` as JSON text
# whose strings are not escaped again: a backslash, a tab or another control character is
# written as it is, and so is a quote in a key (pola-rs/polars#26574; `"C:\\tmp"` becomes
# `"C:\tmp"`, `"a\\"b"` ends the string early). Such text is not the value, and a path into it
# (`payload.event_id`) finds nothing once one string of the object holds a backslash. A value
# that holds a backslash or a control character, or a quote that neither opens a string (after
# `{`, `[` or the space of `": "` and `", "`) nor closes one (before `:`, `,`, `}` or `]`), may be
# one of those; it is taken again from its line by a JSON path, whose text is escaped.
_MAY_BE_UNESCAPED = r'[\\\x00-\x1f]|[^{\[ ]"[^:,}\]]'


def _structured(column: str) -> pl.Expr:
    value = pl.col(column)
    return value.str.starts_with("{") | value.str.starts_with("[")


def _object_at(key: str) -> str:
    """A line where `key` is followed by an object or an array (a string that only looks like
    one, `"message": "{...}"`, is read as it is: only objects lose their escapes)."""
    return '"' + re.escape(key) + r'"[ \t\n\r]*:[ \t\n\r]*[\[{]'


def repaired(frame: pl.DataFrame, texts: pl.Series | Callable[[], pl.Series], payload: bytes | None = None,
             within: str = "") -> pl.DataFrame:
    """`frame`, read by `read_ndjson` from `texts` (one row a line, every column text; or what
    gives them, called only if a value needs them), with each object or array value that may
    have lost its escapes read again from its line. `payload`: the lines as read (text without
    a backslash has no escape to lose); `within`: the columns are the keys of the lines' object
    at this key (a search hit's `_source`, read as a struct)."""
    columns = [c for c, dtype in frame.schema.items() if dtype == pl.String and "'" not in c and "\\" not in c]
    if not columns or not frame.height or (payload is not None and b"\\" not in payload):
        return frame
    path = f"$['{within}']" if within else "$"
    holding = frame.select(_structured(c).any().alias(c) for c in columns).row(0)
    fixed = []
    for column in (c for c, hit in zip(columns, holding) if hit):
        rows = frame.select((_structured(column) & pl.col(column).str.contains(_MAY_BE_UNESCAPED)).arg_true()).to_series()
        if not rows.len() or (payload is not None and re.search(_object_at(column).encode(), payload) is None):
            continue
        if callable(texts):
            texts = texts()
        lines = texts.gather(rows)
        objects = lines.str.contains(_object_at(column))
        rows, lines = rows.filter(objects), lines.filter(objects)
        if rows.len():
            fixed.append(frame[column].scatter(rows, lines.str.json_path_match(f"{path}['{column}']")))
    return frame.with_columns(fixed) if fixed else frame

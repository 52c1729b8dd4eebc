"""Nested JSON values that polars' NDJSON reader wrote as text without their escapes, taken again from their lines."""

from __future__ import annotations

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


def repaired(frame: pl.DataFrame, texts: pl.Series) -> pl.DataFrame:
    """`frame`, read by `read_ndjson` from `texts` (one row a line, every column text), with each
    object or array value that may have lost its escapes read again from its line."""
    columns = [c for c, dtype in frame.schema.items() if dtype == pl.String and "'" not in c and "\\" not in c]
    if not columns or frame.height != texts.len():
        return frame
    holding = frame.select(_structured(c).any().alias(c) for c in columns).row(0)
    fixed = []
    for column in (c for c, hit in zip(columns, holding) if hit):
        rows = frame.select((_structured(column) & pl.col(column).str.contains(_MAY_BE_UNESCAPED)).arg_true()).to_series()
        if rows.len():
            again = texts.gather(rows).str.json_path_match(f"$['{column}']")
            fixed.append(frame[column].scatter(rows, again))
    return frame.with_columns(fixed) if fixed else frame

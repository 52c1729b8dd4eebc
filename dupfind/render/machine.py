"""Machine renderers: one JSON document, or one object per NDJSON line."""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def write_json(doc: Any, out: IO[bytes]) -> None:
    # The newline from orjson: `+ b"\n"` copied the whole document once more.
    out.write(orjson.dumps(doc, option=_OPTIONS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))


def write_ndjson(docs: Iterable[Any], out: IO[bytes]) -> None:
    for doc in docs:
        out.write(orjson.dumps(doc, option=_OPTIONS | orjson.OPT_APPEND_NEWLINE))


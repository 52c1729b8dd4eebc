"""Machine renderers: one JSON document, or one object per NDJSON line."""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS
_INDENTED = _OPTIONS | orjson.OPT_INDENT_2


def write_json(doc: Any, out: IO[bytes]) -> None:
    # The newline from orjson: `+ b"\n"` copied the whole document once more.
    out.write(orjson.dumps(doc, option=_INDENTED | orjson.OPT_APPEND_NEWLINE))


def write_json_items(doc: dict, key: str, items: Iterable[Any], out: IO[bytes]) -> None:
    """The bytes write_json gives for `doc` with `items` as the list of its last key (where `doc`
    holds an empty list), each item made and dumped as it is written: the document of a large
    report then never exists whole as Python objects (the findings of 5M lines: ~165 MB)."""
    if list(doc)[-1] != key or doc[key] != []:
        raise ValueError(f"{key!r} must be the document's last key, holding an empty list")
    head = orjson.dumps(doc, option=_INDENTED)
    empty = b"[]\n}"  # how orjson ends the document: the last key's empty list at indent level 1
    separator, written = head[:-len(empty)] + b"[\n    ", False
    for item in items:
        # An item of the list sits two levels deep: each of its lines indented by four more
        # spaces. JSON text holds no raw newline but those orjson puts between lines.
        out.write(separator + orjson.dumps(item, option=_INDENTED).replace(b"\n", b"\n    "))
        separator, written = b",\n    ", True
    out.write(b"\n  ]\n}\n" if written else head + b"\n")


def write_ndjson(docs: Iterable[Any], out: IO[bytes]) -> None:
    for doc in docs:
        out.write(orjson.dumps(doc, option=_OPTIONS | orjson.OPT_APPEND_NEWLINE))

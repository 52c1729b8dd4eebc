"""Machine renderers: one JSON document, or one object per NDJSON line."""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS
_INDENTED = _OPTIONS | orjson.OPT_INDENT_2


class JSONText:
    """A value of a document given as the JSON text orjson would write for it at its place (its
    lines indented for that depth): written as it is, decoded only when the document is walked
    (redaction). Rendered once, a part of a report can then be stored and given again."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def value(self) -> Any:
        return orjson.loads(self.data)

    def __repr__(self) -> str:
        return f"JSONText({len(self.data)} bytes)"


def _as_written(value: Any) -> orjson.Fragment:
    if type(value) is JSONText:
        return orjson.Fragment(value.data)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def indented_json(value: Any, depth: int) -> bytes:
    """`value` as write_json writes it `depth` levels deep in a document: each of its lines
    indented by two more spaces a level (JSON text holds no raw newline but those orjson puts
    between lines)."""
    data = orjson.dumps(value, option=_INDENTED, default=_as_written)
    return data.replace(b"\n", b"\n" + b"  " * depth) if depth else data


def write_json(doc: Any, out: IO[bytes]) -> None:
    # The newline from orjson: `+ b"\n"` copied the whole document once more.
    out.write(orjson.dumps(doc, option=_INDENTED | orjson.OPT_APPEND_NEWLINE, default=_as_written))


def write_json_items(doc: dict, key: str, items: Iterable[Any], out: IO[bytes]) -> None:
    """The bytes write_json gives for `doc` with `items` as the list of its last key (where `doc`
    holds an empty list), each item made and dumped as it is written: the document of a large
    report then never exists whole as Python objects (the findings of 5M lines: ~165 MB)."""
    if list(doc)[-1] != key or doc[key] != []:
        raise ValueError(f"{key!r} must be the document's last key, holding an empty list")
    head = orjson.dumps(doc, option=_INDENTED, default=_as_written)
    empty = b"[]\n}"  # how orjson ends the document: the last key's empty list at indent level 1
    separator, written = head[:-len(empty)] + b"[\n    ", False
    for item in items:
        # An item of the list sits two levels deep.
        out.write(separator + indented_json(item, 2))
        separator, written = b",\n    ", True
    out.write(b"\n  ]\n}\n" if written else head + b"\n")


def write_ndjson(docs: Iterable[Any], out: IO[bytes]) -> None:
    for doc in docs:
        out.write(orjson.dumps(doc, option=_OPTIONS | orjson.OPT_APPEND_NEWLINE))

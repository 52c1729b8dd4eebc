"""JSON values written back to back, or a top-level array's elements, cut out a block at a time."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_JSON_SPACE = rb"[ \t\n\r]*"  # JSON's whitespace (not every \s)
_SPACE = re.compile(_JSON_SPACE)
_ARRAY_OPEN = re.compile(_JSON_SPACE + rb"\[")
_COMMA = re.compile(_JSON_SPACE + rb"," + _JSON_SPACE)
_ARRAY_CLOSE = re.compile(_JSON_SPACE + rb"\]" + _JSON_SPACE + rb"\Z")
# Where one object may end and the next begin (back to back; in an array, a comma between); inside
# a string too, so each cut is tried.
_OBJECT_CUT = re.compile(rb"\}" + _JSON_SPACE + rb"\{")
_ELEMENT_CUT = re.compile(rb"\}" + _JSON_SPACE + rb"," + _JSON_SPACE + rb"\{")
# Cuts tried in a row inside one value (`}{` in its strings) before its end is found by decoding.
_MAX_MISSED_CUTS = 64
_DECODER = json.JSONDecoder()


class ValueCutter:
    """JSON values written one after the other with nothing or only whitespace between them (the
    objects Kinesis Data Firehose writes to S3: CloudWatch Logs subscription messages back to
    back), or the elements of one top-level array (`in_array`: `gcloud logging read
    --format=json`), cut out of data that arrives a block at a time. `feed` gives the values whole
    so far, `finish` the last ones and what follows them that is not JSON; only the value being
    cut is held between blocks, so a file of any size is read in about a block's memory.

    Objects are cut where `}` meets `{` (in an array, `},{`) and each piece parsed by orjson: a
    piece that parses is a whole value (an object ends where its closing brace is), one that does
    not was cut inside a string or a nested value and goes on to the next cut; many such, or
    values that are not objects, are found by the standard library's decoder and parsed by orjson,
    as strictly as any document."""

    def __init__(self, in_array: bool = False) -> None:
        self.in_array = in_array
        self.opened = not in_array  # the array's `[` is behind
        self.carry = b""  # the start of a value not whole yet

    def feed(self, block: bytes) -> list:
        data = self.carry + block if self.carry else block
        values, end = self._cut(data, final=False)
        self.carry = data[end:]
        return values

    def finish(self) -> tuple[list, bytes]:
        """The values left, and what follows them that is not JSON values (b"" if nothing)."""
        data, self.carry = self.carry, b""
        values, end = self._cut(data, final=True)
        return values, data[end:]

    def _cut(self, data: bytes, final: bool) -> tuple[list, int]:
        begin = 0
        if not self.opened:
            opening = _ARRAY_OPEN.match(data)
            if opening is None:
                return [], 0
            begin, self.opened = opening.end(), True
        return _cut(data, begin, self.in_array, final)


def concatenated_values(data: bytes) -> list | None:
    """The JSON values written back to back in data, as a list; None unless there are several and
    all of data is such values."""
    values, end = _cut(data, 0, False, final=True)
    return values if end == len(data) and len(values) > 1 else None


def _cut(data: bytes, begin: int, in_array: bool, final: bool) -> tuple[list, int]:
    """The values whole in data from `begin` and where what is left begins (`final`: data ends
    there, and what is left is not JSON values)."""
    values: list = []
    view = memoryview(data)
    begin = _SPACE.match(data, begin).end()
    missed = 0
    for cut in (_ELEMENT_CUT if in_array else _OBJECT_CUT).finditer(data, begin):
        if cut.start() < begin:  # inside a value the decoder found
            continue
        try:
            values.append(orjson.loads(view[begin:cut.start() + 1]))
        except orjson.JSONDecodeError:
            missed += 1
            if missed <= _MAX_MISSED_CUTS:
                continue
            found = _decoded(data, begin, in_array, final)
            if found is None:  # more data may make it whole, or it is not JSON
                return values, begin
            values.append(found[0])
            begin, missed = found[1], 0
            continue
        begin, missed = cut.end() - 1, 0
    if not final:
        return values, begin
    last = _ARRAY_CLOSE.search(data, begin) if in_array else None
    end = last.start() if last else len(data)
    try:  # what is left is one value (in an array, followed by its `]`)
        if last or not in_array:
            values.append(orjson.loads(view[begin:end]))
            return values, len(data)
    except orjson.JSONDecodeError:
        pass
    while begin < end:
        found = _decoded(data, begin, in_array, final)
        if found is None:
            break
        values.append(found[0])
        begin = found[1]
    return values, (len(data) if begin >= end and (last or not in_array) else begin)


def _decoded(data: bytes, begin: int, in_array: bool, final: bool) -> tuple[Any, int] | None:
    """The value that begins at `begin` and where the next begins, its end found by the standard
    library's decoder (any JSON value, any string), its bytes parsed by orjson; None if no whole
    value and separator are there (an array's `]` only where data ends, `final`)."""
    text = data[begin:].decode("utf-8", errors="surrogateescape")  # a block may end inside a character
    try:
        _, end = _DECODER.raw_decode(text)
        end = begin + len(text[:end].encode("utf-8", errors="surrogateescape"))
        value = orjson.loads(memoryview(data)[begin:end])
    except (ValueError, RecursionError):  # orjson.JSONDecodeError is a ValueError
        return None
    if not in_array:
        return value, _SPACE.match(data, end).end()
    comma = _COMMA.match(data, end)
    if comma:
        return value, comma.end()
    return (value, len(data)) if final and _ARRAY_CLOSE.match(data, end) else None

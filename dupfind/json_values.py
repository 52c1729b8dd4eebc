"""JSON values back to back, an array's elements, or a document's array of records, cut out a block at a time."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import orjson

from dupfind import json_exact

_JSON_SPACE = rb"[ \t\n\r]*"  # JSON's whitespace (not every \s)
_SPACE = re.compile(_JSON_SPACE)
_TEXT_SPACE = re.compile(_JSON_SPACE.decode())
_ARRAY_OPEN = re.compile(_JSON_SPACE + rb"\[")
_COMMA = re.compile(_JSON_SPACE + rb"," + _JSON_SPACE)
_ARRAY_CLOSE = re.compile(_JSON_SPACE + rb"\]")
# Where one object may end and the next begin (back to back; in an array, a comma between): the
# next begins with a key or ends at once. Inside a string too, so each cut is tried; a string
# holding JSON (a log line in `message`) escapes its quotes, so its `},{\"` is not a cut.
_OBJECT_CUT, _ELEMENT_CUT, _ANY_CUT = (
    re.compile(rb"\}" + _JSON_SPACE + between + _JSON_SPACE + rb"\{(?=" + _JSON_SPACE + rb'["}])') for between in (b"", b",", b",?")
)
# Cuts tried in a row inside one value (`}{` in its strings) before its end is found by decoding.
_MAX_MISSED_CUTS = 64
_DECODER = json.JSONDecoder()


class NotJson(NamedTuple):
    """A value whose end the decoder found that is not JSON (not UTF-8, a lone surrogate, NaN)."""

    data: bytes


class ValueCutter:
    """JSON values written one after the other with nothing or only whitespace between them (the
    objects Kinesis Data Firehose writes to S3: CloudWatch Logs subscription messages back to
    back), or the elements of an array (`in_array`: `gcloud logging read --format=json`; or the
    array of records inside a document, `within`), cut out of data that arrives a block at a time.
    `feed` gives the values whole so far, `finish` the last ones and what follows them that is
    not JSON; only the value being cut is held between blocks, so a file of any size is read in
    about a block's memory.

    Objects are cut where `}` meets `{` (in an array, `},{`) and each piece parsed by orjson: a
    piece that parses is a whole value (an object ends where its closing brace is), one that does
    not was cut inside a string or a nested value and goes on to the next cut; many such, or
    values that are not objects, are found by the standard library's decoder and parsed by orjson,
    as strictly as any document: a value it finds that orjson does not take is a NotJson in its
    place, and the values after it are read."""

    def __init__(self, in_array: bool = False, within: ArrayWithin | None = None) -> None:
        self.in_array = in_array or within is not None
        self.within = within
        self.opened = not self.in_array  # the array's `[` is behind
        self.carry = b""  # the start of a value not whole yet
        self._taken = 0  # how much of carry the elements given by `elements` hold
        self.separator: bytes | None = None  # from one element's `}` to the next one's `{`
        # What follows the document around `within` once its end was cut (more JSON values: the
        # pages of a search appended to one file); nothing more is cut here then.
        self.after: bytes | None = None

    def feed(self, block: bytes) -> list:
        data = self.carry + block if self.carry else block
        values, end = self._cut(data, final=False)
        if self.within is not None:
            ended = self._document_end(data, end)
            if ended is not None:
                values += ended[0]
                self.after, self.carry = data[ended[1]:], b""
                return values
        self.carry = data[end:]
        return values

    def _document_end(self, data: bytes, begin: int) -> tuple[list, int] | None:
        """The array's last elements from `begin` and where the document around it ends, when
        data holds that end and something other than whitespace after it; else None."""
        if data.find(b"]", begin) < 0:
            return None
        decoding, last, at = _Decoding(data, True, True), [], begin
        while (found := decoding.value_at(at)) is not None:
            last.append(found[0])
            at = found[1]
        at = _SPACE.match(data, at).end()
        if not data.startswith(b"]", at):
            return None
        prefix = self.within.prefix.decode("utf-8", errors="surrogateescape") + "[]"
        tail = data[at + 1:].decode("utf-8", errors="surrogateescape")
        try:
            _, stop = _DECODER.raw_decode(prefix + tail)
        except (ValueError, RecursionError):  # not whole yet, or not JSON (finish says which)
            return None
        end = at + 1 + len(tail[:stop - len(prefix)].encode("utf-8", errors="surrogateescape"))
        return (last, end) if _SPACE.match(data, end).end() < len(data) else None

    def elements(self, block: bytes) -> bytes:
        """Adds block; the elements whole so far as written, to the last cut, unchecked (the cut
        may lie inside a string or a nested array: element_lines makes lines of them, which polars
        then refuses). `take` consumes them; else `feed(b"")` cuts and parses what is held, as
        always. Once two elements were cut apart, the bytes between them are the cut if they hold
        a line break (lines_apart)."""
        self.carry = data = self.carry + block if self.carry else block
        self._taken = 0
        if not self.in_array or not self.opened:
            return b""
        begin = _SPACE.match(data).end()
        if self.lines_apart:
            end = data.rfind(self.separator, begin)
            if end < 0:
                return b""
            self._taken = end + len(self.separator) - 1
            return data[begin:end + 1]
        window = 1 << 16  # the last cut is looked for near the end first
        while True:
            start, last = max(begin, len(data) - window), None
            for last in _ELEMENT_CUT.finditer(data, start):
                pass
            if last is not None:
                self._taken = last.end() - 1
                return data[begin:last.start() + 1]
            if start == begin:
                return b""
            window *= 4

    @property
    def lines_apart(self) -> bool:
        """Whether the bytes between two elements are known and hold a line break (no string
        holds one: they are nowhere else in an indented array, whose nested arrays are indented
        deeper; `}, {` may be in a string)."""
        return holds_break(self.separator)

    def take(self) -> None:
        """Consumes the elements `elements` gave."""
        self.carry = self.carry[self._taken:]
        self._taken = 0

    def finish(self) -> tuple[list, bytes]:
        """The values left, and what follows them that is not JSON (b"" if nothing): in an array,
        what follows its last element must close it and the document around it."""
        data, self.carry = self.carry, b""
        values, end = self._cut(data, final=True)
        rest = data[end:]
        if self.in_array and _closes(self.within.prefix if self.within else b"", rest):
            return values, b""
        return values, rest

    def document(self, values: list) -> Any:
        """Values cut out of an array within a document, put back where they were in it (with
        what was before the array)."""
        return values if self.within is None else self.within.holding(values)

    def _cut(self, data: bytes, final: bool) -> tuple[list, int]:
        begin = 0
        if not self.opened:
            opening = _ARRAY_OPEN.match(data)
            if opening is None:
                return [], 0
            begin, self.opened = opening.end(), True
        if self.separator is not None or not self.in_array:
            return _cut(data, begin, self.in_array, final)
        separators: list[bytes] = []
        cut = _cut(data, begin, self.in_array, final, separators)
        self.separator = separators[0] if separators else None
        return cut


def holds_break(separator: bytes | None) -> bool:
    return separator is not None and (b"\n" in separator or b"\r" in separator)


# A line break in JSON text is whitespace, or a character no string may hold: as a tab it is
# whitespace still, and still refused inside a string (an NDJSON line holds no line break).
_BREAKS_AS_TABS = bytes.maketrans(b"\n\r", b"\t\t")


def element_lines(data: bytes, separator: bytes | None = None) -> tuple[bytes, int | None]:
    """Array elements written one after the other with a comma between (compact or indented):
    one element a line (NDJSON), and how many lines (None: not counted, one more than the
    separators); cut at `separator`, the bytes between two of them if it holds a line break
    (ValueCutter.lines_apart), else where `},{` begins an object with a key, as ValueCutter cuts
    them (inside a string or a nested array too: that line is then not JSON)."""
    data = data.translate(_BREAKS_AS_TABS)
    if holds_break(separator):  # replaced in place
        between = separator.translate(_BREAKS_AS_TABS)
        return data.replace(between, b"}\n" + b" " * (len(between) - 3) + b"{"), None
    lines, cuts = _ELEMENT_CUT.subn(b"}\n{", data)
    return lines, cuts + 1


class ArrayWithin:
    """Where a document's array of records begins, in its first block (a document of any size
    whose records are one array, as `aws logs filter-log-events` writes them under `events`)."""

    def __init__(self, prefix: bytes, path: list[str]) -> None:
        self.prefix = prefix  # the document up to the array's `[`
        self.path = path  # the keys down to the array
        self.skeleton = orjson.loads(prefix + b"[]" + b"}" * len(path))

    def holding(self, values: list) -> Any:
        node = self.skeleton
        for key in self.path[:-1]:
            node = node[key]
        node[self.path[-1]] = values
        return self.skeleton


def _closes(prefix: bytes, rest: bytes) -> bool:
    """Whether what follows an array's last element (its `]`, the rest of the document) closes
    the document that `prefix` began, into valid JSON."""
    if not _ARRAY_CLOSE.match(rest):
        return False
    try:
        orjson.loads(prefix + b"[" + rest)
    except orjson.JSONDecodeError:
        return False
    return True


def array_within(data: bytes) -> ArrayWithin | None:
    """The array of objects a JSON object starting data is cut off in at data's end (in an object
    value cut off too, any number deep), with the whole values before it; else the first array of
    objects among its keys (data may be the whole of a document that is not JSON); None if none."""
    text = data.decode("utf-8", errors="surrogateescape")  # a block may end inside a character
    at = _TEXT_SPACE.match(text).end()
    if not text.startswith("{", at):
        return None
    path: list[str] = []
    first: tuple[int, list[str]] | None = None  # the first whole array of objects
    at += 1
    while True:
        at = _TEXT_SPACE.match(text, at).end()
        try:
            key, at = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            break
        at = _TEXT_SPACE.match(text, at).end()
        if not isinstance(key, str) or not text.startswith(":", at):
            break
        at = _TEXT_SPACE.match(text, at + 1).end()
        objects = text.startswith("[", at) and text.startswith("{", _TEXT_SPACE.match(text, at + 1).end())
        try:
            _, end = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):  # cut off here (or not JSON)
            if text.startswith("{", at):
                path.append(key)
                at += 1
                continue
            if objects:
                return _array_at(text, at, [*path, key])
            break
        if objects and first is None:
            first = (at, [*path, key])
        at = _TEXT_SPACE.match(text, end).end()
        if not text.startswith(",", at):
            break  # the object ends in data: no array is cut off in it
        at += 1
    return _array_at(text, *first) if first else None


def _array_at(text: str, at: int, path: list[str]) -> ArrayWithin | None:
    try:
        return ArrayWithin(text[:at].encode("utf-8", errors="surrogateescape"), path)
    except orjson.JSONDecodeError:
        return None


def objects_cut(data: bytes) -> int:
    """How many places in data an object may end and the next begin (back to back or in an array):
    about how many records a sample of a JSON document holds."""
    return len(_ANY_CUT.findall(data))


def concatenated_values(data: bytes) -> list | None:
    """The JSON values written back to back in data, as a list; None unless there are several and
    all of data is such values."""
    values, end = _cut(data, 0, False, final=True)
    whole = end == len(data) and not any(isinstance(value, NotJson) for value in values)
    return values if whole and len(values) > 1 else None


def _cut(data: bytes, begin: int, in_array: bool, final: bool, separators: list | None = None) -> tuple[list, int]:
    """The values whole in data from `begin` and where what is left begins (`final`: data ends
    there, and what is left is not JSON values); `separators` gets the bytes of the first cut
    found between two whole values."""
    values: list = []
    view = memoryview(data)
    begin = _SPACE.match(data, begin).end()
    missed = 0
    decoding = _Decoding(data, in_array, final)
    cuts = _ELEMENT_CUT if in_array else _OBJECT_CUT
    at = begin
    load = json_exact.loader(data)
    while (cut := cuts.search(data, at)) is not None:
        at = cut.start() + 1
        try:
            values.append(load(view[begin:cut.start() + 1]))
        except orjson.JSONDecodeError:
            missed += 1
            if missed <= _MAX_MISSED_CUTS:
                continue
            found = decoding.value_at(begin)
            if found is None:  # more data may make it whole, or it is not JSON
                return values, begin
            values.append(found[0])
            begin = at = found[1]  # the cuts after it are tried again from the next value
            missed = 0
            continue
        if separators is not None and not separators:
            separators.append(cut.group(0))
        begin, missed = cut.end() - 1, 0
    if not final:
        return values, begin
    if not in_array:
        try:  # what is left is one value
            values.append(load(view[begin:]))
            return values, len(data)
        except orjson.JSONDecodeError:
            pass
    while begin < len(data):
        found = decoding.value_at(begin)
        if found is None:  # not JSON, or an array's `]`
            break
        values.append(found[0])
        begin = found[1]
    return values, begin


class _Decoding:
    """Values' ends found by the standard library's decoder (any JSON value, any string), each
    value's bytes parsed by orjson, as strictly as any document (NotJson where they are not). The
    data is decoded to text once, where first needed, and positions are followed forward (values
    are looked for in order)."""

    def __init__(self, data: bytes, in_array: bool, final: bool) -> None:
        self.data, self.in_array, self.final = data, in_array, final
        self.text: str | None = None
        self.byte = self.char = 0  # a position in data and the same in text

    def _char_at(self, byte: int) -> int:
        if self.text is None:  # a block may end inside a character: kept as it is
            self.text = self.data[byte:].decode("utf-8", errors="surrogateescape")
            self.byte = byte
        self.char += len(self.data[self.byte:byte].decode("utf-8", errors="surrogateescape"))
        self.byte = byte
        return self.char

    def value_at(self, begin: int) -> tuple[Any, int] | None:
        """The value that begins at `begin` and where the next begins; None if no whole value and
        separator are there (after an array's last element, `final`: its `]`)."""
        data = self.data
        try:
            start = self._char_at(begin)
            _, stop = _DECODER.raw_decode(self.text, start)
        except (ValueError, RecursionError):
            return None
        end = begin + len(self.text[start:stop].encode("utf-8", errors="surrogateescape"))
        try:
            value = json_exact.loads(memoryview(data)[begin:end])
        except orjson.JSONDecodeError:
            value = NotJson(data[begin:end])
        if not self.in_array:
            return value, _SPACE.match(data, end).end()
        comma = _COMMA.match(data, end)
        if comma:
            return value, comma.end()
        close = _ARRAY_CLOSE.match(data, end)
        return (value, close.end() - 1) if self.final and close else None

"""JSON parsed by orjson, integers beyond 64 bits kept exact (orjson makes them floats: two ids of
24 digits that differ in their last digits would become one)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

import orjson

# A number of 20 digits or more (19 when negative) where a value starts: not in a string, which its
# quote begins. 2^64 has 20 digits; a shorter integer orjson keeps exact.
_LONG_NUMBER = r"[:\[,]\s*(?:-\d{19}|\d{20})"
_LONG_NUMBER_BYTES = re.compile(_LONG_NUMBER.encode())
_LONG_NUMBER_TEXT = re.compile(_LONG_NUMBER)
# Digits as "0", the rest as " ": a run of 19 digits is a substring search, at memory speed (the
# regular expression alone reads about 100 MB/s, a large document's time again).
_DIGITS = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_DIGIT_RUN = b"0" * 19


def has_long_number(data: bytes | bytearray | memoryview | str) -> bool:
    """Whether data holds a number too long for 64 bits (or maybe one: a string of such digits
    after `:` and spaces inside a string). Checked once for a block of values, not for each."""
    if isinstance(data, str):
        return _LONG_NUMBER_TEXT.search(data) is not None
    data = bytes(data) if isinstance(data, memoryview) else data
    return _DIGIT_RUN in data.translate(_DIGITS) and _LONG_NUMBER_BYTES.search(data) is not None


def loads(data: bytes | bytearray | memoryview | str, checked: bool = False) -> Any:
    """orjson.loads(data) (raising as it does), with the standard library's exact integers where
    the document holds a number too long for 64 bits (`checked`: the caller found that data's
    block holds one, has_long_number)."""
    value = orjson.loads(data)
    if not (checked or has_long_number(data)):
        return value
    try:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)
    except (ValueError, RecursionError):  # beyond what the standard library reads (nesting)
        return value


def loader(data: bytes | bytearray | memoryview | str) -> Callable[[Any], Any]:
    """What parses the values cut from `data` (a block of them): orjson.loads when data holds no
    number too long for 64 bits (the check made once), else loads."""
    return functools.partial(loads, checked=True) if has_long_number(data) else orjson.loads


def dumps(value: Any) -> bytes:
    """orjson.dumps(value), compact; the standard library's writing where it holds an integer
    beyond 64 bits (which orjson refuses)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

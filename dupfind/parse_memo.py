"""Parsed TOML files and the regular expressions they hold, kept in the cache between commands by their text."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import zlib
from pathlib import Path
from typing import Any

import orjson

from dupfind.atomic_files import write_atomic

# A TOML file's parse, and whether a regular expression compiles, depend only on their text and the
# Python that reads them: an entry is keyed by both, so it cannot go stale. Entries sit in the
# cache's two-letter shards (`<key[:2]>/<key>.parsed`), pruned with them when unused for long.
MEMO_FORMAT = "parsed-toml/1"
MEMO_SUFFIX = ".parsed"

_enabled = [False]  # set by the command line from --no-cache (use_cache); API callers parse every time
_valid: set[str] = set()  # patterns known to compile: by this process, or by the run that wrote an entry
# Parses of this process not yet kept: (key, the data's JSON as parsed, its strings).
_pending: list[tuple[str, bytes, list[str]]] = []


class TomlError(ValueError):
    """Text that is not valid TOML (tomllib's message; tomllib itself is imported only to parse)."""


def use_cache(on: bool) -> None:
    """Whether this command keeps and reuses parses in the cache directory (`--no-cache`: neither)."""
    _enabled[0] = on


def toml_text(text: str) -> dict[str, Any]:
    """`tomllib.loads(text)`, or the same data as a parse of the same text kept earlier; TomlError
    with tomllib's message when it is not TOML. A fresh object each call: callers may change it."""
    if not _enabled[0]:
        return _parse(text)
    key = _key(text)
    kept = _read(key)
    if kept is not None:
        data, valid = kept
        _valid.update(valid)
        return data
    data = _parse(text)
    try:
        body = orjson.dumps(data)
        exact = orjson.loads(body) == data  # dates, times, inf and nan do not come back the same
    except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits
        exact = False
    if exact:
        _pending.append((key, body, _strings(data)))
    return data


def check_regex(pattern: str) -> None:
    """Raise re.error when `pattern` does not compile; a pattern known to compile is not compiled again."""
    if pattern not in _valid:
        re.compile(pattern)
        _valid.add(pattern)


def flush() -> None:
    """Keep the parses made since the last flush, each with those of its strings found to be valid
    regular expressions by then (the caller has checked the patterns of what it loaded)."""
    pending, _pending[:] = list(_pending), []
    if not _enabled[0] or not pending:
        return
    root = _root()
    if root is None:
        return
    for key, body, strings in pending:
        valid = [s for s in strings if s in _valid]
        payload = b'{"data":' + body + b',"valid":' + orjson.dumps(valid) + b"}"
        path = _path(root, key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, b"%s %08x\n" % (key.encode(), zlib.crc32(payload)), payload)
        except OSError:
            return  # a read-only or full cache directory only means parsing again next time


def _parse(text: str) -> dict[str, Any]:
    import tomllib  # its own regular expressions cost 2-3 ms to compile: only when a file is parsed

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlError(str(exc)) from None


def _key(text: str) -> str:
    return hashlib.sha256(f"{MEMO_FORMAT}\0{sys.version}\0{text}".encode()).hexdigest()[:32]


def _root() -> Path | None:
    from dupfind.cache import default_cache_dir

    try:
        return default_cache_dir()
    except RuntimeError:  # no home directory to hold it
        return None


def _path(root: Path, key: str) -> str:
    return os.path.join(root, key[:2], f"{key}{MEMO_SUFFIX}")


def _read(key: str) -> tuple[dict[str, Any], list[str]] | None:
    """The kept parse of the text with this key and its valid patterns; None when there is none,
    or when it is damaged (then it is removed, and written anew)."""
    root = _root()
    if root is None:
        return None
    path = _path(root, key)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    try:
        end = raw.index(b"\n")
        name, check = raw[:end].split(b" ")
        payload = memoryview(raw)[end + 1:]
        if name.decode() != key or int(check, 16) != zlib.crc32(payload):
            raise ValueError("another entry, or damaged")
        kept = orjson.loads(payload)
        data, valid = kept["data"], kept["valid"]
        if not isinstance(data, dict) or not isinstance(valid, list) or not all(isinstance(v, str) for v in valid):
            raise ValueError("not a kept parse")
    except (ValueError, TypeError, KeyError):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: pruned only when unused for long
    return data, valid


def _strings(value: Any) -> list[str]:
    """Every string value in parsed TOML data (the patterns among them are checked by the caller)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found

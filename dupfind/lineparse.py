"""Fallback line parsers: logfmt, and plain text with a leading timestamp."""

from __future__ import annotations

import re

# A leading timestamp as written by loggers and in incident notes, optionally bracketed:
# `2026-07-21T10:00:01.120Z ...`, `2026-11-29 07:16:09,727 ...`, `[2026-11-29 07:16:09,727: ...`.
LEADING_TS = re.compile(
    r"^\[?(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?"
    r"(?:\s?(?:Z|z|UTC|[+-]\d{2}:?\d{2}))?)\]?[:\s|]\s*"
)
# A level word right after the leading time (`2026-.. ERROR [mailer] ..`, logback's `  WARN 1 ---`).
LEADING_LEVEL = re.compile(
    r"\s*\[?(?P<level>TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|CRIT|FATAL|SEVERE|PANIC)\]?(?=[\s:]|$)", re.IGNORECASE,
)
LOGFMT_PAIR = re.compile(r'(?:^|(?<=\s))([A-Za-z_@][\w.\-/@]*)=("(?:[^"\\]|\\.)*"|\S*)')
_ESCAPES = re.compile(r"\\(.)")
_ESCAPE_MAP = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return _ESCAPES.sub(lambda m: _ESCAPE_MAP.get(m.group(1), m.group(1)), value[1:-1])
    return value


def parse_logfmt(text: str) -> dict[str, str] | None:
    """key=value pairs (quoted values may hold spaces) with an optional leading timestamp.

    Returns None when the line is not logfmt: fewer than two pairs, unless the single pair
    is all there is after the timestamp.
    """
    rest = text
    leading = LEADING_TS.match(text)
    record: dict[str, str] = {}
    if leading:
        record["_leading_ts"] = leading.group("ts")
        rest = text[leading.end():]
        level = LEADING_LEVEL.match(rest)
        if level:
            record["_leading_level"] = level.group("level")
    pairs = LOGFMT_PAIR.findall(rest)
    if not pairs:
        return None
    if len(pairs) < 2:
        key, value = pairs[0]
        if rest.strip() != f"{key}={value}":
            return None
    for key, value in pairs:
        record.setdefault(key, _unquote(value))
    return record


def parse_plain(text: str) -> dict[str, str] | None:
    """A free-text line with a leading timestamp: kept as message, kind `other`."""
    leading = LEADING_TS.match(text)
    if not leading:
        return None
    record = {"_leading_ts": leading.group("ts"), "_plain_message": text[leading.end():].strip()}
    level = LEADING_LEVEL.match(text, leading.end())
    if level:
        record["_leading_level"] = level.group("level")
    return record

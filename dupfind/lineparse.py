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
# AWS Lambda's runtimes before the application's line: Python's `[INFO]\t<time>\t<request id>\t`,
# Node's `<time>\t<request id>\tINFO\t`, and the runtime's own `<time> <request id> Task timed out
# after 30.03 seconds`. The request id names the invocation (AWS_REQUEST_ID below).
_ISO_Z = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
LAMBDA_PREFIX = re.compile(
    rf"^(?:\[(?P<level>[A-Z]+)\]\t(?P<ts>{_ISO_Z})\t(?P<rid>{_UUID})\t"
    rf"|(?P<ts2>{_ISO_Z})[\t ](?P<rid2>{_UUID})[\t ](?:(?P<level2>[A-Z]+)\t)?)"
)
AWS_REQUEST_ID = "aws_request_id"
# A level in brackets opening a line without a time (Lambda's `[ERROR] KeyError: ...`).
BRACKETED_LEVEL = re.compile(r"^\[(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\]\s")
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
    record: dict[str, str] = {}
    leading = LEADING_TS.match(text)
    lambda_prefix = LAMBDA_PREFIX.match(text)
    if lambda_prefix:
        record.update(_lambda_fields(lambda_prefix))
        rest = text[lambda_prefix.end():]
    elif leading:
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


def _lambda_fields(found: re.Match) -> dict[str, str]:
    """The time, request id and level a Lambda runtime's prefix gives (LAMBDA_PREFIX)."""
    fields = {"_leading_ts": found.group("ts") or found.group("ts2"), AWS_REQUEST_ID: found.group("rid") or found.group("rid2")}
    level = found.group("level") or found.group("level2")
    if level:
        fields["_leading_level"] = level
    return fields


def parse_plain(text: str) -> dict[str, str] | None:
    """A free-text line with a leading timestamp: kept as message, kind `other`."""
    lambda_prefix = LAMBDA_PREFIX.match(text)
    if lambda_prefix:
        # Its text is the record's name too, as a JSON record's lone `msg` is: the runtime's `Task
        # timed out after 30.00 seconds` says the invocation was stopped (vocabulary patterns).
        message = text[lambda_prefix.end():].strip()
        return {**_lambda_fields(lambda_prefix), "msg": message, "_plain_message": message}
    leading = LEADING_TS.match(text)
    if not leading:
        return None
    record = {"_leading_ts": leading.group("ts"), "_plain_message": text[leading.end():].strip()}
    level = LEADING_LEVEL.match(text, leading.end())
    if level:
        record["_leading_level"] = level.group("level")
    return record

"""Fallback line parsers: logfmt, and plain text with a leading timestamp."""

from __future__ import annotations

import re
from collections.abc import Collection

import polars as pl

# A leading timestamp as written by loggers and in incident notes, optionally bracketed:
# `2026-07-21T10:00:01.120Z ...`, `2026-11-29 07:16:09,727 ...`, `[2026-11-29 07:16:09,727: ...`.
LEADING_TS = re.compile(
    r"^\[?(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?"
    r"(?:\s?(?:Z|z|UTC|[+-]\d{2}:?\d{2}))?)\]?[:\s|]\s*"
)
# A level word right after the leading time (`2026-.. ERROR [mailer] ..`, logback's `  WARN 1 ---`).
LEVEL_WORDS = "TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|CRIT|FATAL|SEVERE|PANIC"
LEADING_LEVEL = re.compile(rf"\s*\[?(?P<level>{LEVEL_WORDS})\]?(?=[\s:]|$)", re.IGNORECASE)
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
LEVEL_FIELD = "_leading_level"  # a line's level word after its leading time, or in brackets (normalize, crashes)
PLAIN_NAME = "_plain_name"  # what names a free-text line's kind: its text after the time and level word (normalize)
# The runtime's lines around each invocation, without a time of their own: `START RequestId: <id>
# Version: 14`, `END RequestId: <id>`, `REPORT RequestId: <id>\tDuration: ...`. Their request id
# bounds the invocation on its log stream (an uncaught exception's event between them has none).
LAMBDA_INVOCATION_LINE = re.compile(rf"^(?:START|END|REPORT) RequestId: (?P<rid>{_UUID})(?=\s|$)")
# A level in brackets opening a line without a time (Lambda's `[ERROR] KeyError: ...`).
BRACKETED_LEVEL = re.compile(r"^\[(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\]\s")
# A `key=value` pair in a group of pairs, as a polars pattern: after the group's start, a space, a
# comma or a span's `{`; the value quoted (Rust's Debug of a string, escapes inside; Python's repr
# of one with a space, as structlog's console prints it: `error='Connection reset by peer'`) or up
# to a space, comma or `}`.
PAIR_PATTERN = r'(?:^|[\s{,])[A-Za-z_][\w.]*=(?:"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^\s,}]*)'
_LOGFMT_KEY = r"[A-Za-z_@][\w.\-/@]*"
_LOGFMT_VALUE = r'"(?:[^"\\]|\\.)*"|\S*'  # quoted (escapes inside), or up to a space
LOGFMT_PAIR = re.compile(rf"(?:^|(?<=\s))({_LOGFMT_KEY})=({_LOGFMT_VALUE})")
# What a logger puts in brackets before its message (`[notifier.tasks]`, `[pool-1]`, Rails' tags
# `[ActiveJob] [SendJob] [<job id>]`): the record's context, not what names its kind.
_BRACKETED = re.compile(r"\s*(?:\[[^\]\n]*\]\s*)+")
_WORD = re.compile(r"[A-Za-z]{2}")  # free text before a line's pairs: a word, not a `-` or `|` between fields
_ESCAPES = re.compile(r"\\(.)")
_ESCAPE_MAP = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return _ESCAPES.sub(lambda m: _ESCAPE_MAP.get(m.group(1), m.group(1)), value[1:-1])
    return value


def parse_logfmt(text: str) -> dict[str, str] | None:
    """key=value pairs (quoted values may hold spaces) with an optional leading timestamp.

    Returns None when the line is not logfmt: fewer than two pairs, unless the single pair
    is all there is after the timestamp. Words beside the pairs, after the time and level
    (`2026-... INFO Email sent order_id=ord_1 status=200`: a logger's message with its fields after
    it), are the line's text as a free-text line's are (`_plain_message`, PLAIN_NAME): they name
    its kind, not the `status=200` after them.
    """
    record, at, named_at = _line_start(text) or ({}, 0, 0)
    rest = text[at:]
    pairs = LOGFMT_PAIR.findall(rest)
    if not pairs:
        return None
    if len(pairs) < 2:
        key, value = pairs[0]
        if rest.strip() != f"{key}={value}":
            return None
    words = " ".join(LOGFMT_PAIR.sub(" ", text[named_at:]).split())
    if _WORD.search(words):
        level = LEADING_LEVEL.match(text, at) if LEVEL_FIELD in record else None
        record["_plain_message"] = text[level.end() if level else at:].strip()  # its level is a field
        record[PLAIN_NAME] = words
    for key, value in pairs:
        record.setdefault(key, _unquote(value))
    return record


# LAMBDA_PREFIX as polars reads it, the whole prefix a group (one pattern for every use: polars keeps
# 32 compiled patterns, and each pattern more past them is compiled again at each use).
_LAMBDA_TEXT = "^(" + LAMBDA_PREFIX.pattern.removeprefix("^") + ")"
# LOGFMT_PAIR as polars reads it (no look-behind): the whitespace before a pair is part of its match.
_PAIR_TEXT = rf"(?:^|\s){_LOGFMT_KEY}=(?:{_LOGFMT_VALUE})"
# What the frames below leave to the line parsers: the characters 0x1c-0x1f (whitespace to Python's
# `\s`, not to polars'), and a backslash before anything but the escapes _ESCAPE_MAP names (read
# with str.replace_many: a backslash before another character, dropped by _unquote, is rare).
_LEFT_TO_LINES = r'[\x1c-\x1f]|\\(?:[^ntr"\\]|$)'
_ESCAPED, _UNESCAPED = [f"\\{c}" for c in _ESCAPE_MAP], list(_ESCAPE_MAP.values())


def pairs_only(texts: pl.Series) -> pl.Series:
    """Which texts are logfmt pairs and nothing else (logrus' and Go's `time=... level=info
    msg="..." job_id=j-1`), none _LEFT_TO_LINES: those parse_logfmt reads as logfmt_frame does,
    all at once."""
    return (texts.str.contains(_PAIR_TEXT) & ~texts.str.contains(_LEFT_TO_LINES)
            & (texts.str.replace_all(_PAIR_TEXT, "").str.strip_chars() == ""))


def logfmt_frame(lines: pl.Series, texts: pl.Series, skip: Collection[str] = ()) -> pl.DataFrame:
    """parse_logfmt of texts pairs_only says are pairs alone, at once: a row a text, `_line` its
    line, a column a key (its first value; quotes around a value dropped), keys in `skip` left out
    (what the caller sets itself). A 300,000-line logrus log spent 2 s in parse_logfmt."""
    # Each step's columns made once (nested in one select, the split was made again for each use).
    spread = pl.DataFrame({"_line": lines, "pair": texts.str.extract_all(_PAIR_TEXT)}).explode("pair").select(
        "_line", pl.col("pair").str.strip_chars_start().str.splitn("=", 2).struct.rename_fields(["key", "value"]),
    ).unnest("pair").filter(~pl.col("key").is_in(["_line", *skip]))
    value = pl.col("value")
    quoted = value.str.starts_with('"') & value.str.ends_with('"') & (value.str.len_bytes() >= 2)
    spread = spread.with_columns(pl.when(quoted).then(
        value.str.slice(1, value.str.len_chars() - 2).str.replace_many(_ESCAPED, _UNESCAPED)
    ).otherwise(value))
    wide = spread.pivot(on="key", index="_line", values="value", aggregate_function="first", maintain_order=True)
    return pl.DataFrame({"_line": lines}).join(wide, on="_line", how="left", maintain_order="left")


# _line_start's patterns as polars reads them (no look-ahead: the character after a level word is
# matched, not kept): the leading time with what follows it, the level word, a bracketed context.
_TIME_TEXT = "^(" + LEADING_TS.pattern.removeprefix("^") + ")"
_LEVEL_TEXT = rf"^(\s*\[?(?i:{LEVEL_WORDS})\]?)(?:[\s:]|$)"
_LEVEL_WORD = rf"^\s*\[?((?i:{LEVEL_WORDS}))\]?(?:[\s:]|$)"
_CONTEXT_TEXT = "^(" + _BRACKETED.pattern + ")"


def plain_only(texts: pl.Series) -> pl.Series:
    """Which texts are free text after a leading time and nothing logfmt or Lambda reads (no `=`,
    no Lambda prefix, none of the characters 0x1c-0x1f, whitespace to Python's `\\s` but not to
    polars'): those parse_plain reads as plain_frame does, all at once."""
    return (texts.str.contains(_TIME_TEXT) & ~texts.str.contains(r"[=\x1c-\x1f]")
            & ~texts.str.contains(_LAMBDA_TEXT))


def _timed_start(lines: pl.Series, texts: pl.Series) -> pl.DataFrame:
    """What _line_start reads of each text before its own text, at once (each step's columns made in
    turn: nested in one select, polars computed each again): `_line`, `_text`, the leading time
    (`_at` its span, `_leading_ts` the time; null without one) and the level word after it
    (LEVEL_FIELD), the text after the time (`_rest`), where the text begins after the level word
    (`_level_end`) and after a bracketed context too (`_named_at`); without a time, at 0."""
    text, at, level_end, context = pl.col("_text"), pl.col("_at"), pl.col("_level_end"), pl.col("_context")
    leading = pl.DataFrame({"_text": texts}).select(text.str.extract_groups(_TIME_TEXT)).to_series().struct
    frame = pl.DataFrame({"_line": lines, "_text": texts, "_at": leading.field("1").str.len_chars(),
                          "_leading_ts": leading.field("ts")}).with_columns(_rest=text.str.slice(at.fill_null(0)))
    timed = at.is_not_null()
    frame = frame.with_columns(
        pl.when(timed).then(pl.col("_rest").str.extract(_LEVEL_WORD, 1)).alias(LEVEL_FIELD),
        _level_end=at.fill_null(0) + pl.when(timed).then(pl.col("_rest").str.extract(_LEVEL_TEXT, 1).str.len_chars())
        .fill_null(0),
    ).with_columns(_context=text.str.slice(level_end).str.extract(_CONTEXT_TEXT, 1).str.len_chars())
    return frame.with_columns(_named_at=pl.when(~timed).then(0).when(
        context.is_not_null() & (level_end + context < text.str.strip_chars_end().str.len_chars())
    ).then(level_end + context).otherwise(level_end))


def _beside_pairs(frame: pl.DataFrame, fields: tuple[str, ...], skip: Collection[str]) -> pl.DataFrame:
    """parse_logfmt's records of a frame of `_line`, `_text`, the `fields` it read before each text,
    `_rest` (the text after them, where the pairs are), `_named_at` (where the words that name a
    record begin) and `_level_end` (where its message begins): `_line`, the fields, where words stand
    beside the pairs the message (`_plain_message`) and those words (PLAIN_NAME), and a column a
    pair's key (its first value; keys in `skip`, the fields and those parse_logfmt sets left out)."""
    text = pl.col("_text")
    frame = frame.with_columns(_words=text.str.slice(pl.col("_named_at")).str.replace_all(_PAIR_TEXT, " ")
                               .str.replace_all(r"\s{2,}|[^\S ]", " ").str.strip_chars())  # faster than \s+
    worded = pl.col("_words").str.contains("[A-Za-z]{2}")
    spoken = frame.select(
        "_line", *fields,
        pl.when(worded).then(text.str.slice(pl.col("_level_end")).str.strip_chars()).alias("_plain_message"),
        pl.when(worded).then(pl.col("_words")).alias(PLAIN_NAME),
        "_rest",
    )
    pairs = logfmt_frame(spoken["_line"], spoken["_rest"], skip=(*skip, *_OWN_KEYS, *fields))
    return spoken.drop("_rest").join(pairs, on="_line", how="left", maintain_order="left")


def plain_frame(lines: pl.Series, texts: pl.Series) -> pl.DataFrame:
    """parse_plain of texts plain_only says are free text after a time, at once: `_line`, the
    leading time, the level word, the message after the time and the name after the level and
    a bracketed context (PLAIN_NAME)."""
    return _timed_start(lines, texts).select(
        "_line",
        "_leading_ts",
        LEVEL_FIELD,
        pl.col("_rest").str.strip_chars().alias("_plain_message"),
        pl.col("_text").str.slice(pl.col("_named_at")).str.strip_chars().alias(PLAIN_NAME),
    )


_BRACKETED_LEVEL_TEXT = "^(" + BRACKETED_LEVEL.pattern.removeprefix("^") + ")"
_INVOCATION_TEXT = LAMBDA_INVOCATION_LINE.pattern.replace(r"(?=\s|$)", r"(?:\s|$)")  # no look-ahead in polars


def untimed_only(texts: pl.Series) -> pl.Series:
    """Which texts parse_plain reads, given an envelope's time (syslog's, a journal's, a container
    runtime's), as untimed_frame does: no leading time of their own, no `=` (parse_logfmt reads no
    pair), no Lambda prefix, none of the characters 0x1c-0x1f, no `[` opening them but a bracketed
    level (a JSON array is no record)."""
    return (~texts.str.contains(_TIME_TEXT) & ~texts.str.contains(r"[=\x1c-\x1f]")
            & ~texts.str.contains(_LAMBDA_TEXT)
            & (~texts.str.contains(r"^\s*\[") | texts.str.contains(_BRACKETED_LEVEL_TEXT)))


def untimed_frame(lines: pl.Series, texts: pl.Series) -> pl.DataFrame:
    """parse_plain with an envelope's time of texts untimed_only says it reads as this does, at
    once: `_line`, the text (`_plain_message`), a bracketed level opening it and the text after that
    (PLAIN_NAME), a Lambda invocation line's request id."""
    bracketed = pl.DataFrame({"_text": texts}).select(pl.col("_text").str.extract_groups(_BRACKETED_LEVEL_TEXT)).to_series()
    text = pl.col("_text")
    return pl.DataFrame({"_line": lines, "_text": texts, "_at": bracketed.struct.field("1").str.len_chars().fill_null(0),
                         LEVEL_FIELD: bracketed.struct.field("level")}).select(
        "_line",
        text.str.strip_chars().alias("_plain_message"),
        LEVEL_FIELD,
        text.str.slice(pl.col("_at")).str.strip_chars().alias(PLAIN_NAME),
        text.str.extract(_INVOCATION_TEXT, 1).alias(AWS_REQUEST_ID),
    )


# The keys parse_logfmt sets before a line's pairs, which a pair of the same name does not replace.
_OWN_KEYS = ("_leading_ts", LEVEL_FIELD, "_plain_message", PLAIN_NAME)
_OWN_KEY_TEXT = "|".join(f"(?:^|\\s){key}=" for key in _OWN_KEYS)


def lambda_only(texts: pl.Series) -> pl.Series:
    """Which texts parse_plain reads as lambda_frame does: a Lambda runtime's line (its time, request
    id and level before the application's text) with no `=` (parse_logfmt reads no pair) nor the
    characters 0x1c-0x1f."""
    return texts.str.contains(_LAMBDA_TEXT) & ~texts.str.contains(r"[=\x1c-\x1f]")


def _lambda_start(lines: pl.Series, texts: pl.Series) -> pl.DataFrame:
    """A Lambda runtime's prefix of each text: `_line`, `_text`, its span (`_at`), time, request id
    and level."""
    prefix = pl.DataFrame({"_text": texts}).select(pl.col("_text").str.extract_groups(_LAMBDA_TEXT)).unnest("_text")
    return prefix.select(
        pl.lit(lines).alias("_line"), pl.lit(texts).alias("_text"), pl.col("1").str.len_chars().alias("_at"),
        pl.coalesce("ts", "ts2").alias("_leading_ts"), pl.coalesce("rid", "rid2").alias(AWS_REQUEST_ID),
        pl.coalesce("level", "level2").alias(LEVEL_FIELD),
    )


_LAMBDA_FIELDS = ("_leading_ts", AWS_REQUEST_ID, LEVEL_FIELD)


def lambda_frame(lines: pl.Series, texts: pl.Series) -> pl.DataFrame:
    """parse_plain of texts lambda_only says it reads as this does, at once: `_line`, the runtime's
    time, request id and level, and the text after them (`_plain_message`, PLAIN_NAME)."""
    after = pl.col("_text").str.slice(pl.col("_at")).str.strip_chars()
    return _lambda_start(lines, texts).select("_line", *_LAMBDA_FIELDS, after.alias("_plain_message"), after.alias(PLAIN_NAME))


def lambda_pairs_only(texts: pl.Series) -> pl.Series:
    """Which texts parse_logfmt reads as lambda_pairs_frame does: a Lambda runtime's line with two
    pairs or more after its prefix (`[INFO]\t<time>\t<request id>\tevent=job_received job_id=..`),
    none _LEFT_TO_LINES nor a pair named as a key parse_logfmt sets itself."""
    at = texts.str.extract(_LAMBDA_TEXT, 1).str.len_chars()
    return (at.is_not_null() & (texts.str.slice(at.fill_null(0)).str.count_matches(_PAIR_TEXT) >= 2)
            & ~texts.str.contains(_LEFT_TO_LINES) & ~texts.str.contains(_OWN_KEY_TEXT))


def lambda_pairs_frame(lines: pl.Series, texts: pl.Series, skip: Collection[str] = ()) -> pl.DataFrame:
    """parse_logfmt of texts lambda_pairs_only says it reads as this does, at once: `_line`, the
    runtime's time, request id and level, where words stand beside the pairs the text after the
    prefix (and after a level word opening it, where the prefix names a level: `_plain_message`)
    and those words (PLAIN_NAME), and a column a pair's key (its first value; keys in `skip` and
    those the prefix sets left out)."""
    at, rest = pl.col("_at"), pl.col("_rest")
    frame = _lambda_start(lines, texts).with_columns(_rest=pl.col("_text").str.slice(at))
    frame = frame.with_columns(_named_at=at, _level_end=at + pl.when(pl.col(LEVEL_FIELD).is_not_null())
                               .then(rest.str.extract(_LEVEL_TEXT, 1).str.len_chars()).fill_null(0))
    return _beside_pairs(frame, _LAMBDA_FIELDS, skip)


def words_and_pairs_only(texts: pl.Series) -> pl.Series:
    """Which texts parse_logfmt reads as words_and_pairs_frame does: two pairs or more after an
    optional leading time, a level word and free text (`2026-.. INFO Email sent order_id=o-1
    status=200`, Python's logging with its extra fields; `2026-.. level=info msg=".." job_id=j-1`).
    Left to parse_logfmt: _LEFT_TO_LINES, a Lambda runtime's prefix, a pair named as a key
    parse_logfmt sets itself."""
    at = texts.str.extract(_TIME_TEXT, 1).str.len_chars()
    rest = texts.str.slice(at.fill_null(0))
    return ((rest.str.count_matches(_PAIR_TEXT) >= 2) & ~texts.str.contains(_LEFT_TO_LINES)
            & ~texts.str.contains(_LAMBDA_TEXT) & ~texts.str.contains(_OWN_KEY_TEXT)
            & (at.is_not_null() | ~texts.str.contains(r"^\s*\[")))  # a line of JSON's array is no record


def words_and_pairs_frame(lines: pl.Series, texts: pl.Series, skip: Collection[str] = ()) -> pl.DataFrame:
    """parse_logfmt of texts words_and_pairs_only says it reads as this does, at once: `_line`,
    the leading time and the level word after it, where words stand beside the pairs the text after
    the level word (`_plain_message`) and those words (PLAIN_NAME), and a column a pair's key (its
    first value; keys in `skip` left out)."""
    return _beside_pairs(_timed_start(lines, texts), ("_leading_ts", LEVEL_FIELD), skip)


def _line_start(text: str) -> tuple[dict[str, str], int, int] | None:
    """What a line says before its own text, where that text begins, and where it begins after
    the level word (and the bracketed context after it: a logger's name): a Lambda runtime's
    prefix (its time, request id and level), else a leading time and the level word after it;
    None when it begins with neither."""
    found = LAMBDA_PREFIX.match(text)
    if found:
        fields = {"_leading_ts": found.group("ts") or found.group("ts2"), AWS_REQUEST_ID: found.group("rid") or found.group("rid2")}
        level = found.group("level") or found.group("level2")
        if level:
            fields[LEVEL_FIELD] = level
        return fields, found.end(), found.end()
    found = LEADING_TS.match(text)
    if not found:
        return None
    fields = {"_leading_ts": found.group("ts")}
    level = LEADING_LEVEL.match(text, found.end())
    if level:
        fields[LEVEL_FIELD] = level.group("level")
    named_at = level.end() if level else found.end()
    context = _BRACKETED.match(text, named_at)
    return fields, found.end(), context.end() if context and context.end() < len(text.rstrip()) else named_at


def parse_plain(text: str, envelope_time: bool = False) -> dict[str, str] | None:
    """A free-text line with a leading timestamp: kept as message (after the time), its kind named
    by its text after the level word (PLAIN_NAME), as a JSON record's lone message names it: the
    vocabulary's patterns read it (`Shutting down gracefully, received SIGTERM`, the Lambda
    runtime's `Task timed out after 30.00 seconds`). With `envelope_time` (an envelope gives each
    line its time), any line: a line without a time has its bracketed level (Lambda's `[ERROR]
    KeyError: ...` of an uncaught exception) before its name."""
    start = _line_start(text)
    if start is None:
        if not envelope_time:
            return None
        record = {"_plain_message": text.strip()}
        bracketed = BRACKETED_LEVEL.match(text)
        if bracketed:
            record[LEVEL_FIELD] = bracketed.group("level")
        record[PLAIN_NAME] = text[bracketed.end() if bracketed else 0:].strip()
        invocation = LAMBDA_INVOCATION_LINE.match(text)
        if invocation:
            record[AWS_REQUEST_ID] = invocation.group("rid")
        return record
    record, at, named_at = start
    record["_plain_message"] = text[at:].strip()
    record[PLAIN_NAME] = text[named_at:].strip()
    return record

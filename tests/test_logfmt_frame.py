"""logfmt_frame, words_and_pairs_frame, plain_frame and untimed_frame read lines of logfmt pairs
alone, of pairs after a time, level and words, of free text after a time, and of free text an
envelope gives a time, at once as parse_logfmt and parse_plain read each (the per-line parsers stay for every other line): on every fixture's lines,
and on generated ones."""

from __future__ import annotations

import gzip

import orjson
import polars as pl
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind import stack_lines
from dupfind.lineparse import (
    LEADING_TS,
    LEVEL_WORDS,
    lambda_frame,
    lambda_only,
    lambda_pairs_frame,
    lambda_pairs_only,
    logfmt_frame,
    pairs_only,
    parse_logfmt,
    parse_plain,
    plain_frame,
    plain_only,
    untimed_frame,
    untimed_only,
    words_and_pairs_frame,
    words_and_pairs_only,
)
from dupfind.stack_lines import _own_record, own_record_lines


def _frame_records(texts: list[str], only=pairs_only, frame=logfmt_frame) -> list[dict | None]:
    """Each text's record as `frame` gives it (None: `only` leaves it to the per-line parser)."""
    series = pl.Series(texts, dtype=pl.String)
    fast = only(series)
    rows = frame(pl.Series(range(len(texts))).filter(fast), series.filter(fast)).to_dicts() if fast.any() else []
    by_line = {row.pop("_line"): {k: v for k, v in row.items() if v is not None} for row in rows}
    return [by_line.get(i) for i in range(len(texts))]


def _fixture_lines() -> list[str]:
    lines = []
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.suffix in (".json", ".toml", ".py", ".md") and path.parent.name != "logs":
            continue
        data = path.read_bytes()
        if data.startswith(b"\x1f\x8b"):
            data = gzip.decompress(data)
        try:
            lines += data.decode("utf-8").splitlines()
        except (UnicodeDecodeError, EOFError, OSError):
            continue
    return lines


def test_every_fixture_line_of_pairs_alone_reads_as_parse_logfmt_reads_it():
    lines = _fixture_lines()
    records = _frame_records(lines)
    taken = [(line, record) for line, record in zip(lines, records) if record is not None]
    assert len(taken) > 150  # the fixtures' logfmt logs (logrus, Go workers)
    for line, record in taken:
        assert record == parse_logfmt(line), line


_KEY = st.from_regex(r"[A-Za-z_@][A-Za-z0-9_.\-/@]{0,8}", fullmatch=True)
_VALUE = st.one_of(
    st.from_regex(r'[^\s"\\]{0,10}', fullmatch=True),
    st.from_regex(r'"[^"\\]{0,12}"', fullmatch=True),
    st.from_regex(r'"(?:[^"\\]|\\[ntr"\\x]){0,8}"', fullmatch=True),  # escapes: read at once but for `\x`
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
_GAP = st.sampled_from([" ", "  ", "\t", " \t "])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_KEY, _VALUE, _GAP), min_size=1, max_size=6), st.sampled_from(["", " ", "  "]))
def test_generated_lines_read_as_parse_logfmt_reads_them(pairs, lead):
    line = lead + "".join(f"{key}={value}{gap}" for key, value, gap in pairs).rstrip(" \t")
    (record,) = _frame_records([line])
    if record is not None:
        assert record == parse_logfmt(line)


def test_every_fixture_line_of_free_text_after_a_time_reads_as_parse_plain_reads_it():
    lines = _fixture_lines()
    records = _frame_records(lines, plain_only, plain_frame)
    taken = [(line, record) for line, record in zip(lines, records) if record is not None]
    assert len(taken) > 300  # Python's logging, logback, incident notes, Celery's and Dramatiq's lines
    for line, record in taken:
        assert parse_logfmt(line) is None and record == parse_plain(line), line


_TIME = st.sampled_from(["2026-11-29 07:16:09,727", "2026-11-29T07:16:09.727Z", "[2026-11-29 07:16:09,727]",
                         "2026-11-29 07:16", "2026-11-29T07:16:09+01:00", "2026-11-29 07:16:09 UTC"])
_WORDS = st.lists(st.one_of(st.sampled_from(LEVEL_WORDS.split("|") + ["info", "[main]", "[pool-1]", ":", "|", "WARNINGS"]),
                            st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)), max_size=5)


@settings(max_examples=400, deadline=None)
@given(_TIME, st.sampled_from([" ", ": ", "  ", " | "]), _WORDS)
def test_generated_free_text_lines_read_as_parse_plain_reads_them(time, gap, words):
    line = time + gap + " ".join(words)
    (record,) = _frame_records([line], plain_only, plain_frame)
    if record is not None:
        assert record == parse_plain(line)


def test_every_fixture_line_of_words_and_pairs_reads_as_parse_logfmt_reads_it():
    lines = _fixture_lines()
    records = _frame_records(lines, words_and_pairs_only, words_and_pairs_frame)
    taken = [(line, record) for line, record in zip(lines, records) if record is not None]
    assert sum(not pairs_only(pl.Series([line])).item() for line, _ in taken) > 100  # more than pairs alone
    for line, record in taken:
        assert record == parse_logfmt(line), line


_PAIRS = st.lists(st.tuples(_KEY, _VALUE, _GAP), min_size=0, max_size=4)


def _words_and_pairs_line(start: str, before: list[str], pairs: list, between: list[str], after: list) -> str:
    """A line of `start`, words, pairs, words and pairs (each group possibly empty)."""
    def spelled(group):
        return "".join(f"{key}={value}{gap}" for key, value, gap in group)

    return start + " ".join(before) + " " + spelled(pairs) + " ".join(between) + " " + spelled(after)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["", "2026-11-29 07:16:09,727 ", "[2026-11-29T07:16:09.727Z] ", "2026-11-29 07:16:09 UTC | "]),
       _WORDS, _PAIRS, _WORDS, _PAIRS)
def test_generated_words_and_pairs_read_as_parse_logfmt_reads_them(time, before, pairs, between, after):
    line = _words_and_pairs_line(time, before, pairs, between, after)
    (record,) = _frame_records([line], words_and_pairs_only, words_and_pairs_frame)
    if record is not None:
        assert record == parse_logfmt(line)


def test_lines_the_words_and_pairs_frame_leaves_to_the_line_parser():
    lines = ['["a=1 b=2", "c=3"]',  # a JSON array: not a record
             "2026-11-29 07:16:09,727 INFO sent order_id=o-1",  # one pair beside words: free text
             "2026-11-29 07:16:09,727 INFO sent a=\\x b=2",  # an escape
             "2026-11-29 07:16:09,727 INFO sent _plain_name=x b=2"]  # a key parse_logfmt sets itself
    assert words_and_pairs_only(pl.Series(lines)).to_list() == [False] * len(lines)
    fast = words_and_pairs_only(pl.Series(["2026-11-29 07:16:09,727 INFO [mailer] Email sent order_id=o-1 status=200"]))
    assert fast.to_list() == [True]


def test_a_pair_named_as_the_frames_line_column_is_left_out():
    texts = pl.Series(["a=1 _line=5 b=2", "2026-11-29 07:16:09,727 INFO sent _line=5 b=2"])
    assert logfmt_frame(pl.Series([7, 8]), texts).to_dicts()[0] == {"_line": 7, "a": "1", "b": "2"}
    assert words_and_pairs_frame(pl.Series([7, 8]), texts)["_line"].to_list() == [7, 8]


def test_every_fixture_line_of_free_text_without_a_time_reads_as_parse_plain_reads_it_in_an_envelope():
    lines = _fixture_lines()
    records = _frame_records(lines, untimed_only, untimed_frame)
    taken = [(line, record) for line, record in zip(lines, records) if record is not None]
    assert len(taken) > 1000  # stack traces, framework lines, the messages inside envelopes
    for line, record in taken:
        assert parse_logfmt(line) is None and record == parse_plain(line, envelope_time=True), line


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["", " ", "[ERROR] ", "[INFO]\t", "[error] ", "START RequestId: 8f5e2d4c-1b3a-4c5d-9e8f-7a6b5c4d3e2f ",
                        "REPORT RequestId: 8f5e2d4c-1b3a-4c5d-9e8f-7a6b5c4d3e2f\tDuration: 1 ms", "[", "[1, "]), _WORDS)
def test_generated_free_text_without_a_time_reads_as_parse_plain_reads_it_in_an_envelope(opening, words):
    line = opening + " ".join(words)
    (record,) = _frame_records([line], untimed_only, untimed_frame)
    if record is not None:
        assert parse_logfmt(line) is None and record == parse_plain(line, envelope_time=True)


def _own_lines(texts: list[str]) -> set[int]:
    """own_record_lines read by polars, however few the lines (a few are asked one by one)."""
    saved, stack_lines.FEW_LINES = stack_lines.FEW_LINES, 0
    try:
        return own_record_lines(pl.Series(range(len(texts))), pl.Series(texts, dtype=pl.String))
    finally:
        stack_lines.FEW_LINES = saved


def test_a_few_lines_are_asked_one_by_one_as_polars_reads_many():
    lines = [line for line in _fixture_lines() if not LEADING_TS.match(line)]
    for start in range(0, len(lines), stack_lines.FEW_LINES):
        part = lines[start:start + stack_lines.FEW_LINES]
        assert own_record_lines(pl.Series(range(len(part))), pl.Series(part, dtype=pl.String)) == _own_lines(part)


def test_every_fixture_line_is_its_own_record_at_once_as_line_by_line():
    lines = [line for line in _fixture_lines() if not LEADING_TS.match(line)]  # trace_owners asks of those only
    own = _own_lines(lines)
    assert len(own) > 150  # logrus' and Go's records between stack traces
    assert own == {i for i, line in enumerate(lines) if _own_record(line)}


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["", " ", "[signal SIGSEGV: ", "goroutine 1 ", "\x1c"]), _PAIRS, _WORDS)
def test_generated_lines_are_their_own_records_at_once_as_line_by_line(opening, pairs, words):
    line = opening + "".join(f"{key}={value}{gap}" for key, value, gap in pairs) + " ".join(words)
    assert _own_lines([line]) == ({0} if _own_record(line) else set())


def _fixture_messages() -> list[str]:
    """The messages of the fixtures' JSON documents and lines (CloudWatch's Lambda lines are inside
    them), and of the AWS CLI's text output (its fifth field)."""
    found: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("message", "msg", "log") and isinstance(inner, str):
                    found.append(inner)
                else:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for path in sorted(FIXTURES.rglob("logs/**/*.json")):
        try:
            walk(orjson.loads(path.read_bytes()))
        except orjson.JSONDecodeError:
            for line in path.read_bytes().splitlines():
                try:
                    walk(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
    for line in _fixture_lines():
        fields = line.split("\t", 4)
        if fields[0] == "EVENTS" and len(fields) == 5:
            found.append(fields[4])
    return found


def test_every_fixture_lambda_line_reads_as_the_line_parsers_read_it():
    lines = _fixture_lines() + _fixture_messages()
    plain = [(line, record) for line, record in zip(lines, _frame_records(lines, lambda_only, lambda_frame)) if record]
    pairs = [(line, record) for line, record in zip(lines, _frame_records(lines, lambda_pairs_only, lambda_pairs_frame))
             if record]
    assert len(plain) >= 2 and len(pairs) > 100  # the runtime's timeout line; the Python runtime's logfmt lines
    for line, record in plain:
        assert parse_logfmt(line) is None and record == parse_plain(line), line
    for line, record in pairs:
        assert record == parse_logfmt(line), line


_REQUEST = "6513270e-269e-4d37-b2a7-4de452e6b438"
_LAMBDA_PREFIXES = st.sampled_from([
    f"[INFO]\t2026-12-04T16:30:00.003Z\t{_REQUEST}\t", f"[ERROR]\t2026-12-04T16:30:00Z\t{_REQUEST}\t",
    f"2026-12-04T16:30:00.003Z\t{_REQUEST}\tINFO\t", f"2026-12-04T16:30:00.003Z {_REQUEST} ",
    f"2026-12-04T16:30:00.003Z\t{_REQUEST}\t", f"[WARNING]\t2026-12-04T16:30:00.003Z\t{_REQUEST}\tINFO ",
])


@settings(max_examples=400, deadline=None)
@given(_LAMBDA_PREFIXES, _WORDS)
def test_generated_lambda_lines_read_as_parse_plain_reads_them(prefix, words):
    line = prefix + " ".join(words)
    (record,) = _frame_records([line], lambda_only, lambda_frame)
    if record is not None:
        assert parse_logfmt(line) is None and record == parse_plain(line)


@settings(max_examples=600, deadline=None)
@given(_LAMBDA_PREFIXES, _WORDS, _PAIRS, _WORDS, _PAIRS)
def test_generated_lambda_lines_of_pairs_read_as_parse_logfmt_reads_them(prefix, before, pairs, between, after):
    line = _words_and_pairs_line(prefix, before, pairs, between, after)
    (record,) = _frame_records([line], lambda_pairs_only, lambda_pairs_frame)
    if record is not None:
        assert record == parse_logfmt(line)

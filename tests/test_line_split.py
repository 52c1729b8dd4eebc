"""Lines split by polars' CSV reader: exactly Python's split, or left to it."""

from __future__ import annotations

import random
from unittest import mock

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind import line_split
from dupfind.ingest import (
    _batch_lines,
    _batch_lines_one_by_one,
    _Block,
    _decode_lines,
    _lines_per_part,
    _Pending,
    _text_lines,
)
from dupfind.line_split import MIN_BYTES, UTF8_BOM, split_lines

# Bytes that matter to a line splitter or a CSV reader: newlines, CR, NUL, quotes, separators,
# comment marks, a BOM, multi-byte UTF-8 and bytes that are not UTF-8.
PIECES = [b"\n", b"\n", b"\r", b"\r\n", b"\x00", b'"', b"'", b",", b";", b"\t", b" ", b"#", b"\\", b"a", b"{}",
          UTF8_BOM, "é".encode(), "日".encode(), b"\xff", b"\xc3", b'{"k":"v"}']
payloads = st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join)


def python_lines(payload: bytes) -> list[str]:
    lines = payload.decode().split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@settings(max_examples=400, deadline=None)
@given(payload=payloads)
def test_lines_are_pythons_or_left_to_python(payload: bytes):
    with mock.patch.object(line_split, "MIN_BYTES", 0):  # the reader, on these few bytes too
        texts = split_lines(payload)
    try:
        expected = python_lines(payload)
    except UnicodeDecodeError:
        assert texts is None
        return
    if texts is None:  # only where the reader would read otherwise
        assert not payload or b"\r" in payload or b"\x00" in payload or payload.startswith(UTF8_BOM)
    else:
        assert texts.dtype == pl.String and texts.to_list() == expected


def test_a_small_block_is_left_to_python():
    assert split_lines(b"a\nb\n") is None
    with mock.patch.object(line_split, "MIN_BYTES", 0):
        assert split_lines(b"a\nb\n").to_list() == ["a", "b"]


def test_a_large_block_split_on_several_threads_is_pythons():
    rng = random.Random(7)
    words = ["", " ", "\t", '{"ts":"2026-07-21T10:00:00Z","msg":"a, \\"b\\""}', "plain text, with commas", "日本", "#x"]
    payload = "\n".join(rng.choice(words) for _ in range(200_000)).encode() + b"\n"
    texts = split_lines(payload)
    assert len(payload) >= MIN_BYTES and texts is not None and texts.to_list() == python_lines(payload)


def _items(datas: list[bytes]) -> list[_Pending]:
    return [_Pending(f"f{i}.log", None, data, None, None) for i, data in enumerate(datas)]  # type: ignore[arg-type]


FILES = [b'{"a":1}\n', b'{"a":2}', b"\n", UTF8_BOM, UTF8_BOM + b"x\n\ny", b"z\n" + UTF8_BOM + b"w\n", "é\n".encode()]


@settings(max_examples=200, deadline=None)
@given(datas=st.lists(st.one_of(st.sampled_from(FILES), payloads.filter(bool)), min_size=1, max_size=8))
def test_a_batch_split_by_the_reader_is_the_batch_split_in_python(datas: list[bytes]):
    fast_block, slow_block = _Block(), _Block()
    items = _items(datas)
    joined = b"".join(p for d in datas for p in ((d[3:] if d.startswith(UTF8_BOM) else d), b"" if d.endswith(b"\n") else b"\n"))
    with mock.patch.object(line_split, "MIN_BYTES", 0):  # the reader, on these few bytes too
        rows, lines, counts = _batch_lines(items, fast_block)
    slow_rows, slow_lines, slow_counts = _batch_lines_one_by_one(items, slow_block, joined)
    assert rows.equals(slow_rows) and counts == slow_counts
    assert (lines is None) == (slow_lines is None)
    if lines is not None:
        assert lines.data == slow_lines.data and lines.spans.equals(slow_lines.spans)
    assert [r.to_dicts() for r in fast_block.rejects] == [r.to_dicts() for r in slow_block.rejects]


@settings(max_examples=200, deadline=None)
@given(chunk=payloads.filter(bool), first_line=st.sampled_from([1, 1, 5000]))
def test_a_chunks_lines_are_pythons(chunk: bytes, first_line: int):
    with mock.patch.object(line_split, "MIN_BYTES", 0):
        frame, rejects = _decode_lines(chunk, first_line)
    lines = _text_lines(chunk, first_line)
    if lines is None:  # not UTF-8: each line decoded or rejected alone, as before
        assert rejects.height > 0
        return
    assert frame["text"].to_list() == lines and rejects.height == 0
    assert frame["line"].to_list() == list(range(first_line, first_line + len(lines)))


def test_a_batch_of_utf8_files_is_split_by_the_reader(monkeypatch):
    import dupfind.ingest as ingest_module

    monkeypatch.setattr(ingest_module, "_batch_lines_one_by_one", lambda *args: (_ for _ in ()).throw(AssertionError))
    monkeypatch.setattr(line_split, "MIN_BYTES", 0)
    rows, lines, counts = _batch_lines(_items(FILES), _Block())
    assert counts == [1, 1, 1, 1, 3, 2, 1] and lines is not None
    assert rows["text"].to_list() == ['{"a":1}', '{"a":2}', "", "", "x", "", "y", "z", "\ufeffw", "é"]
    assert rows["line"].to_list()[:2] == [1, (1 << 32) + 1]


def test_each_files_lines_are_counted_from_where_they_end():
    ends = pl.Series([1, 3, 7], dtype=pl.Int64)  # "a\nb\n" then "cde\n": 4 bytes each
    assert _lines_per_part(ends, [4, 4]) == [2, 1]
    assert _lines_per_part(ends, [2, 2, 4]) == [1, 1, 1]
    # Lines that do not end where the payload does are not its lines: Python splits the batch.
    assert _lines_per_part(ends, [4, 5]) is None
    assert _lines_per_part(ends, [4, 3]) is None
    assert _lines_per_part(pl.Series([], dtype=pl.Int64), [1]) is None

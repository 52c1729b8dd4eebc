"""A line's flags (blank, JSON, not ending a JSON object) taken from its first or last byte where
that settles them are what the patterns give on every line."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.ingest import _contains_unless

LINES = st.lists(
    st.text(alphabet=st.sampled_from(["{", "}", " ", "\t", "\u00a0", "\u2003", "\r", "a", '"', ":", "é"]), max_size=8),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(LINES)
def test_flags_settled_by_one_byte_are_the_patterns_own(lines: list[str]) -> None:
    texts = pl.Series(lines, dtype=pl.String)
    brace = texts.str.starts_with("{")
    assert _contains_unless(texts, r"^\s*$", brace, False).to_list() == texts.str.contains(r"^\s*$").to_list()
    assert _contains_unless(texts, r"^\s*\{", brace, True).to_list() == texts.str.contains(r"^\s*\{").to_list()
    ends = texts.str.ends_with("}")
    assert _contains_unless(texts, r"\}\s*$", ends, True).to_list() == texts.str.contains(r"\}\s*$").to_list()


def test_only_the_undecided_lines_are_matched() -> None:
    texts = pl.Series(["{a", "  {b", "x", "{"])
    # Decided lines keep the given value even where the pattern would say otherwise.
    assert _contains_unless(texts, r"x", pl.Series([True, False, False, True]), True).to_list() == [True, False, True, True]
    assert _contains_unless(texts, r"\{", pl.Series([False] * 4), False).to_list() == [True, True, False, True]


BLOCK_LINES = st.lists(
    st.tuples(st.sampled_from(["", "\x00", "\x00\x00", "\ufeff", " "]),
              st.sampled_from(['{"ts": "2026-03-02T14:00:01Z", "event": "job_started", "job_id": "j1"}',
                               "2026-03-02T14:00:02Z INFO job_id=j2 event=job_started", "", "plain text", "é"]),
              st.sampled_from(["", "\r", "\r\r", " "])).map("".join),
    min_size=1, max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(BLOCK_LINES)
def test_a_block_read_with_its_bytes_parses_as_one_read_without_them(lines: list[str]) -> None:
    """parse_block rules out lines that end with a CR or begin with a NUL or a BOM by the block's
    bytes (LineBytes) before any pattern: what it makes of a block is what it makes without them."""
    from dupfind.config import load_config
    from dupfind.ingest import LineParser, _Block
    from dupfind.line_bytes import LineBytes

    parser = LineParser(load_config(None))
    data = ("\n".join(lines) + "\n").encode()
    rows = pl.DataFrame({"line": range(1, len(lines) + 1), "text": lines}, schema={"line": pl.Int64, "text": pl.String})
    made = []
    for with_bytes in (True, False):
        block = _Block(lines_in_file=True)
        parser.parse_block(rows, block, None, LineBytes.split_from(data, rows["text"]) if with_bytes else None)
        made.append(([(fmt, raw.to_dicts()) for raw, fmt in block.raws], [r.to_dicts() for r in block.rejects],
                     block.blank, [b.to_list() for b in block.blank_lines]))
    assert made[0] == made[1]

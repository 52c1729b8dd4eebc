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

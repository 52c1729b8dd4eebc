"""Categorical columns turned to text for small derived frames point at one copy of each text."""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.schema import SHARED_STRINGS_MIN_ROWS, as_strings, label_dtype, shared_strings

TEXTS = st.sampled_from(["", "ack", "worker-notifier-25zxbf9qlg-kcbk8", "é" * 20, "deploy v4.24.5", "a|b"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), TEXTS), max_size=40), st.booleans())
def test_shared_strings_are_the_texts_a_cast_gives(values, own_pool) -> None:
    column = pl.Series("c", values, dtype=pl.String).cast(label_dtype() if own_pool else pl.Categorical)
    shared = shared_strings(column)
    assert shared.dtype == pl.String and shared.name == "c"
    assert shared.to_list() == column.cast(pl.String).to_list() == values


def test_as_strings_turns_every_categorical_of_a_frame_and_of_a_lazy_frame() -> None:
    frame = pl.DataFrame({
        "worker": pl.Series(["w-1", None, "w-2", "w-1"]).cast(label_dtype()),
        "kind": pl.Series(["start", "ack", None, None]).cast(pl.Categorical),
        "n": [1, 2, 3, 4],
    })
    for turned in (as_strings(frame), as_strings(frame.lazy()).collect()):
        assert turned.schema == {"worker": pl.String, "kind": pl.String, "n": pl.Int64}
        assert turned.rows() == [("w-1", "start", 1), (None, "ack", 2), ("w-2", None, 3), ("w-1", None, 4)]


_GROWTH = """
import sys
import polars as pl
from dupfind.schema import label_dtype, shared_strings
names = [f"worker-notifier-25zxbf9q{i:03d}-kcbk8" for i in range(300)]
column = pl.Series("w", [names[i % 300] for i in range(400_000)]).cast(label_dtype())
from dupfind.schema import as_strings
turn = {
    "shared": shared_strings,
    "frame": lambda c: as_strings(c.to_frame()).to_series(),
    "cast": lambda c: c.cast(pl.String),
}[sys.argv[1]]
turn(column.head(1000))  # the code's pages, before the pages of its data are counted
def anonymous():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("RssAnon:")) * 1024
before = anonymous()
text = turn(column)
print(anonymous() - before)
"""


def _growth(how: str) -> int:
    # Freed pages go back at once, so that what grows is what the result holds.
    env = {**os.environ, "_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"}
    out = subprocess.run([sys.executable, "-c", _GROWTH, how], capture_output=True, text=True, check=True, env=env)
    return int(out.stdout)


def test_shared_strings_take_far_fewer_pages_than_a_cast() -> None:
    # 400k rows of 32-byte names: a cast copies each row's text (16-byte view + 32 bytes), shared
    # texts are one copy of each name and a view a row.
    cast, shared = _growth("cast"), _growth("shared")
    assert cast > 400_000 * 40
    assert shared < cast * 0.7
    assert _growth("frame") < cast * 0.7  # as_strings of a large eager frame shares them too


@pytest.mark.parametrize("rows", [SHARED_STRINGS_MIN_ROWS - 1, SHARED_STRINGS_MIN_ROWS, 3 * SHARED_STRINGS_MIN_ROWS])
def test_as_strings_gives_the_texts_below_and_above_the_shared_size(rows) -> None:
    # Small frames (a trace's records) are cast, large ones share their texts: the same values.
    names = [None, "w-1", "", "worker-é-2", "w-1"]
    column = pl.Series("w", [names[i % 5] for i in range(rows)]).cast(label_dtype())
    frame = pl.DataFrame([column, pl.Series("n", range(rows))])
    turned = as_strings(frame)
    assert turned.schema == {"w": pl.String, "n": pl.Int64}
    assert turned["w"].to_list() == [names[i % 5] for i in range(rows)]

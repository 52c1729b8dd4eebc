"""The bytes a block's lines were split from, handed to the JSON reader instead of the texts joined again."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# A subset scattered in more runs than its lines / RUNS_SHARE is joined by polars instead: each
# run costs a Python slice.
RUNS_SHARE = 8
MIN_RUNS = 64


@dataclass(frozen=True)
class LineBytes:
    """`data` holds a block's lines; `spans` each kept line's bytes in it, in row order.

    Joining a block's texts with polars for its JSON reader copies the block three times into
    fresh memory (the joined text, its scalar, the Python bytes); slices of the bytes it was read
    from cost one copy, or none when every line is kept.
    """

    data: bytes
    spans: pl.DataFrame  # start, end: a line's bytes, `end` exclusive and before its newline
    whole: bool = True  # every line of data kept

    @classmethod
    def split_from(cls, data: bytes, texts: pl.Series) -> LineBytes:
        """texts: data's lines in order, each exactly its bytes (data is the texts joined by
        newlines, a final newline allowed)."""
        lengths = texts.str.len_bytes().cast(pl.Int64)
        end = (lengths + 1).cum_sum() - 1
        return cls(data, pl.DataFrame({"start": end - lengths, "end": end}))

    def filter(self, keep: pl.Series) -> LineBytes:
        """The lines where keep is true (keep: one flag a line of this one, in order)."""
        return LineBytes(self.data, self.spans.filter(keep), self.whole and bool(keep.all()))

    def joined(self) -> bytes | None:
        """The kept lines joined by newlines (every line kept: the bytes as read, a final
        newline included); None when they are scattered in too many runs."""
        if self.whole:
            return self.data
        begins = (pl.col("start") != pl.col("end").shift(1) + 1).fill_null(True)
        runs = self.spans.select(
            start=pl.col("start").filter(begins),
            end=pl.col("end").filter(begins.shift(-1).fill_null(True)),
        )
        if runs.height > max(MIN_RUNS, self.spans.height // RUNS_SHARE):
            return None
        starts, ends = runs["start"].to_list(), runs["end"].to_list()
        view = memoryview(self.data)
        return b"\n".join(view[start:end] for start, end in zip(starts, ends))

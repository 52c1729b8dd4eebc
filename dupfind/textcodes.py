"""Ids and messages held as 4-byte codes into one sorted dictionary of their texts, per table.

A read numbers each batch's texts on its own (assembly.held_for_assembly); assembly merges the
batches' dictionaries into the table's and maps their codes into it (`Texts.merged`). The table
travels with its dictionary (IngestResult.texts, Correlation.texts, the result cache's set
entry); whatever shows, searches or redacts an id or a message decodes it (`decoded`,
`decoded_lists`) or encodes the text searched for (`find`). The rest (counting distinct ids,
comparing, sorting, joining within one table) works on the codes as it would on the texts."""

from __future__ import annotations

import polars as pl

from dupfind.schema import ID_COLUMNS, ORIGIN_COLUMN


def _code_type() -> type[pl.DataType]:
    return pl.UInt32


def __getattr__(name: str):
    # CODE_TYPE, the type of a coded column's codes, is made when first used, not at import: a
    # command answered from the cache never loads polars.
    if name == "CODE_TYPE":
        return _code_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def coded_columns(business_keys: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The text columns held as codes: those that name as many things as there are actions or
    lines. Polars' string pool keeps about 120 bytes a distinct text, for as long as any column
    uses it; a sorted dictionary of its own costs the text and a 16-byte view (334 MiB less at
    5M lines)."""
    return tuple(dict.fromkeys(("message", *ID_COLUMNS, ORIGIN_COLUMN, *business_keys)))


class Texts:
    """The sorted distinct texts of a table's coded columns: code n is `values[n]`. Codes of one
    dictionary compare, sort and join as their texts do, across columns too; codes of two
    dictionaries (two reads) mean nothing to each other."""

    __slots__ = ("columns", "values")

    def __init__(self, values: pl.Series, columns: tuple[str, ...]) -> None:
        # One chunk: a lookup in a dictionary of several would copy it into one each time.
        self.values = values.rechunk()
        self.columns = columns

    @classmethod
    def empty(cls, columns: tuple[str, ...]) -> Texts:
        return cls(pl.Series("text", [], dtype=pl.String), columns)

    @classmethod
    def of(cls, frame: pl.DataFrame, columns: tuple[str, ...]) -> Texts:
        """The dictionary of the text in these columns of `frame` (those it has): for frames
        built from text by hand (tests, tools), with `encoded`."""
        present = [c for c in columns if c in frame.columns]
        if not present:
            return cls.empty(columns)
        every = pl.concat([frame[c].cast(pl.String).drop_nulls() for c in present])
        return cls(every.unique().sort().rename("text"), columns)

    @classmethod
    def merged(cls, dictionaries: list[pl.Series], columns: tuple[str, ...]) -> tuple[Texts, list[pl.Series]]:
        """One dictionary of the texts of several (in any order, a text may repeat in one), and for
        each of them its code -> the code in the merged one. One sort of every text gives both
        the merged order and each one's mapping into it (at 5M lines 3.2 s and +0.48 GiB at its
        peak, against 5.2 s and +0.71 for a dense rank, 9.9 s and +0.24 for distinct texts
        sorted then searched for each dictionary's). The texts are sorted with their row numbers as
        a frame: an arg_sort then a gather of the texts took 15 % longer (0.8-1.0 s at 1M lines)."""
        every = pl.concat([d.cast(pl.String) for d in dictionaries]) if dictionaries else pl.Series([], dtype=pl.String)
        by_text = pl.DataFrame({"text": every}).with_row_index("row").sort("text")
        del every
        order, ordered = by_text["row"], by_text["text"]
        del by_text
        first = (ordered != ordered.shift(1)).fill_null(True)  # the first of each text in order
        # Text and codes of its own: a gather shares the dictionaries' buffers, each holding its
        # duplicates too, for as long as the dictionary lives.
        values = ordered.filter(first) + ""
        code_in_order = first.cast(_code_type()).cum_sum() - 1
        del ordered, first
        ranks = pl.repeat(0, order.len(), dtype=_code_type(), eager=True).scatter(order, code_in_order)
        del order, code_in_order
        remaps, start = [], 0
        for d in dictionaries:
            remaps.append(ranks.slice(start, d.len()))
            start += d.len()
        return cls(values.rename("text"), columns), remaps

    def __len__(self) -> int:
        return self.values.len()

    @staticmethod
    def compacted(frame: pl.DataFrame, dictionary: pl.Series, columns: tuple[str, ...]) -> tuple[pl.DataFrame, pl.Series]:
        """`frame` with these coded columns (those it has) as codes into a dictionary of only the
        texts they use, in `dictionary`'s order, and that dictionary (a part of a table's rows
        keeps no text of the rows left out)."""
        present = [c for c in columns if c in frame.columns]
        used = pl.repeat(False, dictionary.len(), dtype=pl.Boolean, eager=True)
        for name in present:
            codes = frame[name].drop_nulls()
            if codes.len():
                used = used.scatter(codes, True)
        kept = used.arg_true()
        new_codes = pl.repeat(0, dictionary.len(), dtype=_code_type(), eager=True).scatter(
            kept, pl.int_range(kept.len(), dtype=_code_type(), eager=True))
        frame = frame.with_columns(pl.lit(new_codes).gather(pl.col(name)).alias(name) for name in present)
        return frame, dictionary.gather(kept)

    def encode(self, column: pl.Series) -> pl.Series:
        """Text -> codes (every non-null text must be in the dictionary); nulls stay null."""
        codes = self.values.search_sorted(column.cast(pl.String)).cast(_code_type()).alias(column.name)
        if column.null_count():
            codes = pl.select(pl.when(column.is_not_null()).then(codes)).to_series().alias(column.name)
        return codes

    def encoded(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame` with its coded columns (those it has) as codes, from text."""
        present = [c for c in self.columns if c in frame.columns and frame.schema[c] != _code_type()]
        return frame.with_columns(self.encode(frame[c]) for c in present) if present else frame

    def lookup(self, texts: pl.Series) -> pl.Series:
        """The code of each text, null where the dictionary does not hold it."""
        texts = texts.cast(pl.String)
        codes = self.values.search_sorted(texts).cast(_code_type())
        if not len(self):
            return pl.repeat(None, texts.len(), dtype=_code_type(), eager=True)
        held = self.values.gather(codes.clip(upper_bound=len(self) - 1)) == texts
        return pl.select(pl.when(held & (codes < len(self))).then(codes)).to_series()

    def find(self, texts: list[str]) -> list[int]:
        """Codes of those of `texts` the dictionary holds."""
        return self.lookup(pl.Series(texts, dtype=pl.String)).drop_nulls().cast(pl.Int64).to_list()

    def starting_with(self, prefix: str) -> list[str]:
        """The texts the dictionary holds that begin with `prefix` (it is sorted: one range)."""
        low = self.values.search_sorted(prefix, side="left")
        high = self.values.search_sorted(prefix + "\U0010ffff", side="left")
        held = self.values.slice(low, high - low)
        return held.filter(held.str.starts_with(prefix)).to_list()

    def as_text(self, values: pl.Series) -> pl.Series:
        """A column's values as text: codes decoded, any other type cast."""
        return self.decode(values) if values.dtype == _code_type() else values.cast(pl.String)

    def text(self, name: str) -> pl.Expr:
        """An expression: column `name`'s codes as text."""
        return self.values_of(pl.col(name)).alias(name)

    def values_of(self, codes: pl.Expr) -> pl.Expr:
        """An expression: these codes as text, row by row (not in an aggregation: there polars
        would repeat the dictionary for every group)."""
        return pl.lit(self.values).gather(codes)

    def decoded_lists(self, frame: pl.DataFrame, *names: str) -> pl.DataFrame:
        """`frame` with these list columns of codes (those it has) as lists of text; nulls in a
        list are dropped."""
        for name in names:
            if frame.schema.get(name) != pl.List(_code_type()):
                continue
            rows = pl.DataFrame({"row": pl.int_range(frame.height, eager=True)})
            flat = rows.with_columns(frame[name]).explode(name).drop_nulls(name)
            flat = flat.with_columns(self.decode(flat[name]))
            lists = flat.group_by("row").agg(name)
            lists = rows.join(lists, on="row", how="left", maintain_order="left")[name]
            frame = frame.with_columns(lists.fill_null(pl.lit([], dtype=pl.List(pl.String))))
        return frame

    def decode(self, codes: pl.Series) -> pl.Series:
        return self.values.gather(codes).alias(codes.name)

    def decoded(self, frame: pl.DataFrame | pl.LazyFrame, *names: str):
        """`frame` with its coded columns (or only `names`) as text."""
        schema = frame.collect_schema()
        wanted = names or self.columns
        present = [c for c in wanted if c in schema and schema[c] == _code_type()]
        return frame.with_columns(self.text(c) for c in present) if present else frame

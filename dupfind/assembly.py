"""Normalised batches held until assembly, and their assembly into one canonical table."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from dupfind import textcodes
from dupfind.config import Config
from dupfind.schema import LABEL_COLUMNS, LABEL_TEXTS_MAX, canonical_schema, label_dtype, stored_dtype
from dupfind.textcodes import Texts, coded_columns

ASSEMBLE_THREADS = 2  # columns gathered at once when the table is assembled
KEY_COLUMNS = ("ts", "kind", "name", "source", "line", "format")  # kept in every normalised block


@dataclass
class SparsePiece:
    """A batch's column as the rows `at` that have a value and their `values` (None: no row has one)."""

    at: pl.Series
    values: pl.Series | None
    height: int


@dataclass
class HeldBatch:
    """A normalised batch as it is held until assembly: its coded columns (ids, messages) as codes
    into a dictionary of its own (`texts`: code n the n-th, sorted, each text once, whichever
    columns hold it), other text as Categorical (`source` too, which
    assembly rebuilds from the distinct paths), without the columns null on every row (put back
    as constants)."""

    frame: pl.DataFrame
    texts: pl.Series
    # Columns with a value on few rows, as (row `at`, value) pairs: a timeout or error carried by
    # one record in a hundred would hold 8 bytes on every row.
    sparse: dict[str, pl.DataFrame] = field(default_factory=dict)
    height: int = -1  # rows of the batch (-1: those of `frame`)

    def __post_init__(self) -> None:
        if self.height < 0:
            self.height = self.frame.height

    def holds(self, name: str) -> bool:
        """Whether column `name` has a value on some row of the batch."""
        if name in self.sparse:
            return True
        return name in self.frame.columns and self.frame[name].null_count() < self.height

    def take(self, name: str, convert: Callable[[pl.Series], pl.Series]) -> pl.Series | SparsePiece:
        """Column `name` taken out of the batch, its values `convert`ed (which keeps their
        places): one a row, or those of the rows that have one (none when the batch has no such
        column)."""
        if name in self.frame.columns:
            return convert(self.frame.drop_in_place(name))
        pairs = self.sparse.pop(name, None)
        if pairs is None:
            return SparsePiece(pl.Series("at", [], dtype=pl.UInt32), None, self.height)
        return SparsePiece(pairs.get_column("at"), convert(pairs.get_column(name)), self.height)

    def drop(self, name: str) -> None:
        """Release column `name`, if the batch still holds it."""
        if name in self.frame.columns:
            self.frame.drop_in_place(name)
        self.sparse.pop(name, None)


# A column is held as (row, value) pairs when they take at most this share of its dense bytes.
SPARSE_SHARE = 0.6


def _held_sparse(frame: pl.DataFrame, texts: pl.Series) -> HeldBatch:
    """A batch's held columns (key columns aside) with a value on few rows as (row, value) pairs."""
    nulls = frame.null_count().row(0)
    sparse = {}
    for name, n in zip(frame.columns, nulls):
        column = frame.get_column(name)
        if name in KEY_COLUMNS or n == 0:
            continue
        dense = (column.to_physical() if isinstance(column.dtype, pl.Categorical) else column).estimated_size()
        width = dense / max(frame.height, 1)
        if (frame.height - n) * (4 + width) <= SPARSE_SHARE * dense:
            present = column.is_not_null()
            sparse[name] = pl.DataFrame({"at": present.arg_true(), name: column.filter(present)})
    return HeldBatch(frame.drop(list(sparse)), texts, sparse, frame.height)


def _held_columns(table: pl.DataFrame) -> list[tuple[str, pl.DataType]]:
    """The columns a batch keeps until assembly: the key columns, and those with a value on some
    row (the others come back as constants)."""
    nulls = table.null_count().row(0)
    return [(c, t) for c, t, n in zip(table.columns, table.dtypes, nulls) if n < table.height or c in KEY_COLUMNS]


class LabelPool:
    """The pool of 2-byte codes a read's label columns share (schema.label_dtype), filled as its
    batches are held: assembly then gathers them as they are, instead of moving every label of
    the table from polars' global pool (4-byte codes) into it (0.3-0.4 s at 1M lines, and 2 bytes
    a row less for each label column while the batches wait). Once its distinct texts would pass
    LABEL_TEXTS_MAX it is `full`: every label of the table then stays in polars' global pool
    (`stored`)."""

    def __init__(self) -> None:
        self.dtype = label_dtype()
        self.size = 0  # texts in the pool: codes are numbered from 0 as texts come
        self.full = False

    def held(self, column: pl.Series) -> pl.Series:
        """A label column (text or Categorical) in the pool, or in the global pool once it is full."""
        if not self.full:
            try:
                coded = column.cast(self.dtype)
            except pl.exceptions.ComputeError:  # more texts than 2-byte codes hold
                self.full = True
            else:
                top = coded.to_physical().max()
                self.size = max(self.size, top + 1 if top is not None else 0)
                self.full = self.size > LABEL_TEXTS_MAX
                if not self.full:
                    return coded
        return column.cast(pl.Categorical)

    def stored(self) -> pl.DataType:
        """The type of the assembled table's label columns."""
        return pl.Categorical() if self.full else self.dtype


def _held_frame(
    table: pl.DataFrame, held_expr: Callable[[str, pl.DataType], pl.Expr], labels: LabelPool,
) -> pl.DataFrame:
    """The columns of `table` a batch keeps (_held_columns), each as `held_expr(name, dtype)`
    gives it, but its text label columns (`source` aside) in the pool `labels`."""
    held = _held_columns(table)
    pooled = {
        c for c, t in held
        if c in LABEL_COLUMNS and c != "source" and (t == pl.String or isinstance(t, pl.Categorical))
    }
    frame = table.select(held_expr(c, t) for c, t in held if c not in pooled)
    if pooled:
        frame = frame.with_columns(labels.held(table[c]) for c in pooled).select([c for c, _ in held])
    return frame


def held_for_assembly(table: pl.DataFrame, coded: tuple[str, ...], labels: LabelPool) -> HeldBatch:
    """`table` (canonical columns, text as String) as held until assembly; its label columns
    (`source` aside) are held in the pool `labels`, which the batches of one table share."""
    frame = _held_frame(
        table, lambda c, t: pl.col(c) if c in coded else pl.col(c).cast(pl.Categorical if c == "source" else stored_dtype(t)),
        labels,
    )
    codes, texts, offset = [], [], 0
    # Each column numbered by a pool of polars' own (the fastest way polars numbers texts; one pool
    # shared by the columns, filled by all of them at once, took twice the time), read while the
    # column lives (polars empties a pool no column uses any more); the column's codes follow the
    # texts of the columns before it. The batch's texts are then sorted (_sorted_dictionary).
    for name in (c for c in coded if c in frame.columns):
        pool = pl.Categories.random()
        column = frame[name].cast(pl.String).cast(pl.Categorical(pool))
        codes.append((column.to_physical().cast(textcodes.CODE_TYPE) + offset).alias(name))
        texts.append(_pool_texts(column, pool))
        offset += texts[-1].len()
        del column
    dictionary = pl.concat(texts) if texts else pl.Series("text", [], dtype=pl.String)
    dictionary, codes = _sorted_dictionary(dictionary, codes, coded)
    return _held_sparse(frame.with_columns(codes), dictionary.rename("text"))


def _sorted_dictionary(dictionary: pl.Series, codes: list[pl.Series], coded: tuple[str, ...]) -> tuple[pl.Series, list[pl.Series]]:
    """A batch's dictionary sorted (each text once), and its coded columns' codes into it, as
    Texts.merged gives them. Assembly merges the texts of every batch at once (Texts.merged
    again), which the rest of the run waits for, in half the time when each batch's are in order
    already (84 against 187 ms for 1.42M texts at 1M lines); each batch's own sort runs on the
    normalising thread, beside the read."""
    merged, (remap,) = Texts.merged([dictionary], coded)
    return merged.values, [remap.gather(c).alias(c.name) for c in codes]


def _pool_texts(column: pl.Series, pool: pl.Categories) -> pl.Series:
    """The texts of a column's own pool by code, from its distinct values. polars'
    `Categories.to_series` walks the pool in Python, holding the GIL the reading thread also
    needs."""
    distinct = column.unique().drop_nulls()
    pairs = pl.DataFrame({"code": distinct.to_physical(), "text": distinct.cast(pl.String)}).sort("code")
    if pairs.height == 0 or pairs["code"][-1] == pairs.height - 1:  # codes 0..n-1, each with its text
        return pairs["text"]
    return pool.to_series().cast(pl.String).rename("text")


def held_from_coded(
    table: pl.DataFrame, dictionary: pl.Series, coded: tuple[str, ...], compact: bool, labels: LabelPool,
) -> HeldBatch:
    """Rows as the cache holds them (coded columns as codes into `dictionary`, other text
    Categorical) as held until assembly; with `compact`, the dictionary keeps only the texts
    these rows use; the label columns (`source` aside) are held in the pool `labels`."""
    # Categorical to Categorical directly: through text, the label columns took 0.4 GB more at 1M lines.
    frame = _held_frame(
        table, lambda c, t: pl.col(c).cast(stored_dtype(pl.String)) if isinstance(t, pl.Categorical) and c != "source" else pl.col(c),
        labels,
    )
    if compact:
        frame, dictionary = Texts.compacted(frame, dictionary, coded)
    return _held_sparse(frame, dictionary.rename("text"))


def assemble(tables: list[HeldBatch], config: Config, labels: LabelPool) -> tuple[pl.DataFrame, Texts]:
    """One canonical table of batches held for assembly (sorted by time, then source and line),
    and the dictionary of its coded columns; `labels`: the pool the batches' labels were held in."""
    table, _, texts = assemble_held(
        tables, canonical_schema(config.business_keys), None, None, coded_columns(config.business_keys), labels,
    )
    return table, texts


def rows_within(table, since: datetime | None, until: datetime | None):
    """The rows of a frame or lazy frame in [since, until] (None: unbounded)."""
    if since is not None:
        table = table.filter(pl.col("ts") >= since)
    if until is not None:
        table = table.filter(pl.col("ts") <= until)
    return table


def assemble_held(
    tables: list[HeldBatch], schema: dict[str, pl.DataType], since: datetime | None, until: datetime | None,
    coded: tuple[str, ...], labels: LabelPool,
) -> tuple[pl.DataFrame, int, Texts]:
    """One table of every block, sorted by time, then source and line; (table, rows outside
    --since/--until, the dictionary of its coded columns). `tables` (blocks may lack all-null
    columns) is emptied on the way. `labels`: the pool the blocks' label columns were held in
    (held_for_assembly); the paths of `source` join it here.

    Built one column at a time, each block's column released once gathered (sorting the whole
    table would hold it twice). A column null in every row stays a constant (no 16 bytes a row
    of string views), and `source` points into one small buffer of the distinct paths instead
    of a copy of its path on every row. The blocks' dictionaries merge into one, and each
    block's codes are mapped into it as its column is gathered.
    """
    label_type = None  # the type the label columns are gathered in (set below; an empty table keeps stored_dtype's)

    def held_type(name: str, dtype: pl.DataType) -> pl.DataType:
        if label_type is not None and name in LABEL_COLUMNS:
            return label_type
        return textcodes.CODE_TYPE if name in coded else stored_dtype(dtype)

    frames = [t.frame for t in tables]
    if sum(t.height for t in tables) == 0:
        return pl.DataFrame(schema={c: held_type(c, t) for c, t in schema.items()}), 0, Texts.empty(coded)
    texts, remaps = Texts.merged([t.texts for t in tables], coded)
    batches = list(tables)
    tables.clear()
    for t in batches:
        t.texts = t.texts.clear()  # merged into `texts`: released before the columns are gathered
    paths = pl.concat([t["source"].cast(pl.String).unique() for t in frames]).unique().sort()
    # The sort keys with each row's file as its rank among the paths (4 bytes, not a text's 16),
    # and only the order sorted: a sorted copy of the keys would be one more copy of them.
    keys = pl.concat([t.select("ts", "line").with_columns(_file_ranks(t["source"], paths)) for t in frames],
                     how="vertical").with_row_index("__row")
    before = keys.height
    keys = rows_within(keys, since, until)
    by = keys.select(pl.arg_sort_by("ts", "__file", "line", maintain_order=True)).to_series()
    order, files = keys["__row"].gather(by), keys["__file"].gather(by)
    del keys, by
    source = labels.held(paths)  # the paths take their place in the pool too (or all go to the global one)
    label_type = labels.stored()
    columns: list = []
    constants: list[pl.Expr] = []
    # Columns are gathered two at a time on two threads (a gather runs on one, and polars releases
    # the GIL while it works): the rest of the run waits for this step. A column's blocks are
    # taken out of the batches here, in this thread, and released once it is gathered.
    with ThreadPoolExecutor(max_workers=min(pl.thread_pool_size(), ASSEMBLE_THREADS)) as pool:
        for name, dtype in schema.items():
            if name == "source":
                columns.append(source.gather(files).alias("source"))
            elif not any(t.holds(name) for t in batches):
                constants.append(pl.lit(None, dtype=held_type(name, dtype)).alias(name))
            else:
                stored = held_type(name, dtype)
                pieces = [
                    t.take(name, remap.gather if name in coded else lambda v, to=stored: v.cast(to))
                    for t, remap in zip(batches, remaps)
                ]
                columns.append(pool.submit(_gathered, pieces, order, name, stored))
                del pieces
            for t in batches:
                t.drop(name)
        columns = [c.result() if isinstance(c, Future) else c for c in columns]
    table = pl.DataFrame(columns).with_columns(constants).select(list(schema))
    return table, before - order.len(), texts


def _file_ranks(source: pl.Series, paths: pl.Series) -> pl.Series:
    """`__file`: each row's file as its rank among `paths` (sorted; every path of the Categorical
    `source` is there), looked up by the few distinct codes of the batch rather than by each
    row's text (0.05 s instead of 0.1 s at 1M lines)."""
    if source.is_empty():  # replace_strict gives an empty series back in its own type, not UInt32
        return pl.Series("__file", [], dtype=pl.UInt32)
    distinct = source.unique()
    ranks = paths.search_sorted(distinct.cast(pl.String)).cast(pl.UInt32)
    return source.to_physical().replace_strict(distinct.to_physical(), ranks, return_dtype=pl.UInt32).alias("__file")


def _gathered(pieces: list[pl.Series | SparsePiece], order: pl.Series, name: str, dtype: pl.DataType) -> pl.Series:
    """The blocks' pieces of a column, one after the other, taken in `order`."""
    column = pl.concat([spread(p, dtype) if isinstance(p, SparsePiece) else p for p in pieces], how="vertical")
    pieces.clear()  # the blocks, released before the gathered copy is made
    return column.gather(order).alias(name)


def spread(piece: SparsePiece, dtype: pl.DataType) -> pl.Series:
    """A sparse piece as one value a row, null where a row has none."""
    if piece.values is None:
        return pl.repeat(None, piece.height, dtype=dtype, eager=True)
    where = pl.repeat(None, piece.height, dtype=pl.UInt32, eager=True)
    return piece.values.gather(where.scatter(piece.at, pl.int_range(piece.values.len(), dtype=pl.UInt32, eager=True)))


def held_column(apart: pl.DataFrame, name: str, start: int, length: int) -> pl.Series:
    """Column `name` of a table whose near-empty columns are held apart (`apart`: the rows with a
    value in one, their position as `rid`; correlate.held_apart), one value a row of rows
    [start, start + length), null where none."""
    held = apart
    if start > 0 or (apart.height and apart["rid"].max() >= length):
        held = apart.filter(pl.col("rid").is_between(start, start + length - 1))
    piece = SparsePiece(held["rid"].cast(pl.Int64) - start, held.get_column(name), length)
    return spread(piece, apart.schema[name]).alias(name)


class PackRows:
    """The table of a files' pack store deferred until after the output (ingest), which lets go
    of the near-empty columns a correlation holds apart as the correlated read does
    (pipeline.correlated_read): held whole, they took 23 MiB of every step after the read at 1M
    lines, the cache writes after the report among them. The pack then stores them apart too.
    `store()` runs the store once (when deferred, or sooner: pipeline stores the pack before it
    lets go of the read's table), then lets go of the rows."""

    def __init__(self, table: pl.DataFrame, store: Callable[[PackRows], None] | None = None) -> None:
        self.table: pl.DataFrame | None = table
        self.apart: pl.DataFrame | None = None
        self._store = store

    def store(self) -> None:
        """Store the pack, unless it was stored already; then let go of the rows."""
        if self._store is None:
            return
        store, self._store = self._store, None
        try:
            store(self)
        finally:
            self.table = self.apart = None

    def hold_apart(self, whole: pl.DataFrame, table: pl.DataFrame, apart: pl.DataFrame | None) -> None:
        """Hold `table` and `apart` (correlate.held_apart of `whole`) instead, if `whole` is this table."""
        if apart is not None and whole is self.table:
            self.table, self.apart = table, apart

    def whole(self) -> pl.DataFrame:
        """The table, its columns held apart spread again (in no particular column order)."""
        if self.apart is None:
            return self.table
        names = [c for c in self.apart.columns if c != "rid"]
        return self.table.with_columns(held_column(self.apart, n, 0, self.table.height) for n in names)

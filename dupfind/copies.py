"""Records a file holds exactly as an earlier input file does (one log read twice): counted once."""

from __future__ import annotations

import polars as pl

# What may differ between two files that hold one record: where it was read, and how it was
# wrapped (a container runtime's file of a worker's stdout beside the worker's own log file).
WHERE_READ = ("source", "line", "format", "stream")
# Files a warning names; the others are counted.
NAMED = 5


def without_copies(table: pl.DataFrame) -> tuple[pl.DataFrame, list[list]]:
    """`table` (sorted by time, then file and line, as assembly sorts it) without each record an
    earlier file holds exactly (every column but WHERE_READ: time, event, ids, worker, ...), and for
    each file that held such records [its path, the earlier file's, how many], by path.

    Read twice (a log downloaded twice, `worker.log` and `worker (1).log`; two overlapping exports
    of one pod), each of those records was a duplicate of itself: the quiet baseline with one log
    copied reported harmful duplicates. Two events of one worker in two files are not one record:
    they differ in time (to the log's precision) or in a field. Only records that share their time
    with a neighbour in the sorted table are compared (at 1M lines: 10 ms to find them, 50 ms to
    compare the fifth of them that do)."""
    if table.height < 2:
        return table, []
    ts = table.get_column("ts")
    tied = (ts == ts.shift(1)) | (ts == ts.shift(-1))
    if not tied.any():
        return table, []
    compared = [c for c in table.columns if c not in WHERE_READ]
    candidates = table.with_row_index("__row").filter(tied)
    same = candidates.select("__row", "source", __h=candidates.select(compared).hash_rows())
    same = same.filter(pl.col("__h").is_duplicated())
    if same.height == 0:
        return table, []
    # The earliest of each record's copies is in the earliest file: the table is in that order.
    same = same.with_columns(of=pl.col("source").first().over("__h")).filter(pl.col("source") != pl.col("of"))
    if same.height == 0:  # repeated within one file: records of their own (a retry in the same second)
        return table, []
    found = same.group_by(pl.col("source").cast(pl.String), pl.col("of").cast(pl.String)).agg(pl.len().alias("n"))
    # A file copied from several: named with the file it shares most with (the first by path of equals).
    found = found.sort(["source", "n", "of"], descending=[False, True, False]).unique("source", keep="first", maintain_order=True)
    kept = table.filter(~pl.int_range(pl.len(), dtype=pl.UInt32).is_in(same.get_column("__row").implode()))
    return kept, [[path, of, n] for path, of, n in found.iter_rows()]


def merged_copies(parts: list[list[list]]) -> list[list]:
    """The copies of several reads of parts of the inputs (windows of time) as one list: per file,
    the largest count any read found (windows overlap: a sum would count some records twice)."""
    best: dict[str, list] = {}
    for copies in parts:
        for path, of, n in copies:
            if path not in best or n > best[path][2]:
                best[path] = [path, of, n]
    return [best[path] for path in sorted(best)]


def copies_warning(copies: list[list]) -> str | None:
    """The report's warning of records counted once because an earlier file holds them too."""
    if not copies:
        return None
    if len(copies) == 1:
        [[path, of, n]] = copies
        return f"{n} records of {path} are exactly records of {of} (time, event, ids, worker): counted once, as one log read twice."
    named = ", ".join(f"{n} of {path} (as in {of})" for path, of, n in copies[:NAMED])
    more = f", and records of {len(copies) - NAMED} more files" if len(copies) > NAMED else ""
    return (
        f"{sum(n for _, _, n in copies)} records of {len(copies)} files are exactly records of earlier files (time, event, "
        f"ids, worker): counted once, as logs read twice: {named}{more}."
    )

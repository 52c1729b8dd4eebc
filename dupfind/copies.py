"""Records counted once: those an earlier input file holds exactly (one log read twice), and a
file's records each written several times over (a logging handler attached twice)."""

from __future__ import annotations

import polars as pl

# What may differ between two files that hold one record: where it was read, and how it was
# wrapped (a container runtime's file of a worker's stdout beside the worker's own log file).
# `stream` also tells apart a record a logger wrote to stdout and again to stderr.
WHERE_READ = ("source", "line", "format", "stream")
# Files a warning names; the others are counted.
NAMED = 5
# A process's repeats in a file are its logger's own (every record written k times) when at least
# ECHO_SHARE of its lifecycle records (kinds other than "other") come k times over, k the same for most of them,
# and it has ECHO_MIN_RECORDS of them: a retry in the same instant repeats one or two, a handler
# attached twice repeats every line, and an idle poll loop's "other" lines decide nothing.
ECHO_SHARE = 0.9
ECHO_MIN_RECORDS = 10
# Whose repeats are judged together: one process's records in one file.
LOGGER = ("source", "process_id")


def without_copies(table: pl.DataFrame) -> tuple[pl.DataFrame, list[list]]:
    """`table` (sorted by time, then file and line, as assembly sorts it) without each record an
    earlier file holds exactly (every column but WHERE_READ: time, event, ids, worker, ...), nor the
    repeats of a file's process whose every record was written k times, and for each file that held
    such records [its path, the earlier file's, how many] or [its path, its path, how many, k], by path.

    Read twice (a log downloaded twice, `worker.log` and `worker (1).log`; two overlapping exports
    of one pod), each of those records was a duplicate of itself: the quiet baseline with one log
    copied reported harmful duplicates; so did it with one worker's logger writing each line twice.
    Two events of one worker in two files are not one record: they differ in time (to the log's
    precision) or in a field; within one file, a record written twice is kept unless all that
    process wrote there is written so (ECHO_SHARE), and then a record written 2k times is two. Only records
    that share their time with a neighbour in the sorted table are compared (at 1M lines: 10 ms to
    find them, 50 ms to compare the fifth of them that do)."""
    if table.height < 2:
        return table, []
    ts = table.get_column("ts")
    tied = (ts == ts.shift(1)) | (ts == ts.shift(-1))
    if not tied.any():
        return table, []
    compared = [c for c in table.columns if c not in WHERE_READ]
    candidates = table.with_row_index("__row").filter(tied)
    same = candidates.select("__row", "source", "process_id", "kind", __h=candidates.select(compared).hash_rows())
    same = same.filter(pl.col("__h").is_duplicated())
    if same.height == 0:
        return table, []
    # The earliest of each record's copies is in the earliest file: the table is in that order.
    same = same.with_columns(of=pl.col("source").first().over("__h"))
    copied = same.filter(pl.col("source") != pl.col("of"))
    echoed, echoes = _echoes(table, same.filter(pl.col("source") == pl.col("of")))
    if copied.height == 0 and echoed.len() == 0:
        return table, []
    found = copied.group_by(pl.col("source").cast(pl.String), pl.col("of").cast(pl.String)).agg(pl.len().alias("n"))
    # A file copied from several: named with the file it shares most with (the first by path of equals).
    found = found.sort(["source", "n", "of"], descending=[False, True, False]).unique("source", keep="first", maintain_order=True)
    dropped = pl.concat([copied.get_column("__row"), echoed])
    kept = table.filter(~pl.int_range(pl.len(), dtype=pl.UInt32).is_in(dropped.implode()))
    listed = [[path, of, n] for path, of, n in found.iter_rows()] + echoes
    return kept, sorted(listed, key=lambda entry: (entry[0], entry[1] == entry[0]))


def _echoes(table: pl.DataFrame, own: pl.DataFrame) -> tuple[pl.Series, list[list]]:
    """The rows to drop of each file's processes whose every record was written k times over
    (`own`: the repeated records of each file that is the first to hold them; row, source,
    process, kind, hash), and [path, path, rows dropped, k] for each file that held them (k the
    largest of its processes'). A process, not a file: a pool's children may log twice where
    their parent, on the same file, logs once (a handler attached again in each child). A
    process with too few records to judge (a worker's lines that name no process) follows its
    file as a whole."""
    groups = own.group_by(*LOGGER, "__h").agg(pl.len().alias("c"), pl.col("kind").first() != "other", pl.col("__row"))
    lifecycle = groups.filter(pl.col("kind") & (pl.col("c") >= 2)).select(*LOGGER, "c")
    if lifecycle.height == 0:
        return pl.Series("__row", [], pl.UInt32), []
    records = (table.filter(pl.col("source").is_in(lifecycle.get_column("source").implode()) & (pl.col("kind") != "other"))
               .group_by(LOGGER).agg(pl.len().alias("records")))
    by_process = _written_over(lifecycle, records, LOGGER)
    by_file = _written_over(lifecycle, records.group_by("source").agg(pl.col("records").sum()), ("source",))
    loggers = (records.join(by_process, on=LOGGER, how="left", nulls_equal=True)
               .join(by_file.rename({"k": "file_k"}), on="source", how="left")
               .select(*LOGGER, k=pl.when(pl.col("records") >= ECHO_MIN_RECORDS).then("k").otherwise("file_k"))
               .drop_nulls("k"))
    if loggers.height == 0:
        return pl.Series("__row", [], pl.UInt32), []
    # each record written c = m * k times is m records: its first m lines are kept (a group's rows
    # are in the table's order: by line)
    rows = (groups.join(loggers, on=LOGGER, nulls_equal=True).filter(pl.col("c") % pl.col("k") == 0)
            .select("source", "k", pl.col("__row").list.slice(pl.col("c") // pl.col("k"))).explode("__row"))
    counted = rows.group_by(pl.col("source").cast(pl.String)).agg(pl.len().alias("n"), pl.col("k").max())
    return rows.get_column("__row"), [[path, path, n, k] for path, n, k in counted.sort("source").iter_rows()]


def _written_over(lifecycle: pl.DataFrame, records: pl.DataFrame, by: tuple[str, ...]) -> pl.DataFrame:
    """`by` and k for each logger (`by`: a file's process, or a file) whose lifecycle records
    (`records` of them; `lifecycle`: the count `c` of each repeated one) come k times over."""
    # k: the count most of a logger's repeated records come in (the smallest of equals)
    k = (lifecycle.group_by(*by, "c").agg(pl.len().alias("groups"))
         .sort([*by, "groups", "c"], descending=[*(False for _ in by), True, False], nulls_last=True)
         .unique(by, keep="first").select(*by, k="c"))
    stats = lifecycle.join(k, on=by, nulls_equal=True).group_by(by).agg(
        k=pl.col("k").first(),
        fitting=((pl.col("c") % pl.col("k")) == 0).sum(),
        repeated_groups=pl.len(),
        repeated_rows=pl.col("c").sum(),
    )
    # a logger's distinct records: those written once, and one of each repeated
    stats = stats.join(records, on=by, nulls_equal=True).with_columns(
        distinct=pl.col("records") - pl.col("repeated_rows") + pl.col("repeated_groups"))
    stats = stats.filter((pl.col("records") >= ECHO_MIN_RECORDS) & (pl.col("fitting") >= ECHO_SHARE * pl.col("distinct")))
    return stats.select(*by, "k")


def merged_copies(parts: list[list[list]]) -> list[list]:
    """The copies of several reads of parts of the inputs (windows of time) as one list: per file
    and earlier file, the largest count any read found (windows overlap: a sum would count some
    records twice)."""
    best: dict[tuple[str, str], list] = {}
    for copies in parts:
        for entry in copies:
            key = (entry[0], entry[1])
            if key not in best or entry[2] > best[key][2]:
                best[key] = list(entry)
    return [best[key] for key in sorted(best, key=lambda key: (key[0], key[1] == key[0], key[1]))]


def copies_warning(copies: list[list]) -> str | None:
    """The report's warning of records counted once: because an earlier file holds them too, or
    because a file's logger wrote every record several times."""
    read_twice = [entry for entry in copies if entry[0] != entry[1]]
    written_over = [entry for entry in copies if entry[0] == entry[1]]
    said = [text for text in (_read_twice_warning(read_twice), _written_over_warning(written_over)) if text]
    return " ".join(said) or None


def _read_twice_warning(copies: list[list]) -> str | None:
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


def _written_over_warning(echoes: list[list]) -> str | None:
    if not echoes:
        return None
    if len(echoes) == 1:
        [[path, _, n, k]] = echoes
        return (f"The logger of {path} wrote each record {_times(k)} (a logging handler attached {_times(k)}?): "
                f"{n} repeated records counted once.")
    named = ", ".join(f"{path} ({_times(k)})" for path, _, _, k in echoes[:NAMED])
    more = f", and {len(echoes) - NAMED} more files" if len(echoes) > NAMED else ""
    return (
        f"The loggers of {len(echoes)} files wrote each record several times (a logging handler attached more than "
        f"once?): {sum(n for _, _, n, _ in echoes)} repeated records counted once: {named}{more}."
    )


def _times(k: int) -> str:
    return {2: "twice", 3: "three times"}.get(k, f"{k} times")

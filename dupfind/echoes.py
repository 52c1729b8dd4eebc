"""Records a file holds more than once because its logger or its export wrote them again, not the service."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dupfind.schema import ORIGIN_COLUMN

# A logger's repeats in a file are its own (every record written k times: a logging handler
# attached twice) when at least ECHO_SHARE of its lifecycle records (kinds other than "other")
# come k times over, k the same for most of them, and it has ECHO_MIN_RECORDS of them: a retry in
# the same instant repeats one or two, a handler attached twice repeats every line, and an idle
# poll loop's "other" lines decide nothing.
ECHO_SHARE = 0.9
ECHO_MIN_RECORDS = 10
# A stretch of records each written twice, one after the other (a log shipper's retry re-sending a
# batch, two overlapping exports joined into one file): at least STRETCH_MIN records in a row of
# one or several loggers, STRETCH_LIFECYCLE of them lifecycle records. A service repeats one
# action's few lines, and a poll loop to the second repeats one line.
STRETCH_MIN = 8
STRETCH_LIFECYCLE = 3
# Runs of several loggers of one file this close in time are one batch.
STRETCH_GAP = timedelta(seconds=2)
# Whose repeats are judged together: one worker's process's records in one file (a pool's
# children may log twice where their parent, on the same file, logs once; an export of a
# platform's logs holds many workers).
LOGGER = ("source", "worker_id", "process_id")
PROCESS = LOGGER[1:]
# The fourth item of a file's entry whose repeated stretches were counted once (else: k).
STRETCHES = "stretches"
# Where a log pipeline collected a record: a record held again with the same origin was delivered
# again, whatever its neighbours (a quiet worker's two lines in a re-sent batch).
ORIGIN = ORIGIN_COLUMN
# The fourth item of a file's entry of records delivered again.
SENT_AGAIN_MARK = "sent again"
# A record a file's logger holds again the same to the microsecond, its time written below the
# millisecond (a digit of it not 0): written or delivered again, whatever its neighbours. A
# service that does one thing twice logs it twice at two instants: no call, retry or redelivery
# comes back within the microsecond. A log pipeline re-sending a chunk does repeat it exactly
# (Fluent Bit's chunks hold one file's records: a quiet pod's two lines), as a logger writing each
# record twice does. To the millisecond or coarser, a retry in the same instant repeats a record.
INSTANT_MARK = "same microsecond"


def within_files(table: pl.DataFrame, own: pl.DataFrame) -> tuple[pl.Series, list[list]]:
    """The rows to drop of the records a file holds again because its logger or its export wrote
    them again (`own`: the repeated records of each file that is the first to hold them: row,
    logger, kind, hash `__h`), and for each file [path, path, rows dropped, k] (every record of
    some of its loggers written k times, k the largest), [path, path, rows dropped, STRETCHES],
    [path, path, rows dropped, SENT_AGAIN_MARK] (delivered again: `own`'s ORIGIN the same) or
    [path, path, rows dropped, INSTANT_MARK] (the rest of a logger's repeats that are the same to
    the microsecond)."""
    resent = (own.filter(pl.col(ORIGIN).is_not_null() & (pl.int_range(pl.len()).over("source", "__h", ORIGIN) > 0))
              if ORIGIN in own.columns else own.clear())
    resent_rows = resent.get_column("__row")
    if resent.height:
        own = own.filter(~pl.col("__row").is_in(resent_rows.implode()))
    sent_again = _entries(resent, SENT_AGAIN_MARK)
    groups = (own.group_by(*LOGGER, "__h").agg(pl.len().alias("c"), pl.col("kind").first() != "other", pl.col("__row"))
              .filter(pl.col("c") >= 2))
    if groups.height == 0:
        return resent_rows, sent_again
    groups = groups.join(_written_over(table, groups, resent_rows), on=LOGGER, how="left", nulls_equal=True)
    # each record written c = m * k times is m records: its first m lines are kept (a group's rows
    # are in the table's order: by line)
    written_over = pl.col("c") % pl.col("k") == 0
    over = (groups.filter(written_over)
            .select("source", "k", pl.col("__row").list.slice(pl.col("c") // pl.col("k"))).explode("__row"))
    stretched = _in_stretches(table, groups.filter(pl.col("k").is_null()), resent_rows)
    again = stretched.select("source", pl.col("__row").list.slice(1)).explode("__row")
    # what the logger's k and the stretches left of each record: more than once, the same to the
    # microsecond, it is one record
    left = (groups.join(stretched, on=[*LOGGER, "__h"], how="anti", nulls_equal=True)
            .with_columns(pl.when(written_over).then(pl.col("__row").list.slice(0, pl.col("c") // pl.col("k")))
                          .otherwise("__row").alias("__row")))
    instant = _same_microsecond(table, left.filter(pl.col("__row").list.len() > 1))
    entries = [
        *([path, path, n, k] for path, n, k in _per_file(over.group_by("source").agg(pl.len().alias("n"), pl.col("k").max()))),
        *_entries(again, STRETCHES),
        *sent_again,
        *_entries(instant, INSTANT_MARK),
    ]
    rows = [resent_rows, over.get_column("__row"), again.get_column("__row"), instant.get_column("__row")]
    return pl.concat(rows), entries


def _same_microsecond(table: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame:
    """The rows after the first of each repeated record (`groups`) whose time has a digit below
    the millisecond (INSTANT_MARK): source and row."""
    firsts = groups.get_column("__row").list.first()
    below_ms = table.get_column("ts").gather(firsts).dt.microsecond() % 1000 != 0
    return groups.filter(below_ms.fill_null(False)).select("source", pl.col("__row").list.slice(1)).explode("__row")


def _entries(dropped: pl.DataFrame, mark: str) -> list[list]:
    """[path, path, rows dropped, mark] for each file of the `dropped` rows, by path."""
    return [[path, path, n, mark] for path, n in _per_file(dropped.group_by("source").agg(pl.len().alias("n")))]


def _per_file(counted: pl.DataFrame) -> list[tuple]:
    return counted.with_columns(pl.col("source").cast(pl.String)).sort("source").rows()


def _written_over(table: pl.DataFrame, groups: pl.DataFrame, resent: pl.Series) -> pl.DataFrame:
    """The loggers (LOGGER) whose every record was written k times over, and k. A logger with too
    few lifecycle records in its file to judge follows the same worker's process over every file
    (an export cut into many small files), or, naming no worker (an API's access log beside its
    publishes) or too few there too, its file as a whole. `resent`: rows delivered again, not
    counted."""
    lifecycle = groups.filter(pl.col("kind")).select(*LOGGER, "c")
    if lifecycle.height == 0:
        return pl.DataFrame(schema={**table.select(LOGGER).schema, "k": pl.UInt32})
    lifecycle_records = table.select(*LOGGER, "kind")
    if resent.len():
        lifecycle_records = lifecycle_records.filter(~pl.int_range(pl.len(), dtype=pl.UInt32).is_in(resent.implode()))
    lifecycle_records = lifecycle_records.filter(pl.col("kind") != "other")
    records = (lifecycle_records.filter(pl.col("source").is_in(lifecycle.get_column("source").implode()))
               .group_by(LOGGER).agg(pl.len().alias("records")))
    named = lifecycle.filter(pl.col("worker_id").is_not_null())
    worker_records = (lifecycle_records.filter(pl.col("worker_id").is_in(named.get_column("worker_id").unique().implode()))
                      .group_by(PROCESS).agg(pl.len().alias("worker_records")))
    by_logger = _k_times(lifecycle, records, LOGGER)
    by_process = _k_times(named, worker_records.rename({"worker_records": "records"}), PROCESS)
    by_file = _k_times(lifecycle, records.group_by("source").agg(pl.col("records").sum()), ("source",))
    loggers = groups.select(LOGGER).unique().join(records, on=LOGGER, how="left", nulls_equal=True)
    return (loggers.with_columns(pl.col("records").fill_null(0))
            .join(by_logger, on=LOGGER, how="left", nulls_equal=True)
            .join(worker_records, on=PROCESS, how="left", nulls_equal=True)
            .join(by_process.rename({"k": "process_k"}), on=PROCESS, how="left", nulls_equal=True)
            .join(by_file.rename({"k": "file_k"}), on="source", how="left")
            .select(*LOGGER, k=pl.when(pl.col("records") >= ECHO_MIN_RECORDS).then("k")
                    .when(pl.col("worker_id").is_not_null() & (pl.col("worker_records") >= ECHO_MIN_RECORDS)).then("process_k")
                    .otherwise("file_k"))
            .drop_nulls("k"))


def _k_times(lifecycle: pl.DataFrame, records: pl.DataFrame, by: tuple[str, ...]) -> pl.DataFrame:
    """`by` and k for each logger (`by`: a file's logger, or a file) whose lifecycle records
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


def _in_stretches(table: pl.DataFrame, groups: pl.DataFrame, resent: pl.Series) -> pl.DataFrame:
    """The repeated records (`groups`) that lie in a stretch of records each written twice, none
    written once between them (in the file's order): the file's records in a row, or a
    logger's, alone or with the other loggers' such runs of the file that reach within
    STRETCH_GAP of it (a shipper's batch holds what all the pods of its node logged meanwhile);
    STRETCH_MIN records in all, STRETCH_LIFECYCLE of them lifecycle records. `resent`: rows
    delivered again, not in the file's order."""
    groups = groups.filter(pl.col("c") == 2)
    if groups.height == 0:
        return groups
    groups = groups.with_row_index("__g")
    firsts = groups.select("__g", "kind", __row=pl.col("__row").list.first())
    seconds = pl.concat([groups.get_column("__row").list.last(), resent])
    # each of the files' records once, in the order they were written (by line: a log a little out
    # of time order at a stretch's end would cut it short): those written once, and the first of
    # each pair
    records = (table.with_row_index("__row").filter(pl.col("source").is_in(groups.get_column("source").unique().implode()))
               .select("__row", "ts", "line", *LOGGER).filter(~pl.col("__row").is_in(seconds.implode()))
               .join(firsts, on="__row", how="left").sort("source", "line"))
    paired = (records.with_columns(run=pl.col("__g").is_null().cum_sum().over(LOGGER),
                                   file_run=pl.col("__g").is_null().cum_sum().over("source"))
              .filter(pl.col("__g").is_not_null()))
    # a stretch of the file: its records in a row, whoever logged them (two exports overlapping)
    in_file = (paired.with_columns(length=pl.len().over("source", "file_run"),
                                   lifecycle=pl.col("kind").sum().over("source", "file_run"))
               .filter(_enough()).get_column("__g"))
    runs = (paired.group_by(*LOGGER, "run").agg(
                start=pl.col("ts").min(), end=pl.col("ts").max(), length=pl.len(), lifecycle=pl.col("kind").sum())
            .sort("source", "start"))
    # the runs of several loggers of a file that reach one another in time, as one batch (an
    # export of many nodes: the others' records, written once, come between them); a batch needs
    # several loggers: one logger's runs, a record it wrote once between them, are not joined
    reach = pl.col("end").cum_max().shift(1).over("source") + STRETCH_GAP
    runs = runs.with_columns(batch=(pl.col("start") > reach).fill_null(True).cum_sum())
    batches = (runs.group_by("batch")
               .agg(length=pl.col("length").sum(), lifecycle=pl.col("lifecycle").sum(),
                    loggers=pl.struct(PROCESS).n_unique())
               .filter((pl.col("loggers") > 1) & _enough()))
    runs = runs.filter(pl.col("batch").is_in(batches.get_column("batch").implode()) | _enough())
    in_runs = paired.join(runs.select(*LOGGER, "run"), on=[*LOGGER, "run"], nulls_equal=True).get_column("__g")
    return groups.filter(pl.col("__g").is_in(in_file.implode()) | pl.col("__g").is_in(in_runs.implode()))


def _enough() -> pl.Expr:
    return (pl.col("length") >= STRETCH_MIN) & (pl.col("lifecycle") >= STRETCH_LIFECYCLE)

"""A framework log named after its file takes the worker whose records of the same jobs it repeats."""

from __future__ import annotations

import polars as pl

from dupfind.ingest_result import FileReport

# The moments of one job's run both a framework's own log and the application's log write (Celery:
# "Task ... received" and the app's job_received; "succeeded" and job_finished), by the kinds that
# tell them: a run's beginning is the framework's receive or the app's start (Dramatiq's
# `Received message` and the app's job_started, 1-2 ms apart), its end an ack or a finish. And how
# close in time the two records of one moment are (two processes' clocks are one host's).
ECHO_MOMENTS = {"receive": "begin", "start": "begin", "finish": "end", "ack": "end", "fail": "fail", "retry": "retry"}
ECHO_KINDS = tuple(ECHO_MOMENTS)
ECHO_WITHIN_US = 1_000_000
# Of a file's records of those kinds, the share one other worker repeats for it to be that worker,
# at least this many of them, and against the next most repeating worker, this many times as many.
ECHO_SHARE = 0.5
ECHO_MIN_RECORDS = 3
ECHO_LEAD = 4


def echoed_workers(table: pl.DataFrame, reports: list[FileReport], renamed: set[str] = frozenset()) -> dict[str, tuple[str, str]]:
    """Source path -> (the worker it was named after, the worker whose records it repeats), for
    each framework log named after its file (no banner in it: a `kubectl logs --since` export of a
    Celery worker) whose records of its jobs' runs, most of them, another worker's records repeat
    at the same moment: that worker's application log names the process the framework's log does
    not (before, one process under two names ran each job twice, in false DF103s). `renamed`: paths
    already named after another part of their log (file_workers)."""
    named = {r.path: r.named_worker for r in reports if r.named_worker and not r.context_worker and r.path not in renamed}
    if not named or table.height == 0:
        return {}
    sources = pl.DataFrame({"source": list(named), "file_worker": list(named.values())}, schema={"source": pl.String, "file_worker": pl.String})
    records = table.lazy().select(
        pl.col("source").cast(pl.String), pl.col("worker_id").cast(pl.String), pl.col("kind").cast(pl.String), "job_id", "ts",
    ).filter(pl.col("kind").is_in(ECHO_KINDS) & pl.col("job_id").is_not_null() & pl.col("worker_id").is_not_null()).with_columns(
        moment=pl.col("kind").replace_strict(ECHO_MOMENTS),
    )
    own = records.join(sources.lazy(), on="source").filter(pl.col("worker_id") == pl.col("file_worker"))
    others = records.join(sources.lazy(), on="source", how="anti").select(
        "job_id", "moment", pl.col("worker_id").alias("other"), pl.col("ts").alias("other_ts"),
    )
    apart = (pl.col("other_ts") - pl.col("ts")).dt.total_microseconds().abs()
    repeated = (
        own.with_row_index("row").join(others, on=["job_id", "moment"]).filter(apart <= ECHO_WITHIN_US)
        .select("source", "row", "other").unique()
        .group_by("source", "other").len()
    )
    totals = own.group_by("source").agg(total=pl.len(), file_worker=pl.col("file_worker").first())
    ranked = (
        repeated.join(totals, on="source").sort("source", "len", "other", descending=[False, True, False])
        .group_by("source", maintain_order=True)
        .agg(pl.col("other").first(), best=pl.col("len").first(), runner=pl.col("len").get(1, null_on_oob=True),
             total=pl.col("total").first(), file_worker=pl.col("file_worker").first())
        .collect()
    )
    found = ranked.filter(
        (pl.col("best") >= ECHO_MIN_RECORDS) & (pl.col("best") >= ECHO_SHARE * pl.col("total"))
        & (pl.col("runner").is_null() | (pl.col("best") >= ECHO_LEAD * pl.col("runner")))
    )
    return {source: (worker, other) for source, worker, other in found.select("source", "file_worker", "other").iter_rows()}

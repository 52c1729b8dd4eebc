"""The rotated parts of one framework log take the worker its banner names, from whichever part holds it."""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from dupfind.ingest_result import FileReport
from dupfind.sources import log_stem


def part_workers(reports: list[FileReport]) -> dict[str, tuple[str, str]]:
    """Source path -> (the worker it was named after, the worker to name instead), for each part of
    a rotated framework log (`celery.log`, `celery.log.1`, `celery.log.2.gz`) that names no worker
    of its own: Celery names its node once, in the banner and `ready.` line a worker writes when it
    starts, which only the oldest part holds. Such a part is the worker of the latest part before it
    (by first record) whose own lines named one; a part before any of them keeps its file's name."""
    logs: dict[str, list[FileReport]] = defaultdict(list)
    for report in reports:
        if report.context_worker or report.named_worker:
            logs[log_stem(report.path)].append(report)
    renames: dict[str, tuple[str, str]] = {}
    for parts in logs.values():
        if len(parts) < 2 or not any(part.context_worker for part in parts):
            continue
        named = None
        for part in sorted(parts, key=lambda r: (r.first_ts is None, r.first_ts.timestamp() if r.first_ts else 0.0, r.path)):
            if part.context_worker:
                named = part.context_worker
            elif named and part.named_worker and part.named_worker != named:
                renames[part.path] = (part.named_worker, named)
    return renames


def with_part_workers(table: pl.DataFrame, renames: dict[str, tuple[str, str]]) -> pl.DataFrame:
    """`table` with the rows of each renamed part that carry its file's worker given the other."""
    if not renames or table.height == 0:
        return table
    dtype = table.schema["worker_id"]
    worker = pl.col("worker_id")
    for path, (old, new) in renames.items():
        worker = pl.when((pl.col("source") == path) & (pl.col("worker_id") == old)).then(pl.lit(new).cast(dtype)).otherwise(worker)
    return table.with_columns(worker.alias("worker_id"))

"""Workers named after their log file: one for a log's rotated parts, one each for two hosts' logs of one name."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from datetime import datetime

import polars as pl

from dupfind.echoed_workers import echoed_workers
from dupfind.ingest_result import FileReport
from dupfind.sources import log_owner


def naming_reports(reports: list[FileReport] | None) -> list[FileReport]:
    """The reports of `reports` (every input's) that may name the workers of a read of some of the
    inputs (a read of a time): those of framework logs, which a worker's banner or file names."""
    return [r for r in reports or [] if r.context_worker or r.named_worker]


def naming_state(report: FileReport) -> list:
    """What of a report names workers, as JSON data: path, context worker, named worker, first record time."""
    return [report.path, report.context_worker, report.named_worker, report.first_ts.isoformat() if report.first_ts else None]


def naming_report(state: list) -> FileReport:
    """The report naming_state describes."""
    path, context, named, first = state
    return FileReport(path, context_worker=context, named_worker=named,
                      first_ts=datetime.fromisoformat(first) if first else None)


def part_workers(reports: list[FileReport]) -> dict[str, tuple[str, str]]:
    """Source path -> (the worker it was named after, the worker to name instead), for each part of
    a rotated framework log (`celery.log`, `celery.log.1`, `celery.log.2.gz`; a log stream's objects
    exported to S3, `<stream>/000000.gz`, `000001.gz`: sources.log_owner) that names no worker
    of its own: Celery names its node once, in the banner and `ready.` line a worker writes when it
    starts, which only the oldest part holds. Such a part is the worker of the latest part before it
    (by first record) whose own lines named one; a part before any of them keeps its file's name."""
    logs: dict[str, list[FileReport]] = defaultdict(list)
    for report in reports:
        if report.context_worker or report.named_worker:
            logs[log_owner(report.path)].append(report)
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


def host_workers(reports: list[FileReport], renamed: set[str] = frozenset()) -> dict[str, tuple[str, str]]:
    """Source path -> (the worker it was named after, that name with the folders that tell it
    apart), for framework logs of one file name in several folders (`vm-1/sidekiq.log` and
    `vm-2/sidekiq.log`, collected from two hosts) that name no worker of their own: each is its
    host's worker, `vm-1/sidekiq` (before, one worker ran the jobs of both, on two threads).
    `renamed`: paths named otherwise already (their banner's node, the worker that repeats them)."""
    logs: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))  # name -> folder -> paths
    for report in reports:
        if report.named_worker and not report.context_worker and report.path not in renamed:
            logs[report.named_worker][posixpath.dirname(log_owner(report.path))].append(report.path)
    renames: dict[str, tuple[str, str]] = {}
    for name, folders in logs.items():
        if len(folders) < 2:
            continue
        split = {folder: folder.split("/") for folder in folders}
        depth = 1  # the fewest last folders that tell every folder apart
        while len({tuple(parts[-depth:]) for parts in split.values()}) < len(split) and depth < max(map(len, split.values())):
            depth += 1
        for folder, paths in folders.items():
            qualified = "/".join([*split[folder][-depth:], name]).lstrip("/")
            renames.update({path: (name, qualified) for path in paths if qualified != name})
    return renames


def with_file_workers(table: pl.DataFrame, reports: list[FileReport]) -> pl.DataFrame:
    """`table` with the workers named after their files named as their logs say (`reports`: every
    input's, also when `table` holds some of their records: a window's): a rotated part after its
    banner, then a log without one after the worker whose records it repeats, then two hosts' logs
    of one name apart."""
    parts = part_workers(reports)
    table = with_part_workers(table, parts)
    echoes = echoed_workers(table, reports, set(parts))
    table = with_part_workers(table, echoes)
    return with_part_workers(table, host_workers(reports, {*parts, *echoes}))


def with_part_workers(table: pl.DataFrame, renames: dict[str, tuple[str, str]]) -> pl.DataFrame:
    """`table` with the rows of each renamed file that carry its old worker given the new one (one
    join, however many files: hundreds of hosts' logs of one name are as many renames)."""
    if not renames or table.height == 0:
        return table
    names = pl.DataFrame(
        [(path, old, new) for path, (old, new) in renames.items()], orient="row",
        schema={"source": pl.String, "worker_id": pl.String, "renamed": pl.String},
    )
    keys = table.select(pl.col("source").cast(pl.String), pl.col("worker_id").cast(pl.String))
    renamed = keys.join(names, on=["source", "worker_id"], how="left", maintain_order="left")["renamed"]
    return table.with_columns(pl.coalesce(renamed.cast(table.schema["worker_id"]), pl.col("worker_id")).alias("worker_id"))

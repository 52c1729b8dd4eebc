"""What `trace` and `stats` take of inputs read in windows of time (dupfind.windows)."""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from dupfind import schema
from dupfind.analysis import id_column_names
from dupfind.errors import DupfindError
from dupfind.file_workers import naming_reports
from dupfind.memory_check import log_bytes, part_needed_bytes
from dupfind.pipeline import ingest_with_progress
from dupfind.sources import expand_inputs
from dupfind.timefmt import iso
from dupfind.windows import WINDOW_BLOCK_BYTES, Window, duration_text, gigabytes, say, spans_into

if TYPE_CHECKING:
    from rich.console import Console

    from dupfind.analyze import AnalysisReport
    from dupfind.config import Config
    from dupfind.ingest import FileReport, IngestResult
    from dupfind.windows import Spill

# -- trace ------------------------------------------------------------------------------------


def carrying(queries: list[str], columns: list[str]) -> Callable[[list[str]], pl.Expr | None]:
    """The test of a record carrying a queried id (as `trace` reads a query: a value in any id
    column, or COLUMN=VALUE in that column), given the columns a batch of records has; None when
    none of them can."""
    from dupfind.trace import parse_query

    parsed = [parse_query(query, columns) for query in queries]

    def test(present: list[str]) -> pl.Expr | None:
        tests = [
            pl.col(c).cast(pl.String) == value
            for column, value in parsed for c in ([column] if column else columns) if c in present
        ]
        return pl.any_horizontal(tests) if tests else None

    return test


def records_carrying(queries: list[str], columns: list[str]) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """A survey's `keep`: the rows of a normalised batch that carry a queried id, with their time alone."""
    test = carrying(queries, columns)

    def keep(batch: pl.DataFrame) -> pl.DataFrame:
        found = test(batch.columns)
        return batch.filter(found).select("ts", "source", "line") if found is not None else batch.clear()

    return keep


def around_finding(finding, overlap: timedelta) -> tuple[str, str] | None:
    """--since/--until around a finding's span, `overlap` each side; None for a finding without a time."""
    first, last = finding.first_ts, finding.last_ts or finding.first_ts
    if first is None:
        return None
    return iso(first - overlap), iso(last + overlap)


def files_for_read(paths: list[str], files: list[FileReport], read_from: datetime | str | None,
                   read_to: datetime | str | None) -> list[str]:
    """The inputs to read for the records of [read_from, read_to] when a survey or the windows gave
    each file's span: the files with a record in it (the others would be read only to drop every
    line); `paths` as given when a span is unknown (standard input) or no file holds one."""
    def at(bound: datetime | str | None) -> datetime | None:
        return datetime.fromisoformat(bound) if isinstance(bound, str) else bound

    start, end = at(read_from), at(read_to)
    if not files or any(f.path == "-" for f in files):
        return paths
    chosen = [f.path for f in files if f.first_ts is not None and spans_into(f.first_ts, f.last_ts, start, end)]
    return chosen or paths


def bounded_read(
    held: float, total: int, size: int, budget: int, first: datetime, last: datetime, overlap: timedelta, what: str,
) -> tuple[datetime, datetime]:
    """The read around `first`..`last` with `overlap` each side (`held` of the inputs' `total`
    records, by the survey's counts or the files' spans), when it fits."""
    read_from, read_to = first - overlap, last + overlap
    needed = _needed(size, held, total)
    # A read over the budget that still spares most of the inputs is the best there is (reading
    # alone needs about 0.5 GB); one that holds most of them would be killed as a whole read is.
    if needed > budget and held > total / 2:
        raise DupfindError(
            f"{what} span {iso(first)} to {iso(last)}: with {duration_text(overlap)} around them that needs about "
            f"{gigabytes(needed)} of memory, more than the {gigabytes(budget)} there is; narrow the read with --since/--until."
        )
    return read_from, read_to


def _needed(size: int, held: float, total: int) -> float:
    """The memory a read of `held` of the inputs' `total` records needs (their `size` bytes of log
    text spread evenly over them)."""
    return part_needed_bytes(size * held / max(total, 1))


def _counted(survey: IngestResult, read_from: datetime, read_to: datetime) -> tuple[int, int]:
    """Records in [read_from, read_to] and in all, by the survey's counts per second."""
    counts = survey.time_counts
    total = int(counts["records"].sum()) if counts is not None and counts.height else 0
    held = int(counts.filter(pl.col("second").is_between(read_from - timedelta(seconds=1), read_to))["records"].sum()) \
        if total else 0
    return held, total


def _spread(files: list[FileReport], read_from: datetime | None, read_to: datetime | None) -> tuple[float, int]:
    """Records in [read_from, read_to] (None: unbounded) and in all, each file's taken as spread
    evenly over its span."""
    return _held(_file_spans(files), read_from, read_to), sum(f.records for f in files)


def _file_spans(files: list[FileReport]) -> pl.DataFrame:
    """The files with records: their first and last record times and their records."""
    spans = [(f.first_ts, f.last_ts, f.records) for f in files if f.first_ts is not None]
    return pl.DataFrame(spans, schema={"first": schema.TS_TYPE, "last": schema.TS_TYPE, "records": pl.Int64}, orient="row")


def _held(spans: pl.DataFrame, read_from: datetime | None, read_to: datetime | None) -> float:
    """The records of these file spans in [read_from, read_to], each file's spread evenly over its
    span (in one pass over the spans: the timeline of every deploy asks this of every file for
    each deploy, 1,377 x 4,155 times at 5M lines)."""
    first, last = pl.col("first"), pl.col("last")
    start = first if read_from is None else pl.max_horizontal(first, pl.lit(read_from, dtype=schema.TS_TYPE))
    end = last if read_to is None else pl.min_horizontal(last, pl.lit(read_to, dtype=schema.TS_TYPE))
    reaching = pl.lit(True)
    if read_from is not None:
        reaching &= last >= pl.lit(read_from, dtype=schema.TS_TYPE)
    if read_to is not None:
        reaching &= first <= pl.lit(read_to, dtype=schema.TS_TYPE)

    def seconds(delta: pl.Expr) -> pl.Expr:  # as timedelta.total_seconds() gives them
        return delta.dt.total_microseconds() / 1_000_000

    span = seconds(last - first)
    share = pl.when(span > 0).then(seconds(end - start) / span).otherwise(1.0)
    return float(spans.select((pl.col("records") * share).filter(reaching).sum()).item())


def read_fits(paths: list[str], files: list[FileReport], budget: float,
              ) -> Callable[[datetime | None, datetime | None], bool] | None:
    """Whether a read of [read_from, read_to] of these inputs fits in `budget` bytes, by the files'
    spans (their records spread evenly over each); None when no read does (reading alone needs
    more), so that smaller reads would only be more of them."""
    size = log_bytes(expand_inputs(paths))
    if part_needed_bytes(0) >= budget:
        return None
    spans, total = _file_spans(files), sum(f.records for f in files)

    def fits(read_from: datetime | None, read_to: datetime | None) -> bool:
        return _needed(size, _held(spans, read_from, read_to), total) <= budget

    return fits


# Texts every format writes as they are (JSON escapes none of these characters).
_LITERAL = re.compile(r"[A-Za-z0-9_.:@+#-]+")


def files_mentioning(files: list[FileReport], values: list[str]) -> list[str] | None:
    """Of the files with records, those whose bytes hold one of `values` (a record carrying a value
    holds its text); None when that cannot be told by a byte search: a compressed file, or a value
    a format may write escaped."""
    if not values or not all(_LITERAL.fullmatch(v) for v in values):
        return None
    needles = [v.encode() for v in values]
    found = []
    for f in files:
        if f.first_ts is None:
            continue
        if f.compression != "none" or f.path == "-":
            return None
        try:
            with open(f.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as text:
                if any(text.find(n) >= 0 for n in needles):
                    found.append(f.path)
        except (OSError, ValueError):  # gone, or emptied since it was read
            return None
    return found


def trace_bounds(
    paths: list[str], config: Config, queries: list[str], since: datetime | None, until: datetime | None,
    budget: int, overlap: timedelta, stderr: Console | None = None, files: list[FileReport] | None = None,
    spill: Spill | None = None,
) -> tuple[datetime, datetime, list[str], list[FileReport]] | None:
    """For inputs too large to read whole: the time to read for a trace of these ids (their
    records' span with `overlap` each side), found by a survey that keeps only the records
    carrying them, the inputs that hold records in it and the reports that name their workers
    (naming_reports); None when no record does. With the
    records the stored analysis in windows of time kept (`spill`), those are searched instead of
    the files; with every input's report (`files`, as that analysis gives them), the survey reads
    only the files whose text holds an id queried."""
    from dupfind.trace import parse_query

    columns = list(dict.fromkeys(id_column_names(config)))
    size = log_bytes(expand_inputs(paths))
    if spill is not None:
        carried = spill.scan(carrying(queries, columns))
        if carried is not None and carried.height == 0:
            return None
        if carried is not None:
            first, last = carried["ts"].min(), carried["ts"].max()
            counted = spill.records_between(first - overlap, last + overlap), spill.records_between(None, None)
            if None not in counted:
                say(f"the records of {', '.join(queries)} were found in the records the analysis in windows of time "
                    "kept.")
                read_from, read_to = _trace_read(queries, counted, size, budget, first, last, overlap, since, until)
                return read_from, read_to, files_for_read(paths, files or [], read_from, read_to), naming_reports(files)
    mentioning = None
    maps = [config.value_maps, *(p.values for p in config.presets)]  # a value renamed is not its text
    if files is not None and not any(c in m for m in maps for c in columns):
        mentioning = files_mentioning(files, [parse_query(q, columns)[1] for q in queries])
        if mentioning == []:
            return None
        if mentioning is not None:
            held = sum(f.first_ts is not None for f in files)
            say(f"the text of {', '.join(queries)} is in {len(mentioning)} of the {held} files with records: "
                "surveying those.")
    survey = ingest_with_progress(mentioning or paths, config, since, until, stderr, survey=True,
                                  keep=records_carrying(queries, columns), block_bytes=WINDOW_BLOCK_BYTES)
    if survey.table.height == 0:
        return None
    first, last = survey.table["ts"].min(), survey.table["ts"].max()
    spans = files if mentioning is not None else survey.files
    counted = _spread(spans, first - overlap, last + overlap) if mentioning is not None \
        else _counted(survey, first - overlap, last + overlap)
    read_from, read_to = _trace_read(queries, counted, size, budget, first, last, overlap, since, until)
    return read_from, read_to, files_for_read(paths, spans, read_from, read_to), naming_reports(spans)


def _trace_read(queries: list[str], counted: tuple[float, int], size: int, budget: int, first: datetime,
                last: datetime, overlap: timedelta, since: datetime | None, until: datetime | None,
                ) -> tuple[datetime, datetime]:
    """The read around the queried ids' records (`first`..`last`, `counted` records of all in it
    with `overlap` each side), within --since/--until, when it fits; said on stderr."""
    read_from, read_to = bounded_read(*counted, size, budget, first, last, overlap, f"the records of {', '.join(queries)}")
    read_from, read_to = max(read_from, since or read_from), min(read_to, until or read_to)
    say(f"these inputs are too large to read whole: the records of {', '.join(queries)} span {iso(first)} to "
         f"{iso(last)}; reading {iso(read_from)} to {iso(read_to)}.")
    return read_from, read_to


# -- stats ------------------------------------------------------------------------------------


def _shifted(frame: pl.DataFrame, action_offset: int, exec_offset: int) -> pl.DataFrame:
    """Ids moved past the earlier windows', labels as text (no Categorical outlives its window)."""
    from dupfind.schema import as_strings

    moved = [pl.col(c) + action_offset for c in ("action_id",) if c in frame.columns]
    moved += [pl.col(c) + exec_offset for c in ("exec_id", "prev_exec_id") if c in frame.columns]
    return as_strings(frame.with_columns(moved))


def stats_aside(bucket_s: float | None) -> dict[str, Any]:
    """run_windowed's options for what `stats` shows besides the analysis (its tables for this
    --bucket, None: the default), gathered window by window and stored beside the analysis."""
    from dupfind.queue_stats import stats_from
    from dupfind.windows import STATS_PLANNED_SHARE

    def tables(report: AnalysisReport, parts: list) -> dict:
        stats = stats_from(report, merge_stats_facts(parts), bucket_s)
        return {name: getattr(stats, name) for name in ("queues", "deployments", "timeline", "timeouts")}

    return {"collect": stats_collector, "share": STATS_PLANNED_SHARE,
            "derived": ("stats", {"bucket_s": bucket_s}, tables)}


def stats_collector(report: AnalysisReport, window: Window, owned: pl.Series, action_offset: int,
                    exec_offset: int):
    """A Collector for `stats`: the window's own part of what stats counts (queue_stats.StatsFacts):
    rows of its own actions, and by their time rows that belong to none."""
    from dupfind.queue_stats import StatsFacts, TimeoutFacts, lost_actions, stats_facts
    from dupfind.schema import as_strings

    ctx = report.context
    facts = stats_facts(ctx, lost_actions(report))
    mine = pl.col("action_id").is_in(owned.implode())
    own_or_held = mine | (pl.col("action_id").is_null() & window.holds("ts"))

    def own(frame: pl.DataFrame, keep: pl.Expr = mine) -> pl.DataFrame:
        return _shifted(frame.filter(keep), action_offset, exec_offset)

    records, *per_action = facts.counts
    statements = as_strings(ctx.columns(*ctx.present_columns("queue", "visibility_timeout_s", "timeout_name", "service", "ts")).filter(
        pl.col("visibility_timeout_s").is_not_null() & window.holds("ts")
    )).drop("ts")
    queues = ctx.action_attributes.select("action_id", pl.col("queue").alias("action_queue"))
    extended = (
        as_strings(ctx.columns("kind", "action_id", "queue", "ts").filter(pl.col("kind") == "lease_extended"))
        .join(queues, on="action_id", how="left").filter(own_or_held)
    )
    extensions = dict(extended.group_by(pl.coalesce("queue", "action_queue").fill_null("").alias("q")).len().rows())
    held = ctx.columns("ts").filter(window.holds("ts"))["ts"]
    t = facts.timeouts
    # Held until the last window: only the columns grouping reads. Records only feed sums and the
    # distinct dead-lettered messages: summed here per label (a 5M-line export's windows held 2M
    # rows of them), which grouping sums again the same way.
    labels = ["queue", "job_type", "deployment"]
    flags = ["published", "received", "started", "retried", "lease_expired_logged"]
    records = own(records, own_or_held).group_by(*labels, "dead_letter").agg(pl.col(flags).sum())
    execs, gaps, extra, lost = (own(frame) for frame in per_action)
    return StatsFacts(
        counts=[records, execs.select(*labels, "finished", "failed", "duration_s"), gaps.select(labels),
                extra.select(labels), lost.select(labels)],
        deliveries=own(facts.deliveries).select(*labels, "published_at", "delivered_at"),
        events=facts.events.filter(window.holds("ts")),  # stats_facts keeps only a deploy's deployment
        redelivered=own(facts.redelivered).select("ts", "kind"),
        end_of_logs=held.max() if held.len() else None,
        timeouts=TimeoutFacts(
            t.timeouts, statements, own(t.execution_durations).select("exec_id", "queue", "service", "duration_s"),
            own(t.redelivery_gaps).select("queue", "gap_s", "prev_exec_id", "after_kill"), extensions,
        ),
    )


def merge_stats_facts(parts: list) -> Any:
    """One StatsFacts of the windows' own parts."""
    from dupfind.queue_stats import StatsFacts, TimeoutFacts

    def joined(frames: list[pl.DataFrame]) -> pl.DataFrame:
        return pl.concat(frames, how="vertical_relaxed")

    ends = [p.end_of_logs for p in parts if p.end_of_logs is not None]
    extensions: dict[str, int] = {}
    for part in parts:
        for queue, count in part.timeouts.lease_extensions.items():
            extensions[queue] = extensions.get(queue, 0) + count
    return StatsFacts(
        counts=[joined([p.counts[i] for p in parts]) for i in range(len(parts[0].counts))],
        deliveries=joined([p.deliveries for p in parts]),
        events=joined([p.events for p in parts]),
        redelivered=joined([p.redelivered for p in parts]),
        end_of_logs=max(ends) if ends else None,
        timeouts=TimeoutFacts(
            parts[0].timeouts.timeouts,
            joined([p.timeouts.timeout_statements for p in parts]),
            joined([p.timeouts.execution_durations for p in parts]),
            joined([p.timeouts.redelivery_gaps for p in parts]),
            extensions,
        ),
    )

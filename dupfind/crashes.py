"""A process's report of an uncaught exception printed after its last line: the worker crashed."""

from __future__ import annotations

import polars as pl

from dupfind.lineparse import LEVEL_FIELD, parse_logfmt, parse_plain
from dupfind.stack_lines import CRASH_HEADER, FATAL_HEADER, QUIET_LEVELS, values_at_lines
from dupfind.textcodes import Texts

# A crash report's first line (stack_lines.CRASH_HEADER: Python's excepthook and fatal error, Go's
# unrecovered panic and fatal runtime error, Node's, V8's, .NET's, PHP's and Ruby's), for polars;
# those only an ending process prints (FATAL_HEADER: all but Python's traceback). A logger's own
# traceback follows its ERROR line and is that record's; the JVM's `Exception in thread "main"`
# ends the process only when no other thread holds it, and is not read as a crash.
CRASH_HEADER_EXPR = f"^(?:{CRASH_HEADER.pattern})"
_FATAL_HEADER_EXPR = f"^(?:{FATAL_HEADER.pattern})"

# Raw columns of a JSON record a crash report was printed after (ingest): how many lines after
# the record the report begins (a batch of small files numbers its lines apart from each file's
# own, a distance is the same in both), and that line's text.
CRASH_OFFSET = "_crash_offset"
CRASH_TEXT = "_crash_text"
# What a crash report's record keeps of the record it was printed after: where it was written,
# and by which process; not the ids that make it a job's.
_KEPT = ("ts", "ts_naive", "source", "format", "worker_id", "process_id", "deployment_id", "stream")


def crash_reports(owners: dict[int, int], texts: dict[int, str], json_lines: set[int],
                  quiet: set[int] = frozenset(), ending_after_any: bool = False) -> dict[int, tuple[int, str]]:
    """The stack traces joined to a record (`owners`: a trace's line -> its record's line) that
    are a crash report, by record line: (the report's first line, its text). After a JSON record
    (`json_lines`): a JSON logger writes an exception inside its record, plain trace lines after
    one are the runtime's on the same stream. After a line of text or logfmt at a level that
    reports no error (`texts` holds it: logrus' `level=info msg="sending push"`, then Go's panic;
    or `quiet`, records read so by their caller): a logger's own traceback follows its ERROR line.
    `ending_after_any`: after any record, a report only an ending process prints (FATAL_HEADER;
    a framework's records, whose lines no logger's trace repeats)."""
    first: dict[int, int] = {}
    for line, owner in owners.items():
        if line > owner and (owner not in first or line < first[owner]):
            first[owner] = line
    return {owner: (line, texts[line]) for owner, line in first.items()
            if line in texts and CRASH_HEADER.match(texts[line])
            and (owner in json_lines or owner in quiet or (owner in texts and _quiet(texts[owner]))
                 or (ending_after_any and FATAL_HEADER.match(texts[line]) is not None))}


def _quiet(text: str) -> bool:
    """Whether a line of text or logfmt says a level that reports no error: its word after the
    time, or its `level=` pair."""
    record = parse_logfmt(text) or parse_plain(text) or {}
    level = next((record[k] for k in (LEVEL_FIELD, "level", "lvl", "severity") if k in record), None)
    return level is not None and level.strip().lower() in QUIET_LEVELS


def with_crash_columns(raw: pl.DataFrame, crashes: dict[int, tuple[int, str]], line_column: str) -> pl.DataFrame:
    """A block's raw records with CRASH_OFFSET and CRASH_TEXT on those a crash report followed."""
    offsets = values_at_lines(raw[line_column], {owner: line - owner for owner, (line, _) in crashes.items()}, pl.Int64)
    if offsets is None:
        return raw
    return raw.with_columns(
        offsets.alias(CRASH_OFFSET),
        values_at_lines(raw[line_column], {owner: text for owner, (_, text) in crashes.items()}, pl.String).alias(CRASH_TEXT),
    )


def crash_records(owners: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """One record per crash report after a record of `owners` (rows with `__crash_offset`, their
    exception in `__crash_error`): the report's first line, its text the message, its exception
    the stack trace; kind `other` until with_crashes has seen what the worker did next."""
    return owners.select(
        *[pl.col(c).cast(t) if c in _KEPT else pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c != "line"],
        line=(pl.col("line") + pl.col("__crash_offset")).cast(schema["line"]),
    ).with_columns(
        kind=pl.lit("other", dtype=pl.String),
        message=owners["__crash_text"],
        stack_trace=owners["__crash_error"],
    ).select(list(schema))


def with_crashes(table: pl.DataFrame, texts: Texts) -> pl.DataFrame:
    """The assembled table (copies counted once), each crash report's record (its first line, with
    the exception of the trace after it, of kind `other`) made a `worker_exit` where nothing of its
    worker follows it in its file, or the first of its worker's records that follow and are not of
    kind `other` is the worker starting again (its restart's banner, after its connections' lines):
    a worker that goes on with its work printed a traceback and lived. A report only an ending
    process prints (stack_lines.FATAL_HEADER: all but Python's) is the worker's end whatever
    follows (its restart by a supervisor, its next job). A report that
    names no worker (the runtime's lines on stderr, in a pod's log beside its JSON records) is the
    worker's of the record before it in its file."""
    if "stack_trace" not in table.columns or table["stack_trace"].null_count() == table.height:
        return table
    # Only the few rows with a stack trace, and the files that hold them, are cast and looked at.
    at = table["stack_trace"].is_not_null().arg_true()
    # (A report's first line read as a line of text may say a failure: `PHP Fatal error: ...`.)
    at = at.filter(table["kind"].gather(at).cast(pl.String).is_in(["other", "fail"]))
    messages = table["message"].gather(at)
    if messages.dtype != pl.String:
        messages = texts.decode(messages)
    crash = messages.str.contains(CRASH_HEADER_EXPR).fill_null(False)
    fatal = at.filter(crash & messages.str.contains(_FATAL_HEADER_EXPR).fill_null(False))
    at = at.filter(crash)
    if not len(at):
        return table
    where = table.select("source", "worker_id", "line", "kind").with_row_index("row")
    rows = (
        where.filter(pl.col("source").is_in(where["source"].gather(at).unique().implode()))
        .with_columns(pl.col(pl.Categorical).cast(pl.String)).sort("line")
    )
    candidates = rows.filter(pl.col("row").is_in(at.implode()))
    named = rows.filter(pl.col("worker_id").is_not_null()).select("source", prev_line="line", prev_worker="worker_id")
    candidates = candidates.join_asof(
        named, left_on="line", right_on="prev_line", by="source", strategy="backward", allow_exact_matches=False,
        check_sortedness=False,
    ).select("row", "source", "line", worker=pl.coalesce("worker_id", "prev_worker"))
    after = rows.select("source", worker=pl.col("worker_id").fill_null(""), next_line="line", next_kind="kind")
    following = candidates.with_columns(pl.col("worker").fill_null(""))
    for kept, name in ((after, "next_kind"), (after.filter(pl.col("next_kind") != "other"), "next_work")):
        following = following.join_asof(
            kept.rename({"next_kind": name}), left_on="line", right_on="next_line", by=["source", "worker"],
            strategy="forward", allow_exact_matches=False, check_sortedness=False,
        ).drop("next_line")
    # The restart's own lines (`connected to redis`) may come before its banner; a runtime's report
    # that only an ending process prints needs neither (a supervisor's restart may print no banner).
    ended = following.filter(
        pl.col("next_kind").is_null() | (pl.col("next_work") == "worker_start") | pl.col("row").is_in(fatal.implode())
    )
    if not ended.height:
        return table
    crashed = ended["row"].cast(pl.Int64)
    named_now = table["worker_id"].gather(crashed).cast(pl.String).to_list()
    workers = [own or found or None for own, found in zip(named_now, ended["worker"].to_list())]
    return table.with_columns(
        table["kind"].scatter(crashed, ["worker_exit"] * len(crashed)),
        table["worker_id"].scatter(crashed, workers),
    )

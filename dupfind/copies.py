"""Records counted once: those an earlier input file holds exactly (one log read twice), and those a file holds again."""

from __future__ import annotations

import polars as pl

from dupfind.echoes import INSTANT_MARK, LOGGER, ORIGIN, SENT_AGAIN_MARK, STRETCHES, within_files

# What may differ between two files that hold one record: where it was read, and how it was
# wrapped (a container runtime's file of a worker's stdout beside the worker's own log file).
# `stream` also tells apart a record a logger wrote to stdout and again to stderr. `origin_id`
# (where a log pipeline collected it) differs between the two lines of a logger writing each
# record twice, and between two pipelines collecting one file (dupfind.echoes uses it within a file).
# `stack_trace` (the exception of a stack trace after the record) is only the last copy's of a
# record a logger wrote twice: the trace follows it.
WHERE_READ = ("source", "line", "format", "stream", ORIGIN, "stack_trace")
# Files a warning names; the others are counted.
NAMED = 5
# How a copies entry's records came twice, in the order entries and warnings are listed: an earlier
# file holds them ([path, of, n]), the file's logger wrote each k times ([path, path, n, k]), the
# file holds stretches of them again ([path, path, n, STRETCHES]), its log pipeline delivered
# them again, their origin the same ([path, path, n, SENT_AGAIN_MARK]), or it holds them again
# the same to the microsecond ([path, path, n, INSTANT_MARK]).
READ_TWICE, WRITTEN_OVER, STRETCHED, SENT_AGAIN, SAME_INSTANT = range(5)


def without_copies(table: pl.DataFrame) -> tuple[pl.DataFrame, list[list]]:
    """`table` (sorted by time, then file and line, as assembly sorts it) without each record an
    earlier file holds exactly (every column but WHERE_READ: time, event, ids, worker, ...), nor the
    records a file holds again because its logger or its export wrote them again (dupfind.echoes),
    and for each file that held such records [its path, the earlier file's, how many] (and ORIGIN
    when each of them names where its pipeline collected it: a delivery again that an export's
    pages split may be one) or [its path, its path, how many, k, STRETCHES, SENT_AGAIN_MARK or INSTANT_MARK], by
    path.

    Read twice (a log downloaded twice, `worker.log` and `worker (1).log`; two overlapping exports
    of one pod), each of those records was a duplicate of itself: the quiet baseline with one log
    copied reported harmful duplicates; so did it with one worker's logger writing each line twice.
    Two events of one worker in two files are not one record: they differ in time (to the log's
    precision) or in a field; within one file, a record written twice is kept unless its logger
    wrote all its records so, or a stretch of them (dupfind.echoes). Only records that share their
    time with a neighbour in the sorted table are compared (at 1M lines: 10 ms to find them, 50 ms
    to compare the fifth of them that do)."""
    if table.height < 2:
        return table, []
    ts = table.get_column("ts")
    tied = (ts == ts.shift(1)) | (ts == ts.shift(-1))
    if not tied.any():
        return table, []
    compared = [c for c in table.columns if c not in WHERE_READ]
    candidates = table.with_row_index("__row").filter(tied)
    origin = [ORIGIN] if ORIGIN in table.columns else []
    same = candidates.select("__row", *LOGGER, "kind", *origin, __h=candidates.select(compared).hash_rows())
    same = same.filter(pl.col("__h").is_duplicated())
    if same.height == 0:
        return table, []
    # The earliest of each record's copies is in the earliest file: the table is in that order.
    same = same.with_columns(of=pl.col("source").first().over("__h"))
    copied = same.filter(pl.col("source") != pl.col("of"))
    echoed, echoes = within_files(table, same.filter(pl.col("source") == pl.col("of")))
    if copied.height == 0 and echoed.len() == 0:
        return table, []
    found = copied.group_by(pl.col("source").cast(pl.String), pl.col("of").cast(pl.String)).agg(
        pl.len().alias("n"), origin=pl.col(ORIGIN).is_not_null().all() if origin else pl.lit(False))
    # A file copied from several: named with the file it shares most with (the first by path of
    # equals), counted with all it shares.
    found = (found.with_columns(total=pl.col("n").sum().over("source"), origin=pl.col("origin").all().over("source"))
             .sort(["source", "n", "of"], descending=[False, True, False])
             .unique("source", keep="first", maintain_order=True).select("source", "of", "origin", n="total"))
    dropped = pl.concat([copied.get_column("__row"), echoed])
    kept = table.filter(~pl.int_range(pl.len(), dtype=pl.UInt32).is_in(dropped.implode()))
    listed = [[path, of, n, *([ORIGIN] if named else [])] for path, of, named, n in found.iter_rows()] + echoes
    return kept, sorted(listed, key=lambda entry: (entry[0], _way(entry)))


def merged_copies(parts: list[list[list]]) -> list[list]:
    """The copies of several reads of parts of the inputs (windows of time) as one list: per file,
    earlier file and way, the largest count any read found (windows overlap: a sum would count some
    records twice)."""
    best: dict[tuple, list] = {}
    for copies in parts:
        for entry in copies:
            key = (entry[0], _way(entry), entry[1])
            if key not in best or entry[2] > best[key][2]:
                best[key] = list(entry)
    return [best[key] for key in sorted(best)]


def copies_warning(copies: list[list]) -> str | None:
    """The report's warning of records counted once: because an earlier file holds them too, or
    because a file's logger or export wrote them again."""
    said = [warning([entry for entry in copies if _way(entry) == way]) for way, warning in enumerate(WARNINGS)]
    return " ".join(text for text in said if text) or None


def _way(entry: list) -> int:
    """How a copies entry's records came twice: READ_TWICE, WRITTEN_OVER, STRETCHED, SENT_AGAIN or SAME_INSTANT."""
    if entry[0] != entry[1]:
        return READ_TWICE
    return {STRETCHES: STRETCHED, SENT_AGAIN_MARK: SENT_AGAIN, INSTANT_MARK: SAME_INSTANT}.get(entry[3], WRITTEN_OVER)


def _read_twice_warning(copies: list[list]) -> str | None:
    def why(origin: tuple) -> str:  # pages of one export may split a record and its delivery again
        return " read twice, or delivered again by its pipeline (the same origin)" if origin else " read twice"

    return _said(
        copies,
        lambda path, of, n, *origin: f"{n} records of {path} are exactly records of {of} (time, event, ids, worker): "
                                     f"counted once, as one log{why(origin)}.",
        lambda path, of, n, *_: f"{n} of {path} (as in {of})",
        lambda files, n, named: f"{n} records of {files} files are exactly records of earlier files (time, event, ids, worker): "
                                f"counted once, as logs read twice: {named}.",
    )


def _written_over_warning(echoes: list[list]) -> str | None:
    return _said(
        echoes,
        lambda path, _, n, k: f"The logger of {path} wrote each record {_times(k)} (a logging handler attached {_times(k)}?): "
                              f"{n} repeated records counted once.",
        lambda path, _, n, k: f"{path} ({_times(k)})",
        lambda files, n, named: f"The loggers of {files} files wrote each record several times (a logging handler attached "
                                f"more than once?): {n} repeated records counted once: {named}.",
    )


def _stretches_warning(stretches: list[list]) -> str | None:
    why = "(a log shipper re-sending a batch, or overlapping exports joined into one file?)"
    return _said(
        stretches,
        lambda path, _, n, __: f"{path} holds stretches of its records twice, one after the other {why}: {n} repeated records counted once.",
        lambda path, _, n, __: f"{n} of {path}",
        lambda files, n, named: f"{files} files hold stretches of their records twice, one after the other {why}: "
                                f"{n} repeated records counted once: {named}.",
    )


def _sent_again_warning(resent: list[list]) -> str | None:
    return _held_again(resent, " with the same origin (the offset, cursor or event id its log pipeline gave it): "
                               "delivered again by the pipeline, not written again")


def _same_instant_warning(repeats: list[list]) -> str | None:
    return _held_again(repeats, ", each the same to the microsecond (time, event, ids, worker): a log pipeline "
                                "re-sending a chunk, or a logger writing twice; a service doing a thing twice logs it "
                                "at two instants")


def _held_again(entries: list[list], how: str) -> str | None:
    """The warning of records files hold again, `how` said after "records again"."""
    return _said(
        entries,
        lambda path, _, n, __: f"{path} holds {n} records again{how}: counted once.",
        lambda path, _, n, __: f"{n} of {path}",
        lambda files, n, named: f"{files} files hold records again{how}: {n} repeated records counted once: {named}.",
    )


def _said(entries: list[list], one, each, several) -> str | None:
    """A warning of `entries` (files): `one(*entry)` alone, else `several(files, records, named)`
    naming NAMED of them by `each(*entry)`."""
    if not entries:
        return None
    if len(entries) == 1:
        return one(*entries[0])
    named = ", ".join(each(*entry) for entry in entries[:NAMED])
    more = f", and {len(entries) - NAMED} more files" if len(entries) > NAMED else ""
    return several(len(entries), sum(entry[2] for entry in entries), named + more)


# The warning of each way, by READ_TWICE, WRITTEN_OVER, STRETCHED, SENT_AGAIN, SAME_INSTANT.
WARNINGS = (_read_twice_warning, _written_over_warning, _stretches_warning, _sent_again_warning, _same_instant_warning)


def _times(k: int) -> str:
    return {2: "twice", 3: "three times"}.get(k, f"{k} times")

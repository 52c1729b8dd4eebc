"""Timeline data: the workers, generations, stop signals, kills and executions of one time window."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import polars as pl

from dupfind import schema
from dupfind.analyze import AnalysisReport
from dupfind.deploy_concentration import duplicate_times, redelivery_tail_s
from dupfind.effects import duplicated_actions
from dupfind.errors import DupfindError
from dupfind.timefmt import iso

SCHEMA = "dupfind.timeline/1"


@dataclass
class Window:
    """One time window to draw, and why it was chosen."""

    start: datetime
    end: datetime
    title: str
    reason: str
    deploy: dict | None = None


ENTRY_FIELDS = ("id", "action", "ids", "worker", "process", "attempt", "start", "end", "state", "duplicate",
                "repeat", "after_stop", "side_effect_at", "where")

# What windows and a timeline document use of an analysis context, in that order (AnalysisContext.read_ahead).
TIMELINE_READS = ("timeout_statements", "deploys", "effect_counts", "duplicate_requests", "effect_marks", "executions",
                  "id_samples", "actions")


def timeline_reads(entry_fields: tuple[str, ...]) -> tuple[str, ...]:
    """TIMELINE_READS less what entries of these fields do not need (ids, the action's identity,
    the executions' side effects)."""
    unused = {"id_samples"} if "ids" not in entry_fields else set()
    unused |= {"actions"} if "action" not in entry_fields else set()
    unused |= {"effect_marks"} if not {"repeat", "side_effect_at"} & set(entry_fields) else set()
    return tuple(name for name in TIMELINE_READS if name not in unused)


def select_windows(report: AnalysisReport, deploy: str | None, around: datetime | None, width_s: float) -> list[Window]:
    """--deploy ID, or --around TIME (width centred on it), or each deploy, or the busiest duplicate period."""
    ctx = report.context
    ctx.read_ahead(*TIMELINE_READS)
    if report.summary.get("first_ts") is None:
        raise DupfindError("no records were read, so there is no timeline to draw.")
    # The first and last record times, as the summary gives them (to the microsecond, UTC).
    first, last = (datetime.fromisoformat(report.summary[k]).astimezone(UTC)
                   for k in ("first_ts", "last_ts"))
    tail = timedelta(seconds=redelivery_tail_s(ctx))
    windows = report.summary["deploys"]["windows"]
    model = ctx.deploys.windows
    if around is not None:
        half = timedelta(seconds=width_s / 2)
        return [Window(around - half, around + half, f"around {iso(around)}", "--around")]

    def for_deploy(row: dict) -> Window:
        summary = next(w for w in windows if w["deploy"] == row["deploy"])
        span = row["end"] - row["start"]
        pad = max(timedelta(seconds=20), span / 10)
        title = f"deploy {row['deploy']}" + (f" (replacing {row['previous']})" if row["previous"] else "")
        return Window(row["start"] - pad, min(row["end"] + tail, max(last, row["end"])), title, "deploy", summary)

    rows = model.sort("start").to_dicts()
    if deploy is not None:
        chosen = [r for r in rows if r["deploy"] == deploy]
        if not chosen:
            known = ", ".join(r["deploy"] for r in rows) or "none"
            raise DupfindError(f"--deploy {deploy!r} was not found in these logs (deploys found: {known}).")
        return [for_deploy(chosen[0])]
    replacing = [r for r in rows if r["previous"] is not None] or rows
    if replacing:
        return [for_deploy(r) for r in replacing]
    dups = duplicate_times(ctx)
    if dups.len():
        span = timedelta(seconds=width_s)
        values = dups.to_list()
        counts = (dups.search_sorted(dups + span, side="right") - pl.Series(range(len(values)))).to_list()
        best = max(range(len(values)), key=lambda i: (counts[i], -i))
        start = values[best] - timedelta(seconds=min(60.0, width_s / 10))
        return [Window(start, start + span, f"busiest duplicate period ({counts[best]} duplicates)", "busiest")]
    return [Window(first, last, "whole log (no deploy and no duplicate found)", "whole")]


@dataclass
class _Marks:
    """What marks an execution, the same in every window (computed once per document)."""

    duplicated: pl.Series  # actions with a certain or likely repeated side effect
    repeat_execs: pl.Series  # executions that repeated it
    effect_at: pl.DataFrame | None  # exec_id -> its first counted side-effect request (_effect_at)
    interrupted: pl.Series  # executions whose worker ended with them in flight
    after_stop: pl.Series  # executions taken after their worker's stop signal
    duplicates: pl.Series  # when each duplicate happened


def _marks(report: AnalysisReport, fields: tuple[str, ...] = ENTRY_FIELDS) -> _Marks:
    """The marks of entries of these `fields`: those of `repeat` and `side_effect_at` (the
    context's effect_marks, which an analysis in the cache stores) only when asked for."""
    ctx = report.context
    model = ctx.deploys
    duplicated = duplicated_actions(ctx.effect_counts)
    repeat_execs, effect_at = pl.Series("exec_id", [], dtype=schema.ID_TYPE), None
    if "repeat" in fields or "side_effect_at" in fields:
        marks = ctx.effect_marks
        repeat_execs = marks.filter(pl.col("repeat"))["exec_id"]
        effect_at = marks.select("exec_id", pl.col("effect_at").alias("_effect_at"))
    return _Marks(
        duplicated=duplicated,
        repeat_execs=repeat_execs,
        effect_at=effect_at,
        interrupted=model.interrupted["exec_id"],
        after_stop=model.after_stop["exec_id"],
        duplicates=duplicate_times(ctx),
    )


def _bounds(windows: list[Window], moment: pl.DataType) -> pl.DataFrame:
    """Each window's index (`_w`) and bounds (`_from`, `_to`), for inequality joins."""
    return pl.DataFrame(
        {"_w": range(len(windows)), "_from": [w.start for w in windows], "_to": [w.end for w in windows]},
        schema={"_w": pl.Int64, "_from": moment, "_to": moment},
    )


def _window_executions(report: AnalysisReport, windows: list[Window]) -> pl.DataFrame:
    """Which executions each window shows (`_w`, the window's index; `_row`, the execution's row),
    those running at some point inside it, by start time: one inequality join for every window
    instead of a filter per window."""
    ex = report.context.executions
    pairs = _bounds(windows, ex.schema["start"]).join_where(
        ex.select("start", "end").with_row_index("_row"), pl.col("start") <= pl.col("_to"), pl.col("end") >= pl.col("_from")
    )
    return pairs.sort("_w", "start", "_row", maintain_order=True).select("_w", "_row")


_ISO_MS = "%Y-%m-%dT%H:%M:%S%.3fZ"  # timefmt.iso, vectorised


def _as_fstring(column: str) -> pl.Expr:
    """A column as an f-string shows its values (None as "None")."""
    return pl.col(column).cast(pl.String).fill_null("None")


# Entry fields timeline_document itself reads (its per-worker flags, the window's workers).
_DOCUMENT_FIELDS = ("id", "worker", "state", "duplicate", "after_stop")


def _entry_frame(report: AnalysisReport, shown: pl.DataFrame, marks: _Marks,
                 fields: tuple[str, ...] = ENTRY_FIELDS) -> tuple[list[str], pl.DataFrame]:
    """One row per execution shown in any window (an execution shown in several windows is one
    entry): the id columns, and these `fields` of its entry (ENTRY_FIELDS, and `start_ms`/`end_ms`;
    ids as `id:KEY` lists) with those the document reads; the joins a field needs only for it."""
    ctx = report.context
    wanted = set(fields) | set(_DOCUMENT_FIELDS)
    frame = shown.unique("exec_id", keep="first", maintain_order=True)
    keys: list[str] = []
    if "action" in wanted:
        identities = ctx.actions.select("action_id", pl.col("identity").alias("_action"))
        frame = frame.join(identities, on="action_id", how="left", maintain_order="left")
    if "side_effect_at" in wanted:
        frame = frame.join(marks.effect_at, on="exec_id", how="left", maintain_order="left")
    if "ids" in wanted:
        ids = ctx.id_samples_of(frame["action_id"])
        keys = [c.removeprefix("id:") for c in ids.columns if c != "action_id"]
        frame = frame.join(ids, on="action_id", how="left", maintain_order="left")
    state = (
        pl.when(pl.col("exec_id").is_in(marks.interrupted.implode())).then(pl.lit("interrupted"))
        .when(pl.col("completed")).then(pl.lit("completed"))
        .when(pl.col("failed")).then(pl.lit("failed"))
        .when(pl.col("guarded")).then(pl.lit("guarded"))
        .otherwise(pl.lit("open"))
    )
    columns = {
        "id": lambda: [pl.col("exec_id").alias("id")],
        "action": lambda: [pl.coalesce("_action", pl.format("action-{}", "action_id")).alias("action")],
        "ids": lambda: [pl.col(f"id:{k}") for k in keys],
        "worker": lambda: [pl.col("worker_id").cast(pl.String).alias("worker")],
        "process": lambda: [pl.col("identity").cast(pl.String).alias("process")],
        "attempt": lambda: [pl.col("attempt")],
        "start": lambda: [pl.col("start").dt.strftime(_ISO_MS).alias("start")],
        "end": lambda: [pl.col("end").dt.strftime(_ISO_MS).alias("end")],
        # The same times as whole milliseconds since the epoch (what `start` and `end` write, as
        # numbers): the terminal view places bars by them instead of parsing the texts.
        "start_ms": lambda: [pl.col("start").dt.truncate("1ms").dt.epoch("ms").alias("start_ms")],
        "end_ms": lambda: [pl.col("end").dt.truncate("1ms").dt.epoch("ms").alias("end_ms")],
        "state": lambda: [state.alias("state")],
        "duplicate": lambda: [pl.col("action_id").is_in(marks.duplicated.implode()).alias("duplicate")],
        "repeat": lambda: [pl.col("exec_id").is_in(marks.repeat_execs.implode()).alias("repeat")],
        "after_stop": lambda: [pl.col("exec_id").is_in(marks.after_stop.implode()).alias("after_stop")],
        "side_effect_at": lambda: [pl.col("_effect_at").dt.strftime(_ISO_MS).alias("side_effect_at")],
        "where": lambda: [pl.concat_str(_as_fstring("first_source"), pl.lit(":"), _as_fstring("first_line")).alias("where")],
    }
    order = [*ENTRY_FIELDS, "start_ms", "end_ms"]
    return keys, frame.select([e for name in order if name in wanted for e in columns[name]()])


def _entry_dicts(keys: list[str], frame: pl.DataFrame, entry_fields: tuple[str, ...] = ENTRY_FIELDS) -> list[dict[str, Any]]:
    """The entries as plain data (their `entry_fields`), in the frame's order; built column by
    column (a row at a time cost twice as much)."""
    columns = {name: frame.get_column(name).to_list() for name in entry_fields if name != "ids"}
    if "ids" in entry_fields:
        lists = [(k, frame.get_column(f"id:{k}").to_list()) for k in keys]
        columns["ids"] = [{k: v for k, values in lists if (v := values[i])} for i in range(frame.height)]
    return [dict(zip(entry_fields, row)) for row in zip(*(columns[name] for name in entry_fields))]


def _json_list(values: pl.Expr) -> pl.Expr:
    """A list column as JSON text (`["a","b"]`), escaped exactly as orjson writes it."""
    return pl.struct(values.alias("v")).struct.json_encode().str.slice(5).str.head(-1)


def _ids_json(keys: list[str], frame: pl.DataFrame) -> pl.Expr:
    """An entry's `ids` as JSON text: `{"KEY":[...],...}` with only the keys it has values of."""
    if not keys:
        return pl.lit("{}")
    lists = [pl.col(f"id:{k}") for k in keys]
    if frame.select(pl.all_horizontal(c.list.len() > 0 for c in lists).fill_null(False).all()).item():
        # Every entry has every key: one object, as polars writes a struct.
        return pl.struct(c.alias(k) for c, k in zip(lists, keys)).struct.json_encode()
    present = [  # null for a key without values, left out of the object
        pl.when(c.list.len() > 0).then(pl.concat_str(pl.lit(orjson.dumps(k).decode() + ":"), _json_list(c)))
        for c, k in zip(lists, keys)
    ]
    return pl.concat_str(pl.lit("{"), pl.concat_str(present, separator=",", ignore_nulls=True), pl.lit("}"))


def _entry_json(keys: list[str], frame: pl.DataFrame) -> pl.Series:
    """Each entry as the text orjson.dumps(entry) writes for it (compact, one line): a document of
    many thousand entries is written by polars instead of built as dicts. The fields around
    `ids` are written as polars writes a struct (names and texts escaped as orjson does)."""
    at = ENTRY_FIELDS.index("ids")
    head = pl.struct(pl.col(n) for n in ENTRY_FIELDS[:at]).struct.json_encode().str.head(-1)  # {"id":..,"action":..
    tail = pl.struct(pl.col(n) for n in ENTRY_FIELDS[at + 1:]).struct.json_encode().str.tail(-1)  # "worker":..}
    entry = pl.concat_str(head, pl.lit(',"ids":'), _ids_json(keys, frame), pl.lit(","), tail)
    # Lazy, the step carries only the columns the entries read.
    return frame.lazy().select(entry.alias("json")).collect().to_series()


def entries_on_one_line(document: dict[str, Any]) -> dict[str, Any]:
    """A timeline document (as plain data) whose execution entries orjson writes on one line each
    inside an indented document, as `--format json` does: a copy, down to the workers."""
    return {**document, "windows": [
        {**window, "generations": [
            {**gen, "workers": [
                {**worker, "executions": [orjson.Fragment(orjson.dumps(e)) for e in worker["executions"]]}
                for worker in gen["workers"]
            ]}
            for gen in window["generations"]
        ]}
        for window in document["windows"]
    ]}


def _window_workers(report: AnalysisReport, windows: list[Window], shown: pl.DataFrame) -> pl.DataFrame:
    """The worker rows each window draws (`_w`), in its order: workers with an execution shown in
    it, workers told to stop while alive in it, and workers that started in it."""
    workers = report.context.deploys.workers.with_row_index("_wk")
    bounds = _bounds(windows, workers.schema["start_ts"])
    stopped = bounds.join_where(
        workers.filter(pl.col("stop_ts").is_not_null())
        .select("_wk", "start_ts", pl.coalesce("end_ts", "last_ts").alias("_last")),
        pl.col("start_ts") <= pl.col("_to"), pl.col("_last") >= pl.col("_from"),
    )
    started = bounds.join_where(
        workers.select("_wk", "start_ts"), pl.col("start_ts") >= pl.col("_from"), pl.col("start_ts") <= pl.col("_to"),
    )
    busy = shown.select("_w", "worker").unique().join(
        workers.select("_wk", pl.col("worker_id").cast(pl.String).alias("worker")), on="worker",
    )
    chosen = pl.concat([f.select("_w", "_wk") for f in (stopped, started, busy)]).unique()
    return chosen.join(workers, on="_wk").sort("_w", "start_ts", "worker_id", "_wk", maintain_order=True)


def timeline_document(report: AnalysisReport, windows: list[Window], as_json: bool = False,
                      entry_fields: tuple[str, ...] = ENTRY_FIELDS, bar_width: int | None = None) -> dict[str, Any]:
    """Everything each window's timeline shows, as plain data (times as ISO strings). With
    `as_json`, each execution's entry is already JSON text on one line (an orjson.Fragment): the
    document is then only for orjson.dumps, which writes what it writes for entries_on_one_line of
    the document without `as_json`. `entry_fields`: what a view draws of each execution (the
    terminal view: its times, state and whether it was duplicated). With `bar_width` (the terminal
    view, its DRAWN_ENTRY_FIELDS), each worker has the `cells` its row draws of its executions on a
    bar of that many columns (render.timeline_text.bar_cells: columns, glyphs, how many executions
    cover each) instead of their entries."""
    head, views = timeline_parts(report, windows, as_json, entry_fields, bar_width)
    return {**head, "windows": list(views)}


def timeline_parts(report: AnalysisReport, windows: list[Window], as_json: bool = False,
                   entry_fields: tuple[str, ...] = ENTRY_FIELDS,
                   bar_width: int | None = None) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """timeline_document as its head (all but `windows`) and its windows one at a time, each
    window's executions made Python values as it comes: `--format json` writes each window as it
    is made (at 1M lines the entries' text was otherwise held whole as Python bytes, 52 MB, then
    again as the 57 MB document)."""
    head = {"schema": SCHEMA, "verdict": report.verdict}
    if not windows:
        return head, iter(())
    ctx = report.context
    fields = ENTRY_FIELDS if as_json else entry_fields
    ctx.read_ahead(*timeline_reads(fields))
    marks = _marks(report, fields)
    pairs = _window_executions(report, windows)
    shown_rows = pairs["_row"].unique().sort()
    keys, entries = _entry_frame(report, ctx.executions[shown_rows], marks, fields)
    # Each window's executions: their entries (and `_at`, the position in `entries`).
    shown = pairs.with_columns(ctx.executions["exec_id"].gather(pairs["_row"]).alias("id")).join(
        entries.with_row_index("_at"), on="id", maintain_order="left"
    )
    drawn_cells = bar_width is not None and not as_json
    # What each worker's executions are aggregated as, and given as in its window's view.
    listed: list[pl.Expr] = []
    if as_json:
        # Written per window's row, not gathered from one text per entry (an entry is seldom shown
        # twice); as bytes, not decoded into a str.
        shown = shown.with_columns(_entry_json(keys, shown).cast(pl.Binary).alias("_json"))
        listed = [pl.col("_json")]

        def given(row: dict[str, Any]) -> dict[str, Any]:
            return {"executions": [orjson.Fragment(text) for text in row["_json"]]}
    elif not drawn_cells:
        dicts = _entry_dicts(keys, entries, entry_fields)
        listed = [pl.col("_at")]

        def given(row: dict[str, Any]) -> dict[str, Any]:
            return {"executions": [dicts[i] for i in row["_at"]]}
    else:
        def given(row: dict[str, Any]) -> dict[str, Any]:
            return {"cells": (row["cols"] or [], row["glyphs"] or "", row["busy"] or [])}
    # One row per window and worker, in window order (`shown` is in it).
    per_worker = shown.group_by("_w", "worker", maintain_order=True).agg(
        *listed,
        pl.col("after_stop").sum().alias("after_stop"),
        (pl.col("state") == "interrupted").sum().alias("interrupted"),
        pl.col("duplicate").sum().alias("duplicate"),
    )
    shown = shown.drop("_json", strict=False)
    if drawn_cells:
        from dupfind.render.timeline_text import bar_cells

        cells = bar_cells(shown, [(iso(w.start), iso(w.end)) for w in windows], bar_width)
        per_worker = per_worker.join(cells, on=["_w", "worker"], how="left", maintain_order="left")
    starts = per_worker["_w"].search_sorted(pl.Series(range(len(windows) + 1), dtype=per_worker.schema["_w"])).to_list()
    counts = {
        w: (n, interrupted, after_stop)
        for w, n, interrupted, after_stop in shown.group_by("_w").agg(
            pl.len(), (pl.col("state") == "interrupted").sum(), pl.col("after_stop").sum()
        ).iter_rows()
    }
    drawn: dict[int, list[dict]] = {}
    for row in _window_workers(report, windows, shown).iter_rows(named=True):
        drawn.setdefault(row["_w"], []).append(row)
    del shown
    sources = {(gen, service): source for gen, service, source in ctx.deploys.generations.select(
        "generation", "service", "source").rows()}
    nothing = {"cells": ([], "", [])} if drawn_cells else {"executions": []}

    def views() -> Iterator[dict[str, Any]]:
        for w, window in enumerate(windows):
            rows = per_worker.slice(starts[w], starts[w + 1] - starts[w])
            mine = _workers_shown(rows, given)
            yield _window(report, window, drawn.get(w, []), mine, counts.get(w, (0, 0, 0)), sources, marks, nothing)

    return head, views()


def _workers_shown(rows: pl.DataFrame, given: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str | None, dict[str, Any]]:
    """Each worker's executions in one window (its rows of timeline_parts' `per_worker`), as
    `given` gives them of its row (the cells of its bar, or its entries), and their flags, by worker."""
    return {
        row["worker"]: {
            **given(row),
            "flags": {"after_stop": row["after_stop"], "interrupted": row["interrupted"], "duplicate": row["duplicate"]},
        }
        for row in rows.iter_rows(named=True)
    }


def indented_view(view: dict[str, Any], first: bool) -> bytes:
    """One window's view as an indented timeline document writes it in its `windows` list (two
    levels in, each entry given as JSON text on one line of its own), after a comma unless `first`."""
    return (b"    " if first else b",\n    ") + orjson.dumps(view, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")


def write_document_json(head: dict[str, Any], views: Iterable[dict[str, Any]], write: Callable[[bytes], Any]) -> None:
    """The bytes orjson.dumps({**head, "windows": [*views]}, option=OPT_INDENT_2 | OPT_APPEND_NEWLINE)
    gives, written a window at a time as `views` gives them."""
    top = orjson.dumps({**head, "windows": []}, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    count = 0
    for view in views:
        if not count:
            write(top[:-len(b"[]\n}\n")] + b"[\n")
        write(indented_view(view, not count))
        count += 1
    write(b"\n  ]\n}\n" if count else top)


def _window(report: AnalysisReport, window: Window, workers: list[dict], mine: dict[str | None, dict[str, Any]],
            counts: tuple[int, int, int], sources: dict, marks: _Marks, nothing: dict[str, Any]) -> dict[str, Any]:
    """One window's timeline, from what timeline_document worked out for every window: its worker
    rows, their executions (or cells) and flags (`mine`, by worker; `nothing` for a worker without
    any), and its execution counts."""
    start, end = window.start, window.end
    generations: dict[tuple, dict] = {}
    for row in workers:
        gen = generations.setdefault(
            (row["service"], row["generation"]),
            {
                "generation": row["generation"],
                "service": row["service"],
                "source": sources.get((row["generation"], row["service"]), row["generation_source"]),
                "inferred": bool(row["generation_inferred"]),
                "workers": [],
            },
        )
        shown = mine.get(row["worker_id"])
        if shown is None:  # a worker drawn for its stop or start in the window, with no execution in it
            shown = {**nothing, "flags": {"after_stop": 0, "interrupted": 0, "duplicate": 0}}
        listed = {key: shown[key] for key in nothing}  # "executions", or the "cells" of a bar
        gen["workers"].append(
            {
                "worker": row["worker_id"],
                "start": iso(row["start_ts"]),
                "start_inferred": bool(row["start_inferred"]),
                "end": iso(row["end_ts"]) if row["end_kind"] != "running" else None,
                "end_kind": row["end_kind"],
                "last_seen": iso(row["last_ts"]),
                "stop": iso(row["stop_ts"]),
                "grace_s": row["grace_s"],
                **listed,
                "flags": shown["flags"],
            }
        )
    dups = marks.duplicates
    inside = int(dups.is_between(start, end).sum()) if dups.len() else 0
    deploy = window.deploy
    overlap = None
    if deploy and deploy.get("overlap_s"):
        overlap = {"start": deploy["overlap_start"], "end": deploy["overlap_end"], "seconds": deploy["overlap_s"]}
    executions, interrupted, after_stop = counts
    return {
        "title": window.title,
        "reason": window.reason,
        "start": iso(start),
        "end": iso(end),
        "deploy": deploy,
        "overlap": overlap,
        "generations": list(generations.values()),
        "summary": {
            "generations": len(generations),
            "workers": len(workers),
            "executions": executions,
            "overlap_s": deploy["overlap_s"] if deploy else None,
            "interrupted": interrupted,
            "taken_after_stop": after_stop,
            "duplicates_in_window": inside,
            "duplicates_total": dups.len(),
            "duplicates_outside_window": dups.len() - inside,
            "concentration": (report.summary["deploys"].get("concentration") or {}).get("headline"),
        },
    }

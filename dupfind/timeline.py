"""Timeline data: the workers, generations, stop signals, kills and executions of one time window."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from dupfind.analyze import AnalysisReport
from dupfind.deploy_concentration import duplicate_times, redelivery_tail_s
from dupfind.errors import DupfindError
from dupfind.timefmt import iso

SCHEMA = "dupfind.timeline/1"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}


def parse_duration(text: str, option: str) -> float:
    """`10m`, `90s`, `1.5h`, or plain seconds."""
    match = _DURATION.match(text or "")
    if not match or float(match.group(1)) <= 0:
        raise DupfindError(f"{option} {text!r} is not a duration: use seconds or a unit, e.g. 90s, 10m, 1h.")
    return float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]


@dataclass
class Window:
    """One time window to draw, and why it was chosen."""

    start: datetime
    end: datetime
    title: str
    reason: str
    deploy: dict | None = None


def select_windows(report: AnalysisReport, deploy: str | None, around: datetime | None, width_s: float) -> list[Window]:
    """--deploy ID, or --around TIME (width centred on it), or each deploy, or the busiest duplicate period."""
    ctx = report.context
    times = ctx.columns("ts")["ts"]
    if times.len() == 0:
        raise DupfindError("no records were read, so there is no timeline to draw.")
    first, last = times.min(), times.max()
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


def _ids(ctx, action_ids: list[int]) -> dict[int, dict[str, list[str]]]:
    keys = ctx.present_columns("job_id", "event_id", "idempotency_key", "notification_id", "order_id")
    records = ctx.action_records(*keys).filter(pl.col("action_id").is_in(pl.Series(action_ids, dtype=pl.Int64).implode()))
    grouped = records.group_by("action_id").agg(
        [pl.col(k).drop_nulls().unique().sort().head(4).cast(pl.String) for k in keys]
    ).collect()
    return {row[0]: {k: v for k, v in zip(keys, row[1:]) if v} for row in grouped.iter_rows()}


@dataclass
class _Marks:
    """What marks an execution, the same in every window (computed once per document)."""

    duplicated: set[int]  # actions with a certain or likely repeated side effect
    repeat_execs: set[int]  # executions that repeated it
    effect_at: dict[int, Any]  # execution -> its first counted side-effect request
    interrupted: dict[int, str]  # execution -> how its worker ended
    after_stop: set[int]  # executions taken after their worker's stop signal
    duplicates: pl.Series  # when each duplicate happened


def _marks(report: AnalysisReport) -> _Marks:
    ctx = report.context
    model = ctx.deploys
    duplicated = ctx.effect_counts.filter(pl.col("confidence").is_in(["certain", "likely"]))["action_id"].to_list()
    counted = ctx.side_effects.filter(pl.col("outcome").is_in(["success", "uncertain"])).sort("ts")
    first_effects = counted.group_by("action_id", "effect").agg(pl.col("exec_id").first().alias("first_exec"))
    repeat_execs = set(
        counted.join(first_effects, on=["action_id", "effect"])
        .filter(pl.col("action_id").is_in(duplicated) & (pl.col("exec_id") != pl.col("first_exec")))["exec_id"]
        .drop_nulls()
        .to_list()
    )
    return _Marks(
        duplicated=set(duplicated),
        repeat_execs=repeat_execs,
        effect_at=dict(counted.group_by("exec_id").agg(pl.col("ts").min()).drop_nulls("exec_id").rows()),
        interrupted=dict(model.interrupted.select("exec_id", "kill_kind").rows()),
        after_stop=set(model.after_stop["exec_id"].to_list()),
        duplicates=duplicate_times(ctx),
    )


def _windows_executions(report: AnalysisReport, windows: list[Window]) -> list[pl.DataFrame]:
    """The executions of each window (running at some point inside it), in the executions' order:
    one inequality join for every window instead of a filter per window."""
    ex = report.context.executions
    moment = ex.schema["start"]
    bounds = pl.DataFrame(
        {"_w": range(len(windows)), "_from": [w.start for w in windows], "_to": [w.end for w in windows]},
        schema={"_w": pl.Int64, "_from": moment, "_to": moment},
    )
    pairs = bounds.join_where(
        ex.select("start", "end").with_row_index("_row"), pl.col("start") <= pl.col("_to"), pl.col("end") >= pl.col("_from")
    )
    rows = dict(pairs.group_by("_w").agg(pl.col("_row").sort()).iter_rows())
    return [ex[rows.get(w, pl.Series(dtype=pl.UInt32))] for w in range(len(windows))]


_ISO_MS = "%Y-%m-%dT%H:%M:%S%.3fZ"  # timefmt.iso, vectorised


def _as_fstring(column: str) -> pl.Expr:
    """A column as an f-string shows its values (None as "None")."""
    return pl.col(column).cast(pl.String).fill_null("None")


def _execution_entries(report: AnalysisReport, ex: pl.DataFrame, marks: _Marks,
                       ids: dict[int, dict[str, list[str]]]) -> dict[int, dict[str, Any]]:
    """The entry of each execution, by exec_id, computed once for every window that shows it."""
    ctx = report.context
    identities = ctx.actions.select("action_id", pl.col("identity").alias("_action"))
    effect_at = pl.DataFrame(
        {"exec_id": list(marks.effect_at), "_effect_at": list(marks.effect_at.values())},
        schema={"exec_id": pl.Int64, "_effect_at": ex.schema["start"]},
    )
    state = (
        pl.when(pl.col("exec_id").is_in(list(marks.interrupted))).then(pl.lit("interrupted"))
        .when(pl.col("completed")).then(pl.lit("completed"))
        .when(pl.col("failed")).then(pl.lit("failed"))
        .when(pl.col("guarded")).then(pl.lit("guarded"))
        .otherwise(pl.lit("open"))
    )
    rows = (
        ex.unique("exec_id", keep="first", maintain_order=True)
        .join(identities, on="action_id", how="left", maintain_order="left")
        .join(effect_at, on="exec_id", how="left", maintain_order="left")
        .select(
            "exec_id", "action_id",
            pl.coalesce("_action", pl.format("action-{}", "action_id")).alias("action"),
            pl.col("worker_id").cast(pl.String).alias("worker"),
            pl.col("identity").cast(pl.String).alias("process"),
            "attempt",
            pl.col("start").dt.strftime(_ISO_MS).alias("start"),
            pl.col("end").dt.strftime(_ISO_MS).alias("end"),
            state.alias("state"),
            pl.col("action_id").is_in(list(marks.duplicated)).alias("duplicate"),
            pl.col("exec_id").is_in(list(marks.repeat_execs)).alias("repeat"),
            pl.col("exec_id").is_in(list(marks.after_stop)).alias("after_stop"),
            pl.col("_effect_at").dt.strftime(_ISO_MS).alias("side_effect_at"),
            pl.concat_str(_as_fstring("first_source"), pl.lit(":"), _as_fstring("first_line")).alias("where"),
        )
    )
    return {
        row["exec_id"]: {
            "id": row["exec_id"], "action": row["action"], "ids": ids.get(row["action_id"], {}),
            "worker": row["worker"], "process": row["process"], "attempt": row["attempt"],
            "start": row["start"], "end": row["end"], "state": row["state"], "duplicate": row["duplicate"],
            "repeat": row["repeat"], "after_stop": row["after_stop"], "side_effect_at": row["side_effect_at"],
            "where": row["where"],
        }
        for row in rows.iter_rows(named=True)
    }


def build_timeline(report: AnalysisReport, window: Window, marks: _Marks, ex: pl.DataFrame,
                   entries: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Everything one window's timeline shows, as plain data (times as ISO strings), from what
    timeline_document looked up for all windows at once: `ex`, the window's executions, and
    `entries`, the executions' entries (an execution shown in several windows is one entry)."""
    model = report.context.deploys
    start, end = window.start, window.end
    executions = [entries[e] for e in ex.sort("start")["exec_id"].to_list()]
    by_worker: dict[str, list[dict]] = {}
    for e in executions:
        by_worker.setdefault(e["worker"], []).append(e)
    workers = model.workers.filter(
        pl.col("worker_id").is_in(list(by_worker))
        | ((pl.col("start_ts") <= end) & (pl.coalesce("end_ts", "last_ts") >= start) & pl.col("stop_ts").is_not_null())
        | (pl.col("start_ts").is_between(start, end))
    ).sort("start_ts", "worker_id")
    generations: dict[str | None, dict] = {}
    sources = dict(model.generations.select("generation", "source").rows())
    for w in workers.iter_rows(named=True):
        gen = generations.setdefault(
            w["generation"],
            {
                "generation": w["generation"],
                "source": sources.get(w["generation"], w["generation_source"]),
                "inferred": bool(w["generation_inferred"]),
                "workers": [],
            },
        )
        mine = by_worker.get(w["worker_id"], [])
        gen["workers"].append(
            {
                "worker": w["worker_id"],
                "start": iso(w["start_ts"]),
                "start_inferred": bool(w["start_inferred"]),
                "end": iso(w["end_ts"]) if w["end_kind"] != "running" else None,
                "end_kind": w["end_kind"],
                "last_seen": iso(w["last_ts"]),
                "stop": iso(w["stop_ts"]),
                "grace_s": w["grace_s"],
                "executions": mine,
                "flags": {
                    "after_stop": sum(e["after_stop"] for e in mine),
                    "interrupted": sum(e["state"] == "interrupted" for e in mine),
                    "duplicate": sum(e["duplicate"] for e in mine),
                },
            }
        )
    dups = marks.duplicates
    inside = int(dups.is_between(start, end).sum()) if dups.len() else 0
    deploy = window.deploy
    overlap = None
    if deploy and deploy.get("overlap_s"):
        overlap = {"start": deploy["overlap_start"], "end": deploy["overlap_end"], "seconds": deploy["overlap_s"]}
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
            "workers": workers.height,
            "executions": len(executions),
            "overlap_s": deploy["overlap_s"] if deploy else None,
            "interrupted": sum(e["state"] == "interrupted" for e in executions),
            "taken_after_stop": sum(e["after_stop"] for e in executions),
            "duplicates_in_window": inside,
            "duplicates_total": dups.len(),
            "duplicates_outside_window": dups.len() - inside,
            "concentration": (report.summary["deploys"].get("concentration") or {}).get("headline"),
        },
    }


def timeline_document(report: AnalysisReport, windows: list[Window]) -> dict[str, Any]:
    document = {"schema": SCHEMA, "verdict": report.verdict, "windows": []}
    if not windows:
        return document
    marks = _marks(report)
    executions = _windows_executions(report, windows)
    shown = pl.concat(executions)
    # One pass over the records for the ids of every window's actions (not one pass per window).
    ids = _ids(report.context, shown["action_id"].unique().sort().to_list())
    entries = _execution_entries(report, shown, marks, ids)
    document["windows"] = [build_timeline(report, w, marks, ex, entries) for w, ex in zip(windows, executions)]
    return document

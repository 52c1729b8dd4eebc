"""How duplicates and redeliveries concentrate around deploys: counts and rates inside vs outside windows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from dupfind.deploys import delivered
from dupfind.timefmt import iso

if TYPE_CHECKING:
    from dupfind.analysis import AnalysisContext

# Messages cut short by a deploy come back one visibility timeout later: a deploy's effect
# reaches past its window by this tail (at least 3 minutes, 1.5 timeouts when known, 15 at most).
MIN_TAIL_S = 180.0
MAX_TAIL_S = 900.0


def redelivery_tail_s(ctx: "AnalysisContext") -> float:
    timeouts = [t for t in ctx.known_timeouts.values() if t]
    longest = max(timeouts, default=0.0)
    return min(MAX_TAIL_S, max(MIN_TAIL_S, 1.5 * longest))


def duplicate_times(ctx: "AnalysisContext") -> pl.Series:
    """When each extra side effect of a certain or likely duplicate was requested."""
    return ctx.duplicate_requests["ts"]


def redelivery_times(ctx: "AnalysisContext") -> pl.Series:
    """When each execution after an action's first one started (a redelivery or retry), but those
    of another message than every earlier execution of the action ran (a second publish's: a
    repeat, not the queue's redelivery) and those no queue delivered."""
    ex = ctx.executions
    if ex.height == 0:
        return pl.Series("ts", [], dtype=ctx.table.schema["ts"])
    entry = pl.coalesce("receive_ts", "entry_ts", "start")
    # Not every column: a sort would copy them. `order`: the executions' order by entry.
    runs = ex.select("action_id", "exec_id", "job_ids", entry.alias("entry"), delivered().alias("delivered")).sort(
        "entry", "exec_id").with_row_index("order")
    # A run no queue delivered (no message id, no receive: a scheduler's in each replica) is no redelivery.
    later = runs.filter(~pl.col("action_id").is_first_distinct() & pl.col("delivered"))
    jobs = runs.explode("job_ids").drop_nulls("job_ids")
    first_seen = jobs.group_by("action_id", "job_ids").agg(pl.col("order").min().alias("first"))
    new_message = (  # later executions each of whose message ids no earlier execution of the action ran
        jobs.join(later.select("exec_id"), on="exec_id").join(first_seen, on=["action_id", "job_ids"])
        .group_by("exec_id").agg((pl.col("first") < pl.col("order")).any().alias("seen"))
        .filter(~pl.col("seen"))
    )
    return later.join(new_message, on="exec_id", how="anti")["entry"].sort()


def _assign(times: pl.Series, rows: list[dict], spans: list[tuple[datetime, datetime]]) -> dict[str, list[datetime]]:
    """Each time belongs to the latest window started before it, if that window's span (plus tail) holds it."""
    if not rows or times.len() == 0:
        return {}
    windows = pl.DataFrame(
        {
            "deploy": [r["deploy"] for r in rows],
            "w_start": pl.Series([s for s, _ in spans], dtype=times.dtype),
            "w_reach": pl.Series([e for _, e in spans], dtype=times.dtype),
        }
    ).sort("w_start")
    joined = (
        pl.DataFrame({"ts": times}).sort("ts").join_asof(windows, left_on="ts", right_on="w_start", strategy="backward")
    )
    joined = joined.filter(pl.col("deploy").is_not_null() & (pl.col("ts") <= pl.col("w_reach")))
    return {deploy: group["ts"].to_list() for (deploy,), group in joined.group_by("deploy")}


def _union_seconds(intervals: list[tuple[datetime, datetime]]) -> float:
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current:
                total += (current[1] - current[0]).total_seconds()
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current:
        total += (current[1] - current[0]).total_seconds()
    return total


def _rates(times: pl.Series, spans: list[tuple[datetime, datetime]], first: datetime, last: datetime) -> dict[str, Any]:
    inside = 0
    if times.len() and spans:
        inside_mask = pl.any_horizontal([times.is_between(start, end) for start, end in spans])
        inside = int(pl.select(inside_mask.alias("x"))["x"].sum())
    clipped = [(max(s, first), min(e, last)) for s, e in spans if min(e, last) > max(s, first)]
    inside_min = _union_seconds(clipped) / 60.0
    outside_min = max(0.0, (last - first).total_seconds() / 60.0 - inside_min)
    outside = times.len() - inside
    return {
        "total": times.len(),
        "inside": inside,
        "outside": outside,
        "inside_minutes": round(inside_min, 2),
        "outside_minutes": round(outside_min, 2),
        "per_minute_inside": round(inside / inside_min, 3) if inside_min > 0 else None,
        "per_minute_outside": round(outside / outside_min, 3) if outside_min > 0 else None,
    }


@dataclass
class DeployFacts:
    """What the deploy summary is made of; windows of time merge theirs (dupfind.windows)."""

    windows: list[dict[str, Any]]  # the deploy model's windows, sorted by start
    generations: list[dict[str, Any]]  # the deploy model's generations, in its order
    tail_s: float
    duplicates: pl.Series  # when each extra side effect was requested, sorted
    redeliveries: pl.Series  # when each repeat execution was entered, sorted
    first: datetime | None  # the records' time span
    last: datetime | None


def deploy_facts(ctx: "AnalysisContext") -> DeployFacts:
    model = ctx.deploys
    table_ts = ctx.table["ts"]
    return DeployFacts(
        model.windows.sort("start").to_dicts(), model.generations.to_dicts(), redelivery_tail_s(ctx),
        duplicate_times(ctx), redelivery_times(ctx),
        table_ts.min() if table_ts.len() else None, table_ts.max() if table_ts.len() else None,
    )


def deploy_summary(ctx: "AnalysisContext") -> dict[str, Any]:
    """Generations, deploy windows with their duplicates, and the inside-vs-outside concentration."""
    return summarise_deploys(deploy_facts(ctx))


def summarise_deploys(facts: DeployFacts) -> dict[str, Any]:
    tail = facts.tail_s
    dups, redeliveries = facts.duplicates, facts.redeliveries
    windows: list[dict[str, Any]] = []
    rows = facts.windows
    spans = [(row["start"], row["end"] + timedelta(seconds=tail)) for row in rows]
    assigned = _assign(dups, rows, spans)
    assigned_redeliveries = _assign(redeliveries, rows, spans)
    for row in rows:
        mine = assigned.get(row["deploy"], [])
        within = math.ceil((max(mine) - row["start"]).total_seconds() / 60.0) if mine else None
        windows.append(
            {
                "deploy": row["deploy"],
                "previous": row["previous"],
                "start": iso(row["start"]),
                "end": iso(row["end"]),
                "from_records": row["from_records"],
                "overlap_s": row["overlap_s"],
                "overlap_start": iso(row["overlap_start"]),
                "overlap_end": iso(row["overlap_end"]),
                "old_workers": row["old_workers"],
                "new_workers": row["new_workers"],
                "old_stopped": row["old_stopped"],
                "old_killed": row["old_killed"],
                "work_after_stop": row["work_after_stop"],
                "interrupted": row["interrupted"],
                "grace_s": row["grace_s"],
                "duplicates": len(mine),
                "minutes_to_last_duplicate": within,
                "redeliveries": len(assigned_redeliveries.get(row["deploy"], [])),
            }
        )
    first, last = facts.first, facts.last
    concentration = None
    if first is not None:
        concentration = {
            "duplicates": _rates(dups, spans, first, last),
            "redeliveries": _rates(redeliveries, spans, first, last),
            "headline": headline(windows, dups.len()),
        }
    generations = [
        {
            "generation": g["generation"],
            "service": g["service"],
            "workers": len(g["workers"]),
            "source": g["source"],
            "inferred": g["source"] not in ("logged", "deploy_record"),
            "first_start": iso(g["first_start"]),
            "last_end": iso(g["last_end"]),
            "deploy_start": iso(g["deploy_start"]),
            "deploy_finish": iso(g["deploy_finish"]),
        }
        for g in facts.generations[:50]
    ]
    return {"tail_s": tail, "generations": generations, "windows": windows, "concentration": concentration}


def headline(windows: list[dict[str, Any]], total: int) -> str | None:
    """'N of M duplicates happened within K minutes of deploy X', for the window holding the most."""
    best = max((w for w in windows if w["duplicates"]), key=lambda w: w["duplicates"], default=None)
    if best is None or not total:
        return None
    minutes = best["minutes_to_last_duplicate"] or 1
    return (
        f"{best['duplicates']} of {total} duplicated side effect(s) happened within {minutes} minute(s) "
        f"of deploy {best['deploy']} (started {best['start']})"
    )

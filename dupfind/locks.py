"""Lock holds: each lock acquisition with the release that ended it, its TTL and the work it guarded."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dupfind.schema import as_strings

LOCK_END_KINDS = ("lock_release", "lock_expired")


def _holder() -> pl.Expr:
    """Who holds a lock: its owner token when logged, else the worker (and process)."""
    worker = (
        pl.when(pl.col("process_id").is_not_null())
        .then(pl.concat_str("worker_id", pl.lit("/"), "process_id"))
        .otherwise(pl.col("worker_id"))
    )
    return pl.coalesce("lock_owner", worker, pl.concat_str(pl.lit("exec-"), pl.col("exec_id").cast(pl.String)))


def lock_events(table: pl.DataFrame) -> pl.DataFrame:
    """Acquire, release, expiry and denial records of lock keys, with the holder they speak for."""
    kinds = ["lock_acquire", "lock_denied", *LOCK_END_KINDS]
    return (
        table.filter(pl.col("kind").is_in(kinds) & pl.col("lock_key").is_not_null())
        .pipe(as_strings)
        .select(
            "rid",
            "ts",
            "kind",
            pl.col("lock_key").alias("key"),
            _holder().alias("holder"),
            "worker_id",
            "exec_id",
            "action_id",
            "ttl_s",
        )
        .sort("key", "holder", "ts", "rid")
        # Hold number per (key, holder): every acquire opens a new one; ends belong to the open one.
        .with_columns(hold=(pl.col("kind") == "lock_acquire").cast(pl.Int32).cum_sum().over("key", "holder"))
        .with_columns(first_of_kind=pl.int_range(pl.len()).over("key", "holder", "hold", "kind") == 0)
    )


def lock_holds(events: pl.DataFrame, executions: pl.DataFrame) -> pl.DataFrame:
    """One row per acquisition.

    `believed_end`: when the holder stopped acting as the holder (its release, else the end of
    the execution that took the lock). `store_end`: when the lock store stopped holding it for
    that holder (release, TTL, or a logged expiry, whichever came first).
    """
    acquires = events.filter(pl.col("kind") == "lock_acquire")
    ends = events.filter((pl.col("hold") > 0) & pl.col("first_of_kind") & pl.col("kind").is_in(LOCK_END_KINDS))
    releases = ends.filter(pl.col("kind") == "lock_release").select(
        "key", "holder", "hold", pl.col("ts").alias("release_ts"), pl.col("rid").alias("release_rid")
    )
    expiries = ends.filter(pl.col("kind") == "lock_expired").select(
        "key", "holder", "hold", pl.col("ts").alias("expired_ts"), pl.col("rid").alias("expired_rid")
    )
    exec_end = executions.select("exec_id", pl.col("end").alias("exec_end"))
    holds = (
        acquires.select(
            "key",
            "holder",
            "hold",
            "worker_id",
            "exec_id",
            "action_id",
            "ttl_s",
            pl.col("ts").alias("acquire_ts"),
            pl.col("rid").alias("acquire_rid"),
        )
        .join(releases, on=["key", "holder", "hold"], how="left")
        .join(expiries, on=["key", "holder", "hold"], how="left")
        .join(exec_end, on="exec_id", how="left")
    )
    ttl_end = pl.col("acquire_ts") + pl.duration(microseconds=(pl.col("ttl_s") * 1e6).cast(pl.Int64))
    believed = pl.max_horizontal("acquire_ts", pl.coalesce("release_ts", "exec_end", "expired_ts", "acquire_ts"))
    return (
        holds.with_columns(ttl_end=ttl_end, believed_end=believed)
        .with_columns(
            store_end=pl.min_horizontal("believed_end", "ttl_end", "expired_ts"),
        )
        .sort("key", "acquire_ts", "holder")
    )


def orphan_releases(events: pl.DataFrame) -> pl.DataFrame:
    """Releases that end no hold of their holder: it never took the lock, or released it twice."""
    return (
        events.filter((pl.col("kind") == "lock_release") & ((pl.col("hold") == 0) | ~pl.col("first_of_kind")))
        .select("rid", "ts", "key", "holder", "worker_id", "exec_id", "action_id")
        .sort("ts")
    )


def concurrent_holds(holds: pl.DataFrame, start: str, end: str) -> pl.DataFrame:
    """Pairs (earlier `_a`, later `_b`) of holds of one key by different holders whose
    [acquire, `end`] intervals intersect, with the overlap in seconds and its margin: how far one
    hold's clock must move for the two not to intersect (a short hold well inside a long one
    intersects it whatever the skew, though it overlaps briefly; an unknown end is open)."""
    if holds.height < 2:
        return pl.DataFrame()
    cols = list(
        dict.fromkeys(
            [
                "key",
                "holder",
                "worker_id",
                "exec_id",
                "action_id",
                "acquire_rid",
                start,
                end,
                "believed_end",
                "store_end",
                "ttl_s",
                "ttl_end",
            ]
        )
    )
    left = holds.select(cols).rename({c: f"{c}_a" for c in cols if c != "key"})
    right = holds.select(cols).rename({c: f"{c}_b" for c in cols if c != "key"})
    pairs = left.join(right, on="key").filter(
        (pl.col("holder_a") != pl.col("holder_b"))
        & (
            (pl.col(f"{start}_a") < pl.col(f"{start}_b"))
            | ((pl.col(f"{start}_a") == pl.col(f"{start}_b")) & (pl.col("acquire_rid_a") < pl.col("acquire_rid_b")))
        )
        & (pl.col(f"{start}_b") < pl.col(f"{end}_a"))
    )
    overlap = pl.min_horizontal(f"{end}_a", f"{end}_b") - pl.col(f"{start}_b")
    margin = pl.min_horizontal(pl.col(f"{end}_a") - pl.col(f"{start}_b"), pl.col(f"{end}_b") - pl.col(f"{start}_a"))
    return pairs.with_columns(
        overlap_s=overlap.dt.total_microseconds() / 1e6, margin_s=margin.dt.total_microseconds() / 1e6,
    )


def longest_overlap(holds: list[dict], start: str, end: str) -> dict | None:
    """`concurrent_holds` over a few holds as rows (those of two executions, in `lock_holds`
    order), pairs within one execution left out: the pair that overlaps longest, its columns
    suffixed `_a` and `_b`, its `overlap_s` and `margin_s`; None when no two overlap. A few rows in Python
    rather than a self-join: attribution asks this for every duplicated action."""
    best: dict | None = None
    for a in holds:
        for b in holds:
            if a["key"] != b["key"] or a["holder"] == b["holder"] or a["exec_id"] == b["exec_id"]:
                continue
            if a[start] is None or b[start] is None or a[end] is None:
                continue  # a comparison with null keeps no row
            if not (a[start] < b[start] or (a[start] == b[start] and a["acquire_rid"] < b["acquire_rid"])):
                continue
            if not b[start] < a[end]:
                continue
            ends = [t for t in (a[end], b[end]) if t is not None]
            # Seconds from whole microseconds, as `concurrent_holds` gives them (polars may round
            # its division the other way in the last bit: it multiplies by the reciprocal).
            overlap = ((min(ends) - b[start]) // timedelta(microseconds=1)) / 1e6
            if best is None or overlap > best["overlap_s"]:
                sides = [a[end] - b[start]] + ([b[end] - a[start]] if b[end] is not None else [])
                best = {**{f"{k}_a": v for k, v in a.items() if k != "key"},
                        **{f"{k}_b": v for k, v in b.items() if k != "key"}, "key": a["key"], "overlap_s": overlap,
                        "margin_s": (min(sides) // timedelta(microseconds=1)) / 1e6}
    return best


def seconds_after(later, earlier) -> float:
    return (later - earlier) / timedelta(seconds=1)

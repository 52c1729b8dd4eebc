"""DF301-DF303: two holders of one lock, a release by a non-holder, a lock TTL shorter than the work."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dupfind.analysis import AnalysisContext, other_hosts
from dupfind.detectors._common import action_finding, execution_ids, seconds
from dupfind.effects import COUNTED
from dupfind.findings import Finding
from dupfind.locks import concurrent_holds, seconds_after
from dupfind.rules_registry import Rule, detector


def _lock_finding(
    ctx: AnalysisContext,
    rule: Rule,
    action_id: int | None,
    exec_ids: list[int],
    summary: str,
    suffix: str,
    severity: str | None = None,
) -> Finding:
    """A finding about a lock, tied to the action it guarded when the lock records carry its ids."""
    if action_id is not None:
        return action_finding(ctx, rule, action_id, exec_ids, summary, identity_suffix=suffix, severity=severity)
    execs = ctx.executions.filter(pl.col("exec_id").is_in(exec_ids))
    return Finding(
        rule=rule.code,
        name=rule.name,
        title=rule.title,
        severity=severity or rule.severity,
        identity=suffix,
        summary=summary,
        workers=list(dict.fromkeys(execs["identity"].to_list())),
        ids=execution_ids(ctx, exec_ids),
        deployments=list(dict.fromkeys(d for d in execs["deployment_id"].to_list() if d is not None)),
        remediation=list(rule.remediation),
    )


def _lock_records_by(ctx: AnalysisContext, requests: pl.DataFrame) -> dict[int, list[int]]:
    """The lock records of some executions on a key, for many requests at once (columns _req,
    key, exec_ids): _req -> the rids by time (ties in lock_events order). One join rather than a
    lookup and a filter a finding."""
    wanted = requests.select("_req", "key", pl.col("exec_ids").alias("exec_id")).explode("exec_id").drop_nulls("exec_id").unique()
    events = ctx.lock_events.select("key", "ts", "rid", "exec_id").with_row_index("_event")
    found = events.join(wanted, on=["key", "exec_id"]).sort("_req", "ts", "_event").group_by("_req", maintain_order=True).agg("rid")
    return dict(zip(found["_req"].to_list(), found["rid"].to_list()))


def _span(finding: Finding, ctx: AnalysisContext, rids: list[int]) -> None:
    """The time span of a finding that is not tied to an action: its evidence records."""
    if finding.action_id is None and finding.first_ts is None:
        times = ctx.table[sorted(set(rids))]["ts"]
        finding.first_ts, finding.last_ts = times.min(), times.max()


def _other_holds(holds: pl.DataFrame, prefix: str) -> pl.DataFrame:
    """The holds of each key with prefixed columns, to join against a key's other events."""
    columns = {
        "holder": "holder",
        "acquire_ts": "from",
        "store_end": "to",
        "acquire_rid": "rid",
        "exec_id": "exec",
        "worker_id": "worker",
    }
    return holds.select("key", *(pl.col(c).alias(f"{prefix}_{name}") for c, name in columns.items()))


def _cross_host_skew(ctx: AnalysisContext, other_worker: str) -> pl.Expr:
    """The clock-skew tolerance when `other_worker` is another host than the row's worker, else zero."""
    return (
        pl.when(other_hosts(other_worker, "worker_id"))
        .then(pl.duration(microseconds=int(ctx.skew_s * 1e6)))
        .otherwise(pl.duration(microseconds=0))
    )


def _effect_execs(ctx: AnalysisContext) -> set[int]:
    effects = ctx.side_effects
    if effects.height == 0:
        return set()
    return set(effects.filter(pl.col("outcome").is_in(COUNTED))["exec_id"].drop_nulls().to_list())


@detector("lock_concurrent_holders")
def detect_concurrent(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    pairs = concurrent_holds(ctx.lock_holds, "acquire_ts", "store_end")
    if pairs.height == 0:
        return []
    race_s = float(rule.param("race_window_s", 1.0))
    pairs = pairs.with_columns(certain=~other_hosts("worker_id_a", "worker_id_b") | (pl.col("margin_s") >= ctx.skew_s))
    # Within the skew tolerance, a second acquisition in the last quarter of the first hold (just
    # before its release or TTL end), or by a run that then found the work done, reads as a clean
    # hand-over; otherwise as a race.
    guarded = ctx.executions.select(pl.col("exec_id").alias("exec_id_b"), pl.col("guarded").alias("guarded_b"))
    pairs = pairs.join(guarded, on="exec_id_b", how="left")
    gap = pl.col("acquire_ts_b") - pl.col("acquire_ts_a")
    near_start = (gap < 3 * (pl.col("store_end_a") - pl.col("acquire_ts_b"))) & ~pl.col("guarded_b").fill_null(False)
    pairs = pairs.filter(pl.col("certain") | near_start)
    if pairs.height == 0:
        return []
    senders = _effect_execs(ctx)
    # Per key, in the order keys first appear by second acquisition: its most telling pair
    # (certain first, then the longest overlap), its holders and executions; the releases by a
    # non-holder between that pair's acquisitions; the key's records of those executions. One
    # polars pass each rather than a few per key.
    keys = pairs.sort("acquire_ts_b").group_by("key", maintain_order=True).agg(
        pl.all().sort_by("certain", "overlap_s", descending=True, maintain_order=True).first(),
        pl.col("holder_a").append(pl.col("holder_b")).unique().sort().alias("holders"),
        pl.col("exec_id_a").append(pl.col("exec_id_b")).drop_nulls().unique(maintain_order=True).alias("exec_ids"),
    ).with_row_index("_req")
    orphans = ctx.orphan_lock_releases.with_row_index("_orphan")
    between_of = keys.select(
        "key", low=pl.col("acquire_ts_a") - timedelta(seconds=ctx.skew_s), high=pl.col("acquire_ts_b"),
    ).join(orphans, on="key").filter(pl.col("ts").is_between(pl.col("low"), pl.col("high"))).sort("_orphan").group_by(
        "key", maintain_order=True,
    ).agg("rid", "holder").rows_by_key("key", unique=True)
    records_of = _lock_records_by(ctx, keys)
    findings: list[Finding] = []
    for first in keys.iter_rows(named=True):
        key, holders, exec_ids = first["key"], first["holders"], first["exec_ids"]
        between_rids, between_holders = between_of.get(key, ([], []))
        gap = seconds_after(first["acquire_ts_b"], first["acquire_ts_a"])
        if between_rids:
            why = (
                f"{between_holders[0]} released the lock without holding it, "
                f"then {first['holder_b']} took it while {first['holder_a']} still held it"
            )
        elif gap <= race_s:
            why = (
                f"both acquired it {gap * 1000:.0f} ms apart: a check-then-set race (the GET and the SET "
                "are separate steps, so both saw the key free)"
            )
        else:
            why = (
                f"{first['holder_b']} acquired it {gap:.1f} s after {first['holder_a']} without waiting for its release"
            )
        both_sent = first["exec_id_a"] in senders and first["exec_id_b"] in senders
        summary = f"{len(holders)} holders of lock {key!r} at once (overlap {first['overlap_s']:.2f} s): {why}"
        if both_sent:
            summary += "; both performed the side effect"
        # Within the skew tolerance the overlap alone is only possible; two side effects make it likely.
        confidence = "certain" if first["certain"] else ("likely" if both_sent else "possible")
        severity = None if confidence != "possible" else rule.param("possible_severity", "low")
        finding = _lock_finding(
            ctx,
            rule,
            first["action_id_a"] if first["action_id_a"] is not None else first["action_id_b"],
            exec_ids,
            summary,
            f"lock:{key}",
            severity,
        )
        finding.confidence = confidence
        finding.figures = {
            "lock_key": key,
            "holders": len(holders),
            "overlap_s": seconds(first["overlap_s"]),
            "acquire_gap_s": seconds(gap),
            "released_by_non_holder": bool(between_rids),
            "side_effect_repeated": both_sent,
        }
        rids = records_of.get(first["_req"], []) + between_rids
        notes = {
            first["acquire_rid_a"]: "first holder",
            first["acquire_rid_b"]: "second holder, while the first held it",
        }
        notes.update({r: "released by a non-holder" for r in between_rids})
        ctx.attach_evidence(finding, rids, notes)
        _span(finding, ctx, rids)
        findings.append(finding)
    return findings


@detector("lock_release_not_holder")
def detect_foreign_release(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    holds = ctx.lock_holds
    orphans = ctx.orphan_lock_releases.select(
        "rid", "ts", "key", "holder", "worker_id", "exec_id", "action_id", late=pl.lit(False)
    )
    # A holder releasing after its own TTL ran out deletes whatever the key holds now.
    late = holds.filter(pl.col("release_ts").is_not_null() & (pl.col("release_ts") > pl.col("ttl_end"))).select(
        pl.col("release_rid").alias("rid"),
        pl.col("release_ts").alias("ts"),
        "key",
        "holder",
        "worker_id",
        "exec_id",
        "action_id",
        late=pl.lit(True),
    )
    releases = (
        pl.concat([orphans, late.with_columns(pl.col("rid").cast(orphans.schema["rid"]))]) if late.height else orphans
    )
    if releases.height == 0:
        return []
    live = _other_holds(holds, "live")
    # Across hosts, an acquisition logged up to the skew tolerance after the release may have come first.
    tolerance = _cross_host_skew(ctx, "live_worker")
    hit = (
        releases.join(live, on="key", how="left")
        .filter(
            (pl.col("live_holder") != pl.col("holder"))
            & (pl.col("live_from") <= pl.col("ts") + tolerance)
            & (pl.col("ts") < pl.col("live_to"))
        )
        .group_by("rid")
        .agg(pl.col("live_holder").first(), pl.col("live_rid").first(), pl.col("live_exec").first())
    )
    releases = releases.join(hit, on="rid", how="left").filter(~pl.col("late") | pl.col("live_holder").is_not_null())
    releases = releases.sort("ts").with_row_index("_req").with_columns(
        exec_ids=pl.concat_list("exec_id", "live_exec").list.drop_nulls(),
    )
    records_of = _lock_records_by(ctx, releases)
    findings: list[Finding] = []
    for row in releases.iter_rows(named=True):
        who, key = row["holder"], row["key"]
        what = "after its own TTL had run out" if row["late"] else "without holding it"
        if row["live_holder"] is not None:
            summary = f"{who} released lock {key!r} {what}, deleting the lock {row['live_holder']} held"
            severity = None
        else:
            summary = f"{who} released lock {key!r} {what} (nobody else held it at that moment)"
            severity = rule.param("unheld_severity", "low")
        exec_ids = row["exec_ids"]
        finding = _lock_finding(
            ctx, rule, row["action_id"], exec_ids, summary, f"release:{row['key']}@{row['holder']}", severity
        )
        finding.confidence = "certain"
        finding.figures = {
            "lock_key": row["key"],
            "released_by": row["holder"],
            "holder_at_release": row["live_holder"],
            "after_own_ttl": row["late"],
        }
        rids = [
            row["rid"],
            *([row["live_rid"]] if row["live_rid"] is not None else []),
            *records_of.get(row["_req"], []),
        ]
        notes = {row["rid"]: "release by a non-holder"}
        if row["live_rid"] is not None:
            notes[row["live_rid"]] = "the actual holder"
        ctx.attach_evidence(finding, list(dict.fromkeys(rids)), notes)
        _span(finding, ctx, rids)
        findings.append(finding)
    return findings


@detector("lock_ttl_expired")
def detect_ttl(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    holds = ctx.lock_holds
    if holds.height == 0:
        return []
    over = holds.filter(
        pl.col("expired_rid").is_not_null()
        | (pl.col("ttl_end").is_not_null() & (pl.col("believed_end") > pl.col("ttl_end")))
    ).with_columns(expired_at=pl.min_horizontal("ttl_end", "expired_ts"))
    if over.height == 0:
        return []
    takers = _other_holds(holds, "taker")
    tolerance = _cross_host_skew(ctx, "taker_worker")
    taken = (
        over.join(takers, on="key")
        .filter(
            (pl.col("taker_holder") != pl.col("holder"))
            & (pl.col("taker_from") >= pl.col("expired_at") - tolerance)
            & (pl.col("taker_from") < pl.col("believed_end"))
        )
        .sort("taker_from")
        .group_by("acquire_rid")
        .agg(
            pl.col("taker_holder").first(),
            pl.col("taker_from").first(),
            pl.col("taker_rid").first(),
            pl.col("taker_exec").first(),
        )
    )
    over = over.join(taken, on="acquire_rid", how="left")
    over = over.sort("acquire_ts").with_row_index("_req").with_columns(
        exec_ids=pl.concat_list("exec_id", "taker_exec").list.drop_nulls(),
    )
    records_of = _lock_records_by(ctx, over)
    findings: list[Finding] = []
    for row in over.iter_rows(named=True):
        held = seconds_after(row["believed_end"], row["acquire_ts"])
        ttl = row["ttl_s"]
        key, who = row["key"], row["holder"]
        summary = f"{who} held lock {key!r} for {held:.1f} s" + (f" under a {ttl:g} s TTL" if ttl is not None else "")
        summary += "; the lock expired while the work it guarded was still running"
        if row["taker_holder"] is not None:
            summary += (
                f", and {row['taker_holder']} took it "
                f"{seconds_after(row['taker_from'], row['expired_at']):.1f} s after it expired"
            )
            severity = None
        else:
            summary += "; nobody took it meanwhile (near miss)"
            severity = rule.param("near_miss_severity", "medium")
        exec_ids = row["exec_ids"]
        finding = _lock_finding(
            ctx, rule, row["action_id"], exec_ids, summary, f"ttl:{row['key']}@{row['holder']}", severity
        )
        finding.confidence = "certain"
        finding.figures = {
            "lock_key": row["key"],
            "ttl_s": ttl,
            "held_s": seconds(held),
            "over_ttl_s": seconds(held - ttl) if ttl is not None else None,
            "taken_over_by": row["taker_holder"],
        }
        notes = {row["acquire_rid"]: "lock acquired"}
        if row["expired_rid"] is not None:
            notes[row["expired_rid"]] = "lock expired"
        if row["taker_rid"] is not None:
            notes[row["taker_rid"]] = "taken by another holder after the TTL"
        rids = [row["acquire_rid"], *records_of.get(row["_req"], [])]
        ctx.attach_evidence(finding, list(dict.fromkeys(r for r in rids if r is not None)), notes,
                            executions=[row["exec_id"]] if row["action_id"] is not None else [],
                            kinds=("start", "side_effect", "commit", "finish", "ack"))
        _span(finding, ctx, rids)
        findings.append(finding)
    return findings

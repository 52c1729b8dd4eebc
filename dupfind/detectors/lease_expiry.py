"""DF103: a later attempt started while an earlier one was still running (lease expiry)."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding, seconds
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


def redelivery_pairs(ctx: AnalysisContext) -> pl.DataFrame:
    """Pairs where the later execution entered while the earlier still ran, with no failure
    of the earlier one before it: the queue redelivered a message that was in progress."""
    pairs = ctx.pairs
    if pairs.height == 0:
        return pairs
    entry_b = pl.coalesce("entry_ts_b", "start_b")
    no_failure_before = pl.col("fail_ts_a").is_null() | (pl.col("fail_ts_a") > entry_b)
    later_attempt = (
        pl.col("attempt_b").is_null() | pl.col("attempt_a").is_null() | (pl.col("attempt_b") > pl.col("attempt_a"))
    )
    same_message = pl.col("job_ids_a").list.set_intersection(pl.col("job_ids_b")).list.len() > 0
    return pairs.filter(
        (pl.col("overlap") != "none") & no_failure_before & later_attempt & same_message
    )


@detector("lease_expiry")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    tolerance = float(rule.param("gap_tolerance", 0.25))
    pairs = redelivery_pairs(ctx)
    lease_logged = set(
        ctx.action_records("kind").filter(pl.col("kind") == "lease_expired").select("action_id").collect()["action_id"].unique().to_list()
    )
    findings: list[Finding] = []
    for (action_id,), group in pairs.group_by("action_id", maintain_order=True):
        first = group.sort("start_b").row(0, named=True)
        exec_ids = sorted(set(group["exec_id_a"].to_list()) | set(group["exec_id_b"].to_list()))
        timeout = ctx.timeout_for(ctx.action_queue.get(action_id))
        gap = first["gap_s"]
        near = timeout is not None and abs(gap - timeout) <= max(1.0, tolerance * timeout)
        evidence_of_expiry = action_id in lease_logged or near
        summary = (
            f"attempt {first['attempt_b'] or '?'} started {gap:.1f} s after attempt {first['attempt_a'] or '?'} "
            f"while it was still running (overlap {first['overlap_s']:.2f} s)"
        )
        if timeout is not None:
            summary += f"; visibility timeout {timeout:g} s"
        guarded = bool(group["guarded_b"].all())
        if guarded:
            summary += "; the redelivery was stopped by a guard"
        # A guarded redelivery is the design working; the short lease is still worth knowing.
        finding = action_finding(ctx, rule, action_id, exec_ids, summary, severity="low" if guarded else None)
        finding.cause = "lease_expired"
        finding.confidence = "certain" if evidence_of_expiry and first["overlap"] == "certain" else "likely"
        duration = (first["end_a"] - first["start_a"]).total_seconds()
        finding.figures = {
            "gap_s": seconds(gap),
            "overlap_s": seconds(first["overlap_s"]),
            "first_attempt_duration_s": seconds(duration),
            "redeliveries_while_running": group.height,
        }
        if timeout is not None:
            finding.figures["timeout_s"] = timeout
            finding.figures["duration_over_timeout"] = round(duration / timeout, 2) if timeout else None
        expiry_rids = ctx.records_of(action_id).filter(pl.col("kind") == "lease_expired")["rid"].to_list()
        notes = {r: "lease expired" for r in expiry_rids}
        ctx.attach_evidence(finding, expiry_rids, notes, executions=exec_ids,
                            kinds=("receive", "start", "side_effect", "commit", "ack", "finish"))
        findings.append(finding)
    return findings

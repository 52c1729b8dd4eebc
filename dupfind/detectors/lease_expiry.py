"""DF103: a later attempt started while an earlier one was still running (lease expiry)."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding, seconds
from dupfind.findings import Finding, two_runs
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
    if pairs.height == 0:
        return []
    # The lease_expired records of each action, in time order (as records_of gives them).
    expired = ctx.action_records("kind", "rid", "ts", "source", "line").filter(pl.col("kind") == "lease_expired").sort(
        "action_id", "ts", "source", "line", maintain_order=True,
    ).group_by("action_id", maintain_order=True).agg("rid").collect()
    expiry_rids_of = dict(zip(expired["action_id"].to_list(), expired["rid"].to_list()))
    # Per action, in the order actions first appear: the pair whose later execution started
    # first, the executions involved, and whether every redelivery was guarded (one polars pass
    # rather than a few per action).
    actions = pairs.with_columns(_order=pl.int_range(pl.len()).min().over("action_id")).sort(
        "_order", "start_b", maintain_order=True,
    ).group_by("action_id", maintain_order=True).agg(
        pl.all().first(),
        pl.col("exec_id_a").append(pl.col("exec_id_b")).unique().sort().alias("exec_ids"),
        pl.col("guarded_b").all().alias("all_guarded"),
        pl.len().alias("redeliveries"),
    )
    findings: list[Finding] = []
    for first in actions.iter_rows(named=True):
        action_id, exec_ids = first["action_id"], first["exec_ids"]
        found = ctx.action_timeout(action_id)
        timeout = found[0] if found else None
        gap = first["gap_s"]
        near = timeout is not None and abs(gap - timeout) <= max(1.0, tolerance * timeout)
        expiry_rids = expiry_rids_of.get(action_id) or ctx.worker_lease_expiry(
            first["worker_id_a"], first["start_a"], first["end_a"], first["entry_ts_b"] or first["start_b"])
        evidence_of_expiry = bool(expiry_rids) or near
        earlier, again = two_runs(first["attempt_a"], first["attempt_b"])
        summary = f"{again} started {gap:.1f} s after {earlier} while it was still running (overlap {first['overlap_s']:.2f} s)"
        if timeout is not None:
            summary += f"; {ctx.action_timeout_words(action_id)}"
        guarded = bool(first["all_guarded"])
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
            "redeliveries_while_running": first["redeliveries"],
        }
        if timeout is not None:
            finding.figures["timeout_s"] = timeout
            finding.figures["duration_over_timeout"] = round(duration / timeout, 2) if timeout else None
        notes = {r: "lease expired" for r in expiry_rids}
        ctx.attach_evidence(finding, expiry_rids, notes, executions=exec_ids,
                            kinds=("receive", "start", "side_effect", "commit", "ack", "finish"))
        findings.append(finding)
    return findings

"""DF105: the same event published twice upstream (the queue is innocent)."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding, seconds
from dupfind.effects import duplicated_actions
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


@detector("double_publish")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    publishes = ctx.action_records("kind", "job_id", "event_id", "ts", "rid").filter(pl.col("kind") == "publish").select("action_id", "job_id", "event_id", "ts", "rid").collect()
    if publishes.height == 0:
        return []
    per_action = publishes.group_by("action_id").agg(
        pl.col("job_id").drop_nulls().n_unique().alias("jobs"),
        pl.col("event_id").drop_nulls().n_unique().alias("events"),
        pl.len().alias("publishes"),
        pl.col("ts").min().alias("first"),
        pl.col("ts").max().alias("last"),
        pl.col("rid"),
    ).filter((pl.col("jobs") >= 2) | (pl.col("events") >= 2))
    duplicated = set(duplicated_actions(ctx.effect_counts).to_list())
    # Each action's executions by start, as executions_of gives them, for all actions at once.
    runs = ctx.executions.join(per_action.select("action_id"), on="action_id", how="semi").sort(
        "action_id", "start", maintain_order=True,
    ).group_by("action_id", maintain_order=True).agg("exec_id")
    exec_ids_of = dict(zip(runs["action_id"].to_list(), runs["exec_id"].to_list()))
    findings: list[Finding] = []
    for row in per_action.sort("action_id").iter_rows(named=True):
        action_id = row["action_id"]
        exec_ids = exec_ids_of.get(action_id, [])
        gap = (row["last"] - row["first"]).total_seconds()
        variant = "two event ids sharing one idempotency key" if row["events"] >= 2 else "one event id"
        summary = f"published {max(row['jobs'], row['publishes'])} times ({variant}) {gap:.2f} s apart"
        harm = action_id in duplicated
        summary += "; the side effect repeated" if harm else "; the consumer did not repeat the side effect"
        finding = action_finding(ctx, rule, action_id, exec_ids, summary, severity=None if harm else "low")
        finding.cause = "double_publish"
        finding.confidence = "certain"
        finding.figures = {"publishes": row["publishes"], "messages": row["jobs"], "event_ids": row["events"], "publish_gap_s": seconds(gap)}
        ctx.attach_evidence(finding, row["rid"], {r: "publish" for r in row["rid"]}, executions=exec_ids,
                            kinds=("receive", "side_effect", "dedup_hit", "claim_lost"))
        findings.append(finding)
    return findings

"""DF101: the same side effect executed more than once for one business action."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.attribution import action_facts, attribute
from dupfind.detectors._common import action_finding
from dupfind.effects import COUNTED, HARMFUL
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


@detector("duplicate_side_effect")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    findings: list[Finding] = []
    duplicates = ctx.effect_counts.filter(pl.col("confidence").is_not_null())
    counted = ctx.side_effects.with_row_index("_order").filter(pl.col("outcome").is_in(COUNTED)).join(
        duplicates.select("action_id", "effect"), on=["action_id", "effect"], how="semi"
    ).sort("action_id", "ts", "_order")
    requests_of = counted.rows_by_key(["action_id", "effect"], named=True, include_key=True)
    facts = action_facts(ctx, duplicates["action_id"].to_list())
    for row in duplicates.iter_rows(named=True):
        action_id, effect = row["action_id"], row["effect"]
        requests = requests_of.get((action_id, effect), [])
        harmful = row["confidence"] in HARMFUL
        count = row["success"] + row["uncertain"]
        exec_ids = [e for e in dict.fromkeys(r["exec_id"] for r in requests) if e is not None]
        summary = (
            f"{effect} side effect requested {count} times for one action "
            f"({row['success']} succeeded, {row['uncertain']} uncertain): {row['confidence']} duplicate"
        )
        finding = action_finding(
            ctx, rule, action_id, exec_ids, summary, identity_suffix=effect,
            severity=None if harmful else rule.param("possible_severity", "medium"),
        )
        why = attribute(ctx, action_id, requests, facts[action_id])
        finding.harmful = harmful
        finding.cause, finding.confidence, finding.cause_detail = why.cause, why.confidence, why.detail
        finding.remediation = rule.steps_for([why.cause])
        finding.figures = {
            "side_effect": effect,
            "side_effects": count,
            "succeeded": row["success"],
            "uncertain": row["uncertain"],
            "replayed": row["replayed"],
            "rejected": row["rejected"],
            "executions": len(exec_ids),
            "duplicate_confidence": row["confidence"],
            **why.figures,
        }
        ctx.attach_evidence(finding, [*why.rids, *(r["rid"] for r in requests)], why.notes, executions=exec_ids,
                            kinds=("receive", "start", "commit", "ack", "fail"))
        findings.append(finding)
    if not ctx.has_side_effect_records:
        findings.extend(_without_side_effect_records(ctx, rule))
    return findings


def _without_side_effect_records(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    """No side effect is logged at all: repeated complete (or overlapping) runs are possible harm."""
    execs = ctx.executions.filter(~pl.col("guarded"))
    overlapping = set(ctx.pairs.filter(pl.col("overlap") != "none")["action_id"].to_list())
    per_action = execs.group_by("action_id").agg(
        pl.col("completed").sum().alias("completed"), pl.col("exec_id"), pl.len().alias("runs")
    ).filter((pl.col("completed") >= 2) | (pl.col("action_id").is_in(list(overlapping)) & (pl.col("runs") >= 2)))
    findings = []
    for row in per_action.sort("action_id").iter_rows(named=True):
        summary = (
            f"the action ran {row['runs']} times ({row['completed']} to completion) but no side-effect records "
            "were logged: a repeat is possible, not proven (log provider requests with the job id to settle it)"
        )
        finding = action_finding(ctx, rule, row["action_id"], row["exec_id"], summary,
                                 identity_suffix="unlogged", severity=rule.param("possible_severity", "medium"))
        finding.confidence = "possible"
        finding.figures = {"side_effect": None, "executions": row["runs"], "completed_executions": row["completed"],
                           "duplicate_confidence": "possible"}
        ctx.attach_evidence(finding, [], executions=row["exec_id"])
        findings.append(finding)
    return findings

"""DF102: one action executed concurrently by several workers or processes."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding, seconds
from dupfind.detectors.cross_generation import cross_generation_pairs
from dupfind.detectors.lease_expiry import redelivery_pairs
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


@detector("concurrent_execution")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    pairs = ctx.pairs.filter((pl.col("overlap") != "none") & (pl.col("identity_a") != pl.col("identity_b")))
    # Pairs a more specific rule explains: lease expiry (DF103), two deploy generations (DF201).
    explained = pl.concat([
        redelivery_pairs(ctx).select("exec_id_a", "exec_id_b"),
        cross_generation_pairs(ctx).select("exec_id_a", "exec_id_b"),
    ])
    pairs = pairs.join(explained, on=["exec_id_a", "exec_id_b"], how="anti")
    findings: list[Finding] = []
    for action_id, group in pairs.group_by("action_id", maintain_order=True):
        action_id = action_id[0]
        worst = group.sort("overlap_s", descending=True).row(0, named=True)
        exec_ids = sorted(set(group["exec_id_a"].to_list()) | set(group["exec_id_b"].to_list()))
        certain = (group["overlap"] == "certain").any()
        guarded = bool(group["guarded_b"].all())
        severity = "low" if guarded else None
        summary = (
            f"{len(exec_ids)} executions on {len(set(group['identity_a'].to_list()) | set(group['identity_b'].to_list()))} "
            f"workers/processes overlapped by up to {worst['overlap_s']:.2f} s"
            + ("" if certain else " (within the clock-skew tolerance: possible)")
            + ("; the later ones were stopped by a guard" if guarded else "")
        )
        finding = action_finding(ctx, rule, action_id, exec_ids, summary, severity=severity)
        finding.confidence = "certain" if certain else "possible"
        finding.figures = {
            "overlap_s": seconds(worst["overlap_s"]),
            "executions": len(exec_ids),
            "overlap": "certain" if certain else "possible",
        }
        ctx.attach_evidence(finding, [], executions=exec_ids, kinds=("receive", "start", "side_effect", "ack", "finish", "fail"))
        findings.append(finding)
    return findings

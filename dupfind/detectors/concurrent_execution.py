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
    # Per action (one group-by rather than a few polars calls per action): its longest overlap,
    # executions, workers or processes, and whether any overlap is certain and every later run guarded.
    actions = pairs.group_by("action_id", maintain_order=True).agg(
        pl.col("overlap_s").max().alias("worst"),
        pl.col("exec_id_a").append(pl.col("exec_id_b")).unique().sort().alias("exec_ids"),
        pl.col("identity_a").append(pl.col("identity_b")).n_unique().alias("identities"),
        (pl.col("overlap") == "certain").any().alias("certain"),
        pl.col("guarded_b").all().alias("guarded"),
        # The run a guard stopped can be the one received first: it began its work after the other.
        (pl.col("guarded_a") | pl.col("guarded_b")).all().alias("guarded_either"),
    )
    findings: list[Finding] = []
    for row in actions.iter_rows(named=True):
        action_id, exec_ids, certain, guarded = row["action_id"], row["exec_ids"], row["certain"], row["guarded"]
        either = row["guarded_either"] and not guarded
        severity = "low" if guarded or either else None
        summary = (
            f"{len(exec_ids)} executions on {row['identities']} "
            f"workers/processes overlapped by up to {row['worst']:.2f} s"
            + ("" if certain else " (within the clock-skew tolerance: possible)")
            + ("; the later ones were stopped by a guard" if guarded else "")
            + ("; a guard stopped one run of each overlapping pair" if either else "")
        )
        finding = action_finding(ctx, rule, action_id, exec_ids, summary, severity=severity)
        finding.confidence = "certain" if certain else "possible"
        finding.figures = {
            "overlap_s": seconds(row["worst"]),
            "executions": len(exec_ids),
            "overlap": "certain" if certain else "possible",
        }
        ctx.attach_evidence(finding, [], executions=exec_ids, kinds=("receive", "start", "side_effect", "ack", "finish", "fail"))
        findings.append(finding)
    return findings

"""DF201: one action executed at the same time by workers of two deploy generations."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding, seconds
from dupfind.detectors.lease_expiry import redelivery_pairs
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


def cross_generation_pairs(ctx: AnalysisContext) -> pl.DataFrame:
    """Overlapping execution pairs on two known generations that no lease expiry explains."""
    pairs = ctx.pairs
    if pairs.height == 0:
        return pairs.with_columns(
            generation_a=pl.lit(None, dtype=pl.String), generation_b=pl.lit(None, dtype=pl.String)
        )
    generations = ctx.deploys.workers.select("worker_id", "generation")
    pairs = (
        pairs.filter(pl.col("overlap") != "none")
        .join(
            generations.rename({"worker_id": "worker_id_a", "generation": "generation_a"}), on="worker_id_a", how="left"
        )
        .join(
            generations.rename({"worker_id": "worker_id_b", "generation": "generation_b"}), on="worker_id_b", how="left"
        )
        .filter(
            pl.col("generation_a").is_not_null()
            & pl.col("generation_b").is_not_null()
            & (pl.col("generation_a") != pl.col("generation_b"))
        )
    )
    explained = redelivery_pairs(ctx).select("exec_id_a", "exec_id_b")
    return pairs.join(explained, on=["exec_id_a", "exec_id_b"], how="anti")


@detector("cross_generation_overlap")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    findings: list[Finding] = []
    for (action_id,), group in cross_generation_pairs(ctx).group_by("action_id", maintain_order=True):
        worst = group.sort("overlap_s", descending=True).row(0, named=True)
        exec_ids = sorted(set(group["exec_id_a"].to_list()) | set(group["exec_id_b"].to_list()))
        certain = bool((group["overlap"] == "certain").any())
        guarded = bool(group["guarded_b"].all() or group["guarded_a"].all())
        window = ctx.deploys.window_at(worst["start_b"])
        summary = (
            f"generation {worst['generation_a']} ({worst['identity_a']}) and generation {worst['generation_b']} "
            f"({worst['identity_b']}) ran it at the same time for {worst['overlap_s']:.2f} s"
            + (f", during deploy {window['deploy']}" if window else "")
            + ("" if certain else " (within the clock-skew tolerance: possible)")
            + ("; a guard stopped one of them" if guarded else "")
        )
        finding = action_finding(
            ctx, rule, action_id, exec_ids, summary, severity=rule.param("guarded_severity", "low") if guarded else None
        )
        finding.confidence = "certain" if certain else "possible"
        finding.figures = {
            "overlap_s": seconds(worst["overlap_s"]),
            "generations": sorted({worst["generation_a"], worst["generation_b"]}),
            "executions": len(exec_ids),
            "deploy": window["deploy"] if window else None,
            "s_after_deploy_start": seconds((worst["start_b"] - window["start"]).total_seconds()) if window else None,
        }
        rids, notes = [], {}
        if window and window["start_rid"] is not None:
            rids = [window["start_rid"]]
            notes[window["start_rid"]] = f"deploy {window['deploy']} started"
        ctx.attach_evidence(finding, rids, notes, executions=exec_ids,
                            kinds=("receive", "start", "side_effect", "ack", "finish", "fail"))
        findings.append(finding)
    return findings

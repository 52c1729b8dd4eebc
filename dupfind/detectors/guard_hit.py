"""DF106: a guard (dedup, unique constraint, lost claim, provider replay) stopped a repeat."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


@detector("guard_hit")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    guards = ctx.action_records("kind", "rid", "exec_id", "name").filter(pl.col("kind").is_in(["dedup_hit", "claim_lost"])).select("action_id", "rid", "exec_id", pl.col("name").cast(pl.String)).collect()
    replays = ctx.side_effects.filter(pl.col("outcome") == "replay").select(
        "action_id", pl.coalesce("result_rid", "rid").alias("rid"), "exec_id", pl.lit("provider replay").alias("name")
    ) if ctx.side_effects.height else None
    if replays is not None and replays.height:
        guards = pl.concat([guards, replays.with_columns(pl.col("rid").cast(guards.schema["rid"]))])
    actions = guards.group_by("action_id", maintain_order=True).agg(
        pl.col("exec_id").drop_nulls().unique().sort().alias("exec_ids"), pl.col("name").alias("names"), pl.col("rid").alias("rids"),
    )
    findings: list[Finding] = []
    for row in actions.iter_rows(named=True):
        action_id, exec_ids, rids = row["action_id"], row["exec_ids"], row["rids"]
        kinds = sorted(set(n or "guard" for n in row["names"]))
        summary = f"{len(rids)} repeat(s) stopped by a guard ({', '.join(kinds)}); the side effect did not repeat"
        finding = action_finding(ctx, rule, action_id, exec_ids, summary)
        finding.figures = {"guard_hits": len(rids)}
        ctx.attach_evidence(finding, rids, {r: "guard" for r in rids})
        findings.append(finding)
    return findings

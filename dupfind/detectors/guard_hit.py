"""DF106: a guard (dedup, unique constraint, lost claim, provider replay) stopped a repeat."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding
from dupfind.effects import COUNTED, duplicated_actions
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


@detector("guard_hit")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    guards = ctx.action_records("kind", "rid", "exec_id", "name").filter(pl.col("kind").is_in(["dedup_hit", "claim_lost"])).select("action_id", "rid", "exec_id", pl.col("name").cast(pl.String)).collect()
    denials = _lock_denials(ctx)
    if denials.height:
        guards = pl.concat([guards, denials.select(guards.columns).cast(guards.schema)])
    replays = ctx.side_effects.filter(pl.col("outcome") == "replay").select(
        "action_id", pl.coalesce("result_rid", "rid").alias("rid"), "exec_id", pl.lit("provider replay").alias("name")
    ) if ctx.side_effects.height else None
    if replays is not None and replays.height:
        guards = pl.concat([guards, replays.with_columns(pl.col("rid").cast(guards.schema["rid"]))])
    actions = guards.group_by("action_id", maintain_order=True).agg(
        pl.col("exec_id").drop_nulls().unique().sort().alias("exec_ids"), pl.col("name").alias("names"), pl.col("rid").alias("rids"),
    )
    passed = _repeats_of_job_type(ctx, actions["action_id"])
    findings: list[Finding] = []
    for row in actions.iter_rows(named=True):
        action_id, exec_ids, rids = row["action_id"], row["exec_ids"], row["rids"]
        kinds = sorted(set(n or "guard" for n in row["names"]))
        summary = f"{len(rids)} repeat(s) stopped by a guard ({', '.join(kinds)}); the side effect did not repeat"
        job_type, others = passed.get(action_id, (None, 0))
        if others:
            # The same guard, read before the send rather than claimed, let runs that started
            # together through: crediting it alone would tell the reader it works.
            summary += (f"; yet {others} other action(s) of {job_type} repeated the side effect (DF101): "
                        "this guard does not stop every repeat")
        finding = action_finding(ctx, rule, action_id, exec_ids, summary)
        finding.figures = {"guard_hits": len(rids)}
        if others:
            finding.figures["repeated_same_job_type"] = others
        ctx.attach_evidence(finding, rids, {r: "guard" for r in rids})
        findings.append(finding)
    return findings


def _lock_denials(ctx: AnalysisContext) -> pl.DataFrame:
    """The last lock denial of each execution a lock stopped (guarded, no side effect requested
    by it) where another execution of its action requested the side effect: the repeat the lock
    kept out (SET NX's second comer), not a blocking lock's wait nor a denial before the only run."""
    stopped = ctx.executions.filter(pl.col("guarded")).select("exec_id", "action_id")
    if stopped.height == 0 or ctx.side_effects.height == 0:
        return pl.DataFrame()
    requested = ctx.side_effects.filter(pl.col("outcome").is_in(COUNTED)).select("action_id", "exec_id").unique()
    stopped = stopped.join(requested, on="exec_id", how="anti").join(
        requested.select("action_id").unique(), on="action_id",
    )
    return ctx.action_records("kind", "rid", "exec_id", "name", "ts").filter(pl.col("kind") == "lock_denied").join(
        stopped.lazy().select("exec_id"), on="exec_id",
    ).sort("ts").group_by("exec_id", maintain_order=True).last().select(
        "action_id", "rid", "exec_id", pl.col("name").cast(pl.String),
    ).collect()


def _repeats_of_job_type(ctx: AnalysisContext, guarded: pl.Series) -> dict[int, tuple[str, int]]:
    """Per guarded action, its job type and how many other actions of that type repeated their
    side effect (DF101's): a guard that stops a late repeat and lets a concurrent one through."""
    duplicated = duplicated_actions(ctx.effect_counts)
    if duplicated.is_empty() or guarded.is_empty():
        return {}
    types = ctx.action_attributes.select("action_id", "job_type").filter(pl.col("job_type").is_not_null())
    repeats = types.join(pl.DataFrame({"action_id": duplicated.unique()}).cast({"action_id": types.schema["action_id"]}), on="action_id")
    per_type = repeats.group_by("job_type").agg(pl.len().alias("repeats"))
    mine = types.join(pl.DataFrame({"action_id": guarded}).cast({"action_id": types.schema["action_id"]}), on="action_id").join(per_type, on="job_type")
    others = pl.col("repeats") - pl.col("action_id").is_in(repeats["action_id"].implode()).cast(pl.UInt32)
    return {a: (t, int(n)) for a, t, n in mine.select("action_id", "job_type", others).iter_rows()}

"""DF204: a grace period shorter than the executions it interrupted."""

from __future__ import annotations

import math

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import seconds, worker_finding
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


def completed_durations(ctx: AnalysisContext) -> pl.DataFrame:
    """p95 duration (s) of completed executions per job type ('' for any)."""
    job_types = ctx.action_attributes.select("action_id", "job_type")
    done = (
        ctx.executions.filter(pl.col("completed"))
        .join(job_types, on="action_id", how="left")
        .with_columns(
            duration_s=(pl.coalesce("done_ts", "end") - pl.col("start")).dt.total_microseconds() / 1e6,
            job_type=pl.col("job_type").fill_null(""),
        )
    )
    per_type = done.group_by("job_type").agg(p95_s=pl.col("duration_s").quantile(0.95), completed=pl.len())
    overall = done.select(
        pl.lit("", dtype=pl.String).alias("job_type"),
        pl.col("duration_s").quantile(0.95).alias("p95_s"),
        pl.len().cast(per_type.schema["completed"]).alias("completed"),
    )
    return pl.concat([per_type.filter(pl.col("job_type") != ""), overall])


@detector("grace_period_short")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    model = ctx.deploys
    workers = model.workers.select("worker_id", "generation", "stop_ts", "grace_s", "grace_source", "last_ts")
    cut = (
        model.interrupted.join(workers, on="worker_id")
        .join(ctx.executions.select("exec_id", "action_id", "start"), on="exec_id")
        # Ended by the stop signal's grace running out, not by a kill before it (a pool process
        # killed while the worker ran on).
        .filter(pl.col("stop_ts").is_not_null() & (pl.col("start") < pl.col("stop_ts")) & (pl.col("kill_ts") >= pl.col("stop_ts")))
    )
    if cut.height == 0:
        return []
    p95 = completed_durations(ctx)
    overall = p95.filter(pl.col("job_type") == "")["p95_s"].first()
    job_types = ctx.action_attributes.select("action_id", "job_type")
    cut = (
        cut.join(job_types, on="action_id", how="left")
        .join(p95, on="job_type", how="left")
        .with_columns(
            p95_s=pl.coalesce("p95_s", pl.lit(overall, dtype=pl.Float64)),
            ran_s=(pl.col("kill_ts") - pl.col("start")).dt.total_microseconds() / 1e6,
            lead_s=(pl.col("stop_ts") - pl.col("start")).dt.total_microseconds() / 1e6,
            silent_s=(pl.col("last_ts") - pl.col("stop_ts")).dt.total_microseconds() / 1e6,
        )
    )
    margin = float(rule.param("margin", 1.25))
    findings: list[Finding] = []
    cut = cut.with_columns(group=pl.coalesce("generation", "worker_id"))
    for (group_key,), group in cut.group_by("group", maintain_order=True):
        grace = group["grace_s"].drop_nulls().max()
        source = group["grace_source"].drop_nulls().first() if grace is not None else None
        longest = float(group["ran_s"].max())
        typical = group["p95_s"].drop_nulls().max()
        # What the grace period would have had to be for the slowest of them to finish.
        needed = max(float(r["ran_s"] - r["lead_s"]) for r in group.iter_rows(named=True))
        if typical is not None:
            needed = max(needed, float(typical) - float(group["lead_s"].min()))
        suggested = math.ceil(max(needed, float(typical or 0.0)) * margin)
        workers_cut = sorted(set(group["worker_id"].to_list()))
        shown = (
            f"{grace:g} s ({source})"
            if grace is not None
            else (f"not logged (the workers went silent within {group['silent_s'].max():.0f} s of the stop signal)")
        )
        summary = (
            f"grace period {shown} cut short {group.height} execution(s) that had started before the stop signal "
            f"on {len(workers_cut)} worker(s); they had run up to {longest:.1f} s"
            + (f"; completed jobs of this type take up to {typical:.1f} s (p95)" if typical is not None else "")
        )
        identity = f"generation={group_key}" if group["generation"][0] is not None else f"worker={group_key}"
        finding = worker_finding(ctx, rule, workers_cut[0], identity, summary, group["exec_id"].to_list())
        finding.workers = workers_cut
        finding.ids["worker_id"] = workers_cut
        finding.confidence = "certain" if source == "logged" else "likely"
        finding.figures = {
            "grace_s": grace,
            "grace_source": source,
            "interrupted_started_before_stop": group.height,
            "longest_run_s": seconds(longest),
            "p95_completed_s": seconds(typical) if typical is not None else None,
            "suggested_grace_s": suggested,
        }
        exec_ids = group["exec_id"].to_list()
        stop_rids = model.workers.filter(pl.col("worker_id").is_in(workers_cut))["stop_rid"].drop_nulls().to_list()
        kill_rids = [int(r) for r in group["kill_rid"].unique().to_list() if r is not None]
        notes = {r: "stop signal" for r in stop_rids} | {r: "worker ended" for r in kill_rids}
        ctx.attach_evidence(finding, [*stop_rids, *kill_rids], notes, executions=exec_ids, kinds=("receive", "start", "side_effect"))
        findings.append(finding)
    return findings

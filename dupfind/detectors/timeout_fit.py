"""DF401: processing durations at or above the visibility timeout (the queue will redeliver running jobs)."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import execution_ids
from dupfind.findings import Finding
from dupfind.queue_health import queue_advice, timeout_units
from dupfind.rules_registry import Rule, detector
from dupfind.schema import as_strings


@detector("timeout_below_duration")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    quantile = float(rule.param("quantile", 0.95))
    min_executions = int(rule.param("min_executions", 5))
    label = f"p{quantile * 100:g}"
    findings: list[Finding] = []
    durations = ctx.execution_durations.filter(pl.col("duration_s").is_not_null())
    for queue, service in timeout_units(ctx, sorted(set(durations["queue"].fill_null("").to_list()))):
        runs = durations.filter(pl.col("queue").fill_null("") == queue)
        if service is not None:
            runs = runs.filter(pl.col("service") == service)
        timeout = ctx.timeout_source(queue or None, service)
        if timeout is None or runs.height < min_executions or ctx.lease_extensions.get(queue):
            continue  # nothing to compare with, too few runs, or the lease is extended while running
        timeout_s, source = timeout
        timeout_name = ctx.timeout_name(queue or None, service)
        value = float(runs["duration_s"].quantile(quantile, "linear"))
        if value < timeout_s:
            continue
        advice = queue_advice(ctx, queue, service)
        over = runs.filter(pl.col("duration_s") >= timeout_s)
        where = (f"queue {queue!r}" if queue else "the queue") + (f" (its {service} consumers)" if service else "")
        summary = (
            f"{label} processing duration {value:.1f} s is at or above the {timeout_s:g} s {timeout_name} "
            f"({source}) of {where}: {over.height} of {runs.height} executions ran at least that long, "
            f"so the queue hands them to another worker while they still run"
        )
        if advice.redeliveries:
            summary += f"; {advice.redeliveries} such redeliveries were logged"
        longest = over.sort("duration_s", descending=True).head(3)
        finding = Finding(
            rule=rule.code,
            name=rule.name,
            title=rule.title,
            severity="high" if advice.redeliveries else rule.severity,
            identity=f"queue:{queue}" + (f"|service:{service}" if service else ""),
            summary=summary,
            confidence="certain" if source != "inferred" else "likely",
            ids={"queue": [queue] if queue else [], **execution_ids(ctx, longest["exec_id"].to_list())},
            workers=sorted(
                set(ctx.executions.filter(pl.col("exec_id").is_in(longest["exec_id"].to_list()))["identity"].to_list())
            ),
            deployments=sorted(d for d in set(over["deployment_id"].to_list()) if d is not None),
            first_ts=runs["entry"].min(),
            last_ts=runs["end_ts"].max(),
            remediation=list(rule.remediation),
        )
        finding.figures = {
            "queue": queue or None,
            **({"service": service} if service else {}),
            "timeout_s": timeout_s,
            "timeout_source": source,
            "timeout_name": timeout_name,
            "quantile": quantile,
            "duration_at_quantile_s": round(value, 3),
            **{f"duration_{k}_s": v for k, v in advice.durations.items() if k != "n"},
            "executions": runs.height,
            "at_or_above_timeout": over.height,
            "share_at_or_above_timeout": round(over.height / runs.height, 4),
            "redeliveries": advice.redeliveries,
            "recommended_timeout_s": advice.recommended_s,
            "redeliveries_avoided": advice.avoided,
        }
        stated = _statement(ctx, queue, service)
        redelivered = _redelivered(ctx, queue, runs if service else None)
        notes = {**{r: "timeout stated here" for r in stated}, **{r: "redelivered while running" for r in redelivered}}
        ctx.attach_evidence(finding, stated + redelivered, notes, executions=longest["exec_id"].to_list(),
                            kinds=("receive", "start", "ack", "finish", "fail"))
        findings.append(finding)
    return findings


def _statement(ctx: AnalysisContext, queue: str, service: str | None) -> list[int]:
    """The first record stating the timeout of the queue (by its service's consumers, where given)."""
    names = ctx.present_columns("rid", "queue", "visibility_timeout_s", "service" if service else "rid")
    stated = as_strings(ctx.columns(*names).filter(pl.col("visibility_timeout_s").is_not_null()))
    if service is not None and "service" in stated.columns:
        stated = stated.filter(pl.col("service") == service)
    return (stated.filter(pl.col("queue").fill_null("") == queue) if queue else stated)["rid"].head(1).to_list()


def _redelivered(ctx: AnalysisContext, queue: str, runs: pl.DataFrame | None) -> list[int]:
    """The first two redeliveries of the queue (after one of these runs, where given)."""
    gaps = ctx.redelivery_gaps.filter(pl.col("queue") == queue)
    if runs is not None:
        gaps = gaps.join(runs.select(pl.col("exec_id").alias("prev_exec_id")), on="prev_exec_id", how="semi")
    return gaps["rid"].head(2).to_list()

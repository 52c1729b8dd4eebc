"""Helpers shared by detectors: a finding pre-filled from an action (or a worker) and its executions."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.findings import Finding
from dupfind.rules_registry import Rule


def action_finding(
    ctx: AnalysisContext, rule: Rule, action_id: int, exec_ids: list[int], summary: str,
    identity_suffix: str = "", severity: str | None = None,
) -> Finding:
    """A finding about one action, with ids, workers, attempts, deployments and time span."""
    execs = ctx.executions_of(action_id).filter(pl.col("exec_id").is_in(exec_ids))
    records = ctx.records_of(action_id)
    identity = ctx.action_identity(action_id) + (f"#{identity_suffix}" if identity_suffix else "")
    return _finding(
        rule, identity, summary, severity, execs,
        ids=ctx.action_ids(action_id),
        workers=list(dict.fromkeys(execs["identity"].to_list())),
        deployments=list(dict.fromkeys(d for d in execs["deployment_id"].to_list() if d is not None)),
        first_ts=records["ts"].min(),
        last_ts=records["ts"].max(),
        action_id=action_id,
    )


def _finding(rule: Rule, identity: str, summary: str, severity: str | None, execs: pl.DataFrame, **fields) -> Finding:
    return Finding(
        rule=rule.code, name=rule.name, title=rule.title, severity=severity or rule.severity,
        identity=identity, summary=summary, remediation=list(rule.remediation),
        attempts=sorted({a for a in execs["attempt"].to_list() if a is not None}), **fields,
    )


def seconds(value) -> float:
    return round(float(value), 3)


def worker_finding(
    ctx: AnalysisContext, rule: Rule, worker: str, identity: str, summary: str, exec_ids: list[int],
    severity: str | None = None,
) -> Finding:
    """A finding about one worker (or generation) and the executions it concerns."""
    execs = ctx.executions.filter(pl.col("exec_id").is_in(exec_ids))
    generation = ctx.deploys.generation_of().get(worker)
    return _finding(
        rule, identity, summary, severity, execs,
        ids={"worker_id": [worker], **execution_ids(ctx, exec_ids)},
        workers=[worker],
        deployments=[generation] if generation else [],
        first_ts=execs["start"].min(),
        last_ts=execs["end"].max(),
    )


def execution_ids(ctx: AnalysisContext, exec_ids: list[int]) -> dict[str, list[str]]:
    """The job, event and idempotency ids of some executions (the JSON contract always carries these three)."""
    records = ctx.records_of_executions(exec_ids)
    return {k: sorted(records[k].drop_nulls().unique().to_list()) for k in ("job_id", "event_id", "idempotency_key")}

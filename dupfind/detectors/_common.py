"""Helpers shared by detectors: a finding pre-filled from an action (or a worker) and its executions."""

from __future__ import annotations

from dupfind.analysis import AnalysisContext
from dupfind.finding_details import execution_ids_of
from dupfind.findings import Finding
from dupfind.rules_registry import Rule


def action_finding(
    ctx: AnalysisContext, rule: Rule, action_id: int, exec_ids: list[int], summary: str,
    identity_suffix: str = "", severity: str | None = None,
) -> Finding:
    """A finding about one action; its ids, workers, attempts, deployments and time span are
    filled with every other finding's (AnalysisContext.fill_details)."""
    identity = ctx.action_identity(action_id) + (f"#{identity_suffix}" if identity_suffix else "")
    finding = _finding(rule, identity, summary, severity, action_id=action_id)
    ctx.request_details(finding, action_id=action_id, exec_ids=list(exec_ids))
    return finding


def _finding(rule: Rule, identity: str, summary: str, severity: str | None, **fields) -> Finding:
    return Finding(
        rule=rule.code, name=rule.name, title=rule.title, severity=severity or rule.severity,
        identity=identity, summary=summary, remediation=list(rule.remediation), **fields,
    )


def seconds(value) -> float:
    return round(float(value), 3)


def worker_finding(
    ctx: AnalysisContext, rule: Rule, worker: str, identity: str, summary: str, exec_ids: list[int],
    severity: str | None = None,
) -> Finding:
    """A finding about one worker (or generation) and the executions it concerns; its ids (the
    worker and its jobs'), generation, attempts and time span are filled later (fill_details)."""
    finding = _finding(rule, identity, summary, severity)
    ctx.request_details(finding, worker=worker, exec_ids=list(exec_ids))
    return finding


def execution_ids(ctx: AnalysisContext, exec_ids: list[int]) -> dict[str, list[str]]:
    """The job, event and idempotency ids of some executions (the JSON contract always carries these three)."""
    return execution_ids_of(ctx, {0: exec_ids})[0]

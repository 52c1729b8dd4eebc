"""DF202: a worker kept taking jobs after its stop signal."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import seconds, worker_finding
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector
from dupfind.timefmt import iso, iso_us


@detector("work_after_stop_signal")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    model = ctx.deploys
    interrupted = set(model.interrupted["exec_id"].to_list())
    duplicated = set(ctx.effect_counts.filter(pl.col("confidence").is_in(["certain", "likely"]))["action_id"].to_list())
    findings: list[Finding] = []
    for (worker, stop_rid), group in model.after_stop.group_by("worker_id", "stop_rid", maintain_order=True):
        group = group.sort("entry")
        first, last = group.row(0, named=True), group.row(group.height - 1, named=True)
        exec_ids = group["exec_id"].to_list()
        cut = [e for e in exec_ids if e in interrupted]
        repeated = {a for a in group["action_id"].to_list() if a in duplicated}
        window = model.window_at(first["stop_ts"], tail_s=0)
        clock = "its own log" if first["same_clock"] else "the stop record (beyond the clock-skew tolerance)"
        summary = (
            f"took {group.height} job(s) after its stop signal at {iso(first['stop_ts'])} (by {clock}), "
            f"the last {last['after_s']:.1f} s after it"
            + (f"; {len(cut)} of them {'was' if len(cut) == 1 else 'were'} cut short when it ended" if cut else "")
            + (f"; {len(repeated)} of their actions had a side effect repeated" if repeated else "")
        )
        finding = worker_finding(
            ctx, rule, worker, f"worker={worker}|stop={iso_us(first['stop_ts'])}", summary, exec_ids
        )
        finding.confidence = "certain"
        finding.first_ts = first["stop_ts"]
        finding.figures = {
            "executions_after_stop": group.height,
            "first_after_s": seconds(first["after_s"]),
            "last_after_s": seconds(last["after_s"]),
            "interrupted_after_stop": len(cut),
            "duplicated_actions": len(repeated),
            "stop_from_own_log": bool(first["same_clock"]),
            "deploy": window["deploy"] if window else None,
        }
        entries = ctx.records_of_executions(exec_ids).filter(pl.col("kind").is_in(["receive", "start"]))
        entry_rids = entries.sort("ts").unique("exec_id", keep="first", maintain_order=True)["rid"].to_list()
        notes = {int(stop_rid): "stop signal"} | {r: "taken after the stop signal" for r in entry_rids}
        ctx.attach_evidence(finding, [int(stop_rid), *entry_rids], notes)
        findings.append(finding)
    return findings

"""DF202: a worker kept taking jobs after its stop signal."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import seconds, worker_finding
from dupfind.effects import duplicated_actions
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector
from dupfind.timefmt import iso, iso_us


@detector("work_after_stop_signal")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    model = ctx.deploys
    interrupted = set(model.interrupted["exec_id"].to_list())
    duplicated = set(duplicated_actions(ctx.effect_counts).to_list())
    findings: list[Finding] = []
    after = model.after_stop.with_row_index("_order").sort("worker_id", "stop_rid", "entry", "_order")
    entries = ctx.action_records("exec_id", "kind", "ts", "source", "line", "rid").filter(
        pl.col("exec_id").is_in(after["exec_id"].implode()) & pl.col("kind").is_in(["receive", "start"])
    ).sort("ts", "source", "line").unique("exec_id", keep="first", maintain_order=True).collect()
    entry_rid = dict(entries.select("exec_id", "rid").iter_rows())
    groups = after.rows_by_key(["worker_id", "stop_rid"], named=True, include_key=True)
    order = after.group_by("worker_id", "stop_rid").agg(pl.col("_order").min()).sort("_order")
    for worker, stop_rid in order.select("worker_id", "stop_rid").iter_rows():
        group = groups[(worker, stop_rid)]
        first, last = group[0], group[-1]
        exec_ids = [r["exec_id"] for r in group]
        cut = [e for e in exec_ids if e in interrupted]
        repeated = {r["action_id"] for r in group if r["action_id"] in duplicated}
        window = model.window_at(first["stop_ts"], tail_s=0)
        clock = "its own log" if first["same_clock"] else "the stop record (beyond the clock-skew tolerance)"
        summary = (
            f"took {len(group)} job(s) after its stop signal at {iso(first['stop_ts'])} (by {clock}), "
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
            "executions_after_stop": len(group),
            "first_after_s": seconds(first["after_s"]),
            "last_after_s": seconds(last["after_s"]),
            "interrupted_after_stop": len(cut),
            "duplicated_actions": len(repeated),
            "stop_from_own_log": bool(first["same_clock"]),
            "deploy": window["deploy"] if window else None,
        }
        entry_rids = [entry_rid[e] for e in dict.fromkeys(exec_ids) if e in entry_rid]
        notes = {int(stop_rid): "stop signal"} | {r: "taken after the stop signal" for r in entry_rids}
        ctx.attach_evidence(finding, [int(stop_rid), *entry_rids], notes)
        findings.append(finding)
    return findings

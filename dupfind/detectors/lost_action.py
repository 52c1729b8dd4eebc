"""DF107: actions published or received that never reached a terminal record."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector

TERMINAL = ["ack", "finish", "fail", "dedup_hit", "claim_lost"]
CONSUMED = ["receive", "start"]


@detector("lost_action")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    timeout = ctx.timeout_for(None) or 0.0
    grace = max(float(rule.param("grace_s", 120)), 2 * timeout)
    end_of_logs = ctx.columns("ts")["ts"].max()
    if end_of_logs is None:  # no record at all (every line outside --since/--until, say)
        return []
    # Aggregated lazily over the records; the rids are gathered for the lost actions only.
    lost = ctx.action_records("kind", "ts").group_by("action_id").agg(
        pl.col("kind").is_in(["publish", "receive", "start"]).any().alias("entered"),
        pl.col("kind").is_in(TERMINAL).any().alias("terminal"),
        pl.col("kind").is_in(CONSUMED).any().alias("received"),
        pl.col("ts").max().alias("last"),
    ).filter(pl.col("entered") & ~pl.col("terminal") & (pl.col("last") < end_of_logs - timedelta(seconds=grace))).collect()
    lost = _followed(ctx, lost)
    if lost.height == 0:
        return []
    rids = ctx.action_records("rid").filter(pl.col("action_id").is_in(lost["action_id"].implode())).group_by("action_id").agg(
        pl.col("rid")
    ).collect()
    # Each action's executions in the order executions_of gives them (by start), in one pass: a
    # lookup an action took 45 us (60,000 lost actions: 5 s).
    runs = ctx.executions.filter(pl.col("action_id").is_in(lost["action_id"].implode())).sort("start", maintain_order=True) \
        .group_by("action_id", maintain_order=True).agg(pl.col("exec_id"))
    per_action = lost.join(rids, on="action_id").join(runs, on="action_id", how="left")
    findings: list[Finding] = []
    for row in per_action.sort("action_id").iter_rows(named=True):
        action_id = row["action_id"]
        exec_ids = row["exec_id"] or []
        state = "received but never finished" if row["received"] else "published but never received"
        finding = action_finding(ctx, rule, action_id, exec_ids, f"{state}; last record {(end_of_logs - row['last']).total_seconds():.0f} s before the end of the logs")
        finding.figures = {"silence_s": round((end_of_logs - row["last"]).total_seconds(), 1), "grace_s": grace}
        ctx.attach_evidence(finding, row["rid"])
        findings.append(finding)
    return findings


def _followed(ctx: AnalysisContext, lost: pl.DataFrame) -> pl.DataFrame:
    """The lost actions whose consumers' logs are among the inputs. An action published to a
    queue that no record of the inputs receives from (the producer's log exported without its
    workers': 92,092 findings for one API's log) was not seen lost: a warning says so instead."""
    queues = ctx.action_attributes.select("action_id", pl.col("queue").fill_null(""))
    consumed = (ctx.action_records("kind").filter(pl.col("kind").is_in(CONSUMED)).select("action_id").unique().collect()
                .join(queues, on="action_id", how="left")["queue"].fill_null("").unique())
    lost = lost.join(queues, on="action_id", how="left").with_columns(pl.col("queue").fill_null(""))
    unseen = ~pl.col("received") & ~pl.col("queue").is_in(consumed.implode())
    for queue, count in lost.filter(unseen).group_by("queue").len().sort("queue").rows():
        where = f"to queue {queue!r}" if queue else "with no queue named"
        ctx.detector_warnings.append(
            f"{count:,} action(s) published {where} were never received, and no record of the inputs receives "
            f"{'from that queue' if queue else 'such an action'}: its workers' logs are probably not among the inputs "
            "(DF107 left them out)"
        )
    return lost.filter(~unseen).drop("queue")

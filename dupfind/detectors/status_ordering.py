"""DF104: the side effect came before the status write, and another attempt ran in between."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import action_finding, seconds
from dupfind.effects import COUNTED
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector


@detector("status_ordering")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    # A request carrying the provider's idempotency key makes the window safe: a repeat is a replay.
    requests = ctx.side_effects.filter(
        pl.col("outcome").is_in(COUNTED) & pl.col("exec_id").is_not_null() & ~pl.col("provider_protected")
    )
    if requests.height == 0:
        return []
    first_request = requests.group_by("exec_id").agg(
        pl.col("ts").min().alias("effect_ts"), pl.col("rid").sort_by("ts").first().alias("effect_rid"),
        pl.col("result_ts").drop_nulls().min().alias("result_ts"),
    )
    commits = ctx.action_records("kind", "exec_id", "ts", "rid").filter(pl.col("kind") == "commit").select("exec_id", pl.col("ts").alias("commit_ts_all"), pl.col("rid").alias("commit_rid")).collect()
    windows = ctx.executions.select("exec_id", "action_id", "identity", "completed", "failed").join(first_request, on="exec_id").join(commits, on="exec_id", how="left").filter(
        pl.col("commit_ts_all").is_null() | (pl.col("commit_ts_all") >= pl.col("effect_ts"))
    ).sort("commit_ts_all").group_by("exec_id").agg(pl.all().first())
    # Window end: the status write; without one, the window never closed (failure, kill, lease loss).
    windows = windows.with_columns(
        window_end=pl.col("commit_ts_all"),
        open_ended=pl.col("commit_ts_all").is_null(),
    )
    others = ctx.executions.select(
        pl.col("exec_id").alias("other_id"), "action_id", pl.coalesce("entry_ts", "start").alias("other_entry"),
        pl.col("guarded").alias("other_guarded"), pl.col("identity").alias("other_identity"),
    )
    # A later execution stopped by a guard (claim lost, dedup hit) is the design working: DF106.
    joined = windows.join(others, on="action_id").filter(
        (pl.col("other_id") != pl.col("exec_id")) & ~pl.col("other_guarded")
        & (pl.col("other_entry") > pl.col("effect_ts"))
        & (pl.col("open_ended") | (pl.col("other_entry") < pl.col("window_end")))
    )
    if joined.height == 0:
        return []
    sent_again = set(requests["exec_id"].to_list())
    # Each action's earliest other start, actions in the order they first appear (one polars
    # pass rather than a sort per action).
    hits = joined.with_columns(_order=pl.int_range(pl.len()).min().over("action_id")).sort(
        "_order", "other_entry", maintain_order=True,
    ).unique("action_id", keep="first", maintain_order=True)
    findings: list[Finding] = []
    for hit in hits.iter_rows(named=True):
        action_id = hit["action_id"]
        repeated = hit["other_id"] in sent_again
        severity = None if repeated else "medium"
        if hit["open_ended"]:
            how = "failed" if hit["failed"] else ("never saved the status" if not hit["completed"] else "acked without a status write")
            summary = (
                f"{hit['identity']} did the side effect, then {how}; {hit['other_identity']} ran the action again "
                f"{(hit['other_entry'] - hit['effect_ts']).total_seconds():.1f} s later"
            )
            window_s = None
        else:
            window_s = (hit["window_end"] - hit["effect_ts"]).total_seconds()
            summary = (
                f"status written {window_s:.2f} s after the side effect; {hit['other_identity']} started "
                f"{(hit['other_entry'] - hit['effect_ts']).total_seconds():.2f} s after the side effect, inside that window"
            )
        summary += "; it sent again" if repeated else "; it did not send this time (near miss)"
        exec_ids = [hit["exec_id"], hit["other_id"]]
        finding = action_finding(ctx, rule, action_id, exec_ids, summary, severity=severity)
        finding.confidence = "certain"
        finding.figures = {
            "window_s": seconds(window_s) if window_s is not None else None,
            "second_start_after_effect_s": seconds((hit["other_entry"] - hit["effect_ts"]).total_seconds()),
            "repeated": repeated,
        }
        if hit["result_ts"] is not None and hit["window_end"] is not None:
            finding.figures["success_before_status_s"] = seconds((hit["window_end"] - hit["result_ts"]).total_seconds())
        notes = {hit["effect_rid"]: "side effect before the status write"}
        rids = [hit["effect_rid"]]
        if hit["commit_rid"] is not None:
            rids.append(hit["commit_rid"])
            notes[hit["commit_rid"]] = "status write"
        ctx.attach_evidence(finding, rids, notes, executions=exec_ids,
                            kinds=("receive", "start", "side_effect", "side_effect_result", "commit", "fail", "ack"))
        findings.append(finding)
    return findings

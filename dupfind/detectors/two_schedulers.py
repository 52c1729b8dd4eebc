"""DF108: two schedulers sent the same scheduled task for the same due time."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.detectors._common import seconds, worker_finding
from dupfind.effects import duplicated_actions
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector
from dupfind.schedules import RUN_AFTER_SEND_S
from dupfind.schema import as_strings
from dupfind.timefmt import iso

LIFE_KINDS = ("worker_start", "stop_signal", "worker_exit", "worker_killed")


def _runs_twice(ctx: AnalysisContext) -> pl.DataFrame:
    """Actions run twice by two sends: their runs ran two or more messages, or, sent to no queue
    (an in-process scheduler in each replica), two or more runs with no message at all:
    action_id, job_type, entry (the first run's), exec_ids."""
    runs = ctx.executions.select("action_id", "exec_id", "job_ids", entry=pl.coalesce("entry_ts", "start"))
    per_action = runs.group_by("action_id").agg(
        pl.col("job_ids").list.explode(keep_nulls=False, empty_as_null=False).n_unique().alias("messages"),
        pl.col("entry").min(), pl.col("exec_id").unique(maintain_order=True).alias("exec_ids"),
    ).filter((pl.col("messages") >= 2) | ((pl.col("messages") == 0) & (pl.col("exec_ids").list.len() >= 2)))
    job_types = ctx.action_attributes.select("action_id", pl.col("job_type").fill_null(""))
    return per_action.join(job_types, on="action_id", how="left").drop_nulls("entry").sort("entry")


def _linked(runs: pl.DataFrame, pairs: pl.DataFrame, skew_s: float) -> pl.DataFrame:
    """The actions of `runs` whose first run entered after one of these doubled sends of its task
    (within RUN_AFTER_SEND_S)."""
    sends = pairs.select("job_type", sent=pl.min_horizontal("ts_a", "ts_b") - timedelta(seconds=skew_s)).sort("sent")
    return runs.join_asof(
        sends, left_on="entry", right_on="sent", by="job_type", strategy="backward",
        tolerance=timedelta(seconds=RUN_AFTER_SEND_S + skew_s), check_sortedness=False,
    ).filter(pl.col("sent").is_not_null())


@detector("two_schedulers")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    pairs = ctx.scheduler_pairs
    if pairs.is_empty():
        return []
    runs = _runs_twice(ctx)
    duplicated = set(duplicated_actions(ctx.effect_counts).to_list())
    life = as_strings(ctx.columns("rid", "ts", "kind", "worker_id").filter(pl.col("kind").is_in(LIFE_KINDS))).sort("ts", "rid")
    findings: list[Finding] = []
    for (who_a, who_b), group in pairs.group_by("publisher_a", "publisher_b", maintain_order=True):
        group = group.with_columns(
            first=pl.min_horizontal("ts_a", "ts_b"), last=pl.max_horizontal("ts_a", "ts_b"),
            gap=(pl.col("ts_a") - pl.col("ts_b")).dt.total_microseconds().abs() / 1e6,
        ).sort("first")
        start, end = group["first"].min(), group["last"].max()
        tasks = sorted({t for t in group["job_type"].to_list() if t})
        # Runs of no known task type (their task's own lines linked nothing: a batch's message)
        # go with the one task these schedulers sent, by time.
        typed = runs.with_columns(job_type=pl.when(pl.col("job_type") == "").then(pl.lit(tasks[0] if len(tasks) == 1 else ""))
                                  .otherwise(pl.col("job_type")))
        linked = _linked(typed, group, ctx.skew_s)
        repeated = [a for a in linked["action_id"].to_list() if a in duplicated]
        entries = group["entry"].unique().sort().to_list()
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        summary = (
            f"{who_a} and {who_b} both sent {len(entries)} schedule entr{'y' if len(entries) == 1 else 'ies'} "
            f"({shown}{'; ' + ', '.join(tasks) if tasks and tasks != entries else ''}) for the same due time, "
            f"{group.height} time(s) from {iso(start)} to {iso(end)}, the two sends "
            f"{group['gap'].min():.3f}-{group['gap'].max():.3f} s apart"
        )
        window = ctx.deploys.window_at(start)
        if window is not None:
            summary += f", during deploy {window['deploy']}"
        if repeated:
            summary += f": {linked.height} action(s) ran twice, {len(repeated)} repeated the side effect"
            severity = None
        elif linked.height and ctx.has_side_effect_records:
            summary += f": {linked.height} action(s) ran twice; the second run did not repeat the side effect"
            severity = "low"
        else:
            summary += ": every task then was published twice (whether its runs repeated a side effect is not in these logs)"
            severity = "medium"
        order = repeated + [a for a in linked["action_id"].to_list() if a not in duplicated]
        exec_of = dict(zip(linked["action_id"].to_list(), linked["exec_ids"].to_list()))
        exec_ids = [e for a in order for e in exec_of[a]]
        identity = f"schedulers={who_a}+{who_b}"
        finding = worker_finding(ctx, rule, who_b, identity, summary, exec_ids, severity=severity)
        finding.workers = [who_a, who_b]
        finding.cause = "double_publish"
        finding.confidence = "certain"
        finding.figures = {
            "schedulers": 2, "entries": len(entries), "doubled_sends": group.height,
            "send_gap_max_s": seconds(group["gap"].max()), "overlap_s": seconds((end - start).total_seconds()),
            "actions_run_twice": linked.height, "actions_repeated": len(repeated),
        }
        first, last = group.row(0, named=True), group.row(-1, named=True)
        rids = [first["rid_a"], first["rid_b"], last["rid_a"], last["rid_b"]]
        notes = {int(r): "sent by both schedulers" for r in rids}
        # The two schedulers' lives around the overlap: the second started, the first stopped.
        lives = life.filter(pl.col("worker_id").is_in([who_a, who_b]))
        started = lives.filter((pl.col("kind") == "worker_start") & (pl.col("ts") <= end))
        stopping = lives.filter((pl.col("kind") != "worker_start") & (pl.col("ts") >= start))
        for row in started.tail(2).iter_rows(named=True):
            notes[int(row["rid"])] = f"scheduler {row['worker_id']} started"
        for row in stopping.head(2).iter_rows(named=True):
            notes[int(row["rid"])] = f"scheduler {row['worker_id']} " + ("stop signal" if row["kind"] == "stop_signal" else "ended")
        ctx.attach_evidence(
            finding, list(notes), notes, executions=[e for a in order[:1] for e in exec_of[a]],
            kinds=("receive", "start", "side_effect", "dedup_hit", "claim_lost"),
        )
        findings.append(finding)
    return findings

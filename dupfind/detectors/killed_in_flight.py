"""DF203: a worker killed, exited or gone with executions in flight (they will be delivered again)."""

from __future__ import annotations

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.deploys import first_stops, life_records
from dupfind.detectors._common import seconds, worker_finding
from dupfind.effects import COUNTED
from dupfind.findings import Finding
from dupfind.rules_registry import Rule, detector
from dupfind.timefmt import iso, iso_us

KILL_WORDS = {"worker_killed": "killed", "worker_exit": "exited", "worker_gone": "went silent (no exit logged)",
              "connection_lost": "went silent, its broker connection dropped (no kill logged)",
              "process_killed": "lost a pool process (killed)"}


@detector("killed_in_flight")
def detect(ctx: AnalysisContext, rule: Rule) -> list[Finding]:
    model = ctx.deploys
    if model.interrupted.height == 0:
        return []
    effects_done = set(ctx.side_effects.filter(pl.col("outcome").is_in(COUNTED))["exec_id"].drop_nulls().to_list())
    stops = _stop_before(ctx, model.interrupted.select("worker_id", "kill_ts").unique())
    exit_codes = dict(model.workers.select("worker_id", "exit_code").rows())
    findings: list[Finding] = []
    ends = model.interrupted.group_by("worker_id", "kill_rid", maintain_order=True).agg(
        pl.all().exclude("exec_id").first(), pl.col("exec_id"),
    )
    # Runs that never began: received (a consumer's prefetch) and held until the worker ended.
    unstarted = set(ctx.executions.filter(
        pl.col("exec_id").is_in(model.interrupted["exec_id"].implode()) & (pl.col("last_kind") == "receive")
    )["exec_id"].to_list())
    for row in ends.iter_rows(named=True):
        worker, kill_rid, exec_ids = row["worker_id"], row["kill_rid"], row["exec_id"]
        done = [e for e in exec_ids if e in effects_done]
        held = sum(1 for e in exec_ids if e in unstarted)
        stop_ts = stops.get((worker, row["kill_ts"]))
        how = KILL_WORDS.get(row["kill_kind"], row["kill_kind"])
        crash = ctx.crash_exception(int(kill_rid)) if row["kill_kind"] == "worker_exit" else None
        code = exit_codes.get(worker)
        summary = (
            (f"crashed at {iso(row['kill_ts'])} (uncaught {crash})" if crash is not None else f"{how} at {iso(row['kill_ts'])}")
            # (A process that exits 0 after its jobs were killed, as Sidekiq's after its hard
            # shutdown, was not killed by that code.)
            + (f" (exit code {code})" if code is not None and not row["inferred"]
               and not (code == 0 and row["kill_kind"] == "worker_killed") else "")
            + (
                f", {(row['kill_ts'] - stop_ts).total_seconds():.0f} s after its stop signal"
                if stop_ts and row["kill_ts"] >= stop_ts
                else ""
            )
            + f", with {len(exec_ids)} execution(s) started and not acked"
            + (f" ({held} of them received and never begun)" if held else "")
            + ": the queue will deliver them again"
            + (
                f"; {len(done)} had already requested the side effect"
                if done
                else "; none had requested the side effect yet"
            )
        )
        severity = None if done else rule.param("no_side_effect_severity", "low")
        identity = f"worker={worker}|end={iso_us(row['kill_ts'])}"
        finding = worker_finding(ctx, rule, worker, identity, summary, exec_ids, severity=severity)
        finding.confidence = "likely" if row["inferred"] else "certain"
        finding.last_ts = row["kill_ts"]
        window = model.window_at(row["kill_ts"])
        finding.figures = {
            "in_flight": len(exec_ids),
            "side_effect_done": len(done),
            "received_not_begun": held,
            "end": row["kill_kind"],
            "end_inferred": bool(row["inferred"]),
            "s_after_stop_signal": seconds((row["kill_ts"] - stop_ts).total_seconds()) if stop_ts else None,
            "deploy": window["deploy"] if window else None,
        }
        notes = {
            int(kill_rid): ("worker crashed" if crash is not None else f"worker {how}") if not row["inferred"]
            else "the broker saw the consumer's connection drop; the worker logged nothing after"
            if row["kill_kind"] == "connection_lost" else "stop signal; the worker logged nothing after"
        }
        ctx.attach_evidence(finding, [int(kill_rid)], notes, executions=exec_ids,
                            kinds=("receive", "start", "side_effect", "side_effect_result"))
        findings.append(finding)
    return findings


def _stop_before(ctx: AnalysisContext, ends: pl.DataFrame) -> dict[tuple[str, object], object]:
    """Per (worker, end time): the first stop signal of the worker's life the end ended, None when
    it started again since its last stop signal (a worker restarted under its name, stopped and
    killed again later, is not killed 'before' its next life's stop)."""
    life = life_records(ctx.columns("worker_id", "kind", "ts", "source", "rid"))
    if life.is_empty() or ends.is_empty():
        return {}
    found = ends.sort("kill_ts").join_asof(
        first_stops(life, "worker_id"), left_on="kill_ts", right_on="life_ts", by="worker_id", strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("life_kind") == "stop_signal")
    return {(w, k): t for w, k, t in found.select("worker_id", "kill_ts", "life_ts").iter_rows()}

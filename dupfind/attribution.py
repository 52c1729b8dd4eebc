"""Root cause of a duplicated side effect: which failure mode let the second one through."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import polars as pl

from dupfind import schema
from dupfind.analysis import AnalysisContext
from dupfind.findings import two_runs
from dupfind.locks import longest_overlap
from dupfind.record_ids import record_of, two_groups
from dupfind.timefmt import iso


@dataclass
class Attribution:
    """The most likely cause, how sure we are, why, and the records that show it."""

    cause: str
    confidence: str
    detail: str
    rids: list[int] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)


ATTRIBUTION_KINDS = ("publish", "fail", "lease_expired", "lock_acquire", "lock_expired", "lock_release")
LOCK_KINDS = ("lock_acquire", "lock_expired", "lock_release")


# Levels of a record that reports a failure (lower case): the runtime's uncaught exception in an
# invocation's batch is logged at one, with no job id and no event name.
ERROR_LEVELS = ("error", "err", "critical", "crit", "fatal", "severe", "panic", "dpanic", "alert", "emerg", "emergency")


@dataclass
class ActionFacts:
    """One action's rows attribution reads, as Python rows (see action_facts)."""

    executions: list[dict]  # in start order
    records: list[dict]  # records of ATTRIBUTION_KINDS, in time order
    batches: dict[int, dict] = field(default_factory=dict)  # exec_id -> its invocation (invocation_batches)


def action_facts(ctx: AnalysisContext, action_ids: list[int]) -> dict[int, ActionFacts]:
    """The executions and attribution-relevant records of many actions, fetched in two passes."""
    wanted = pl.Series("action_id", list(dict.fromkeys(action_ids)), dtype=schema.ID_TYPE)
    execs = ctx.executions.filter(pl.col("action_id").is_in(wanted.implode())).sort(
        "action_id", "start", maintain_order=True
    )
    process = ctx.present_columns("process_id")
    records = ctx.action_records("kind", "ts", "source", "line", "rid", "exec_id", "job_id", *process).filter(
        pl.col("action_id").is_in(wanted.implode()) & pl.col("kind").is_in(ATTRIBUTION_KINDS)
    ).sort("action_id", "ts", "source", "line", maintain_order=True).select(
        "action_id", "rid", "ts", "kind", "exec_id", "job_id", "source",
        pl.col("process_id") if process else pl.lit(None, dtype=pl.String).alias("process_id"),
    ).collect()
    records = schema.as_strings(ctx.texts.decoded(records))
    by_exec = execs.rows_by_key("action_id", named=True, include_key=True)
    by_record = records.rows_by_key("action_id", named=True, include_key=True)
    batches = invocation_batches(ctx, execs["exec_id"])
    by_batch: dict[int, dict[int, dict]] = {}
    for exec_id, batch in batches.items():
        by_batch.setdefault(batch["action_id"], {})[exec_id] = batch
    return {a: ActionFacts(by_exec.get(a, []), by_record.get(a, []), by_batch.get(a, {})) for a in wanted.to_list()}


def invocation_batches(ctx: AnalysisContext, exec_ids: pl.Series) -> dict[int, dict]:
    """The invocation each of these executions ran in, where it handled other messages too: an SQS
    batch given to one AWS Lambda invocation, whose runtime names every line of it by its request
    id. An invocation is the records of one worker that carry one request id (from the first to
    the last, so that an uncaught exception's event between them belongs to it); it is a batch
    when they belong to more than one action. Per execution: the request id, the invocation's
    first and last time, how many other actions it held, and its first failure that is not the
    execution's own action's (a failed record, or one logged at an error level)."""
    names = ctx.present_columns(
        "rid", "action_id", "exec_id", "worker_id", "request_id", "kind", "level", "name", "message", "ts",
    )
    if "request_id" not in names or "level" not in names or exec_ids.is_empty():
        return {}
    table = ctx.columns(*names)
    own = (
        table.filter(pl.col("exec_id").is_in(exec_ids.implode()) & pl.col("request_id").is_not_null())
        .sort("ts").group_by("exec_id").agg(pl.col("worker_id", "request_id", "action_id").first())
    )
    if own.is_empty():
        return {}
    key = ["worker_id", "request_id"]
    spans = (
        table.join(own.select(key).unique(), on=key, how="semi").group_by(key).agg(
            pl.col("ts").min().alias("inv_start"), pl.col("ts").max().alias("inv_end"),
            pl.col("action_id").drop_nulls().unique().alias("inv_actions"),
        ).filter(pl.col("inv_actions").list.len() > 1)
    )
    if spans.is_empty():
        return {}
    texts = [c for c in ("name", "message") if c in names]
    near = table.filter(
        pl.col("worker_id").is_in(spans["worker_id"].implode())
        & pl.col("ts").is_between(spans["inv_start"].min(), spans["inv_end"].max())
    ).select("rid", "worker_id", "action_id", "kind", "level", "ts", *texts)
    near = ctx.texts.decoded(near, "level", *texts)
    near = near.with_columns(pl.coalesce(pl.col(texts).cast(pl.String)).alias("name")).select(
        "rid", "worker_id", "action_id", "kind", "level", "ts", "name"
    )
    failing = near.filter(
        (pl.col("kind") == "fail") | pl.col("level").cast(pl.String).str.to_lowercase().is_in(ERROR_LEVELS)
    ).rename({"action_id": "fail_action", "rid": "fail_rid", "ts": "fail_ts", "name": "fail_name"})
    found = (
        own.join(spans, on=key).join(failing.drop("kind", "level"), on="worker_id")
        .filter(pl.col("fail_ts").is_between(pl.col("inv_start"), pl.col("inv_end"))
                & (pl.col("fail_action").is_null() | (pl.col("fail_action") != pl.col("action_id"))))
        .sort("fail_ts", "fail_rid").group_by("exec_id", maintain_order=True).first()
    )
    found = ctx.texts.decoded(found, "request_id")
    return {
        row["exec_id"]: {**row, "siblings": len(row["inv_actions"]) - 1}
        for row in found.iter_rows(named=True)
    }


def _lock_overlap(ctx: AnalysisContext, first_exec: int, later_exec: int) -> str | None:
    """Why both executions held one lock at once (hold = acquire until release or end of the run), or None."""
    if first_exec not in ctx.lock_holders or later_exec not in ctx.lock_holders:
        return None
    holds = sorted([*ctx.lock_holds_of.get(first_exec, []), *ctx.lock_holds_of.get(later_exec, [])], key=lambda h: h["_pos"])
    pair = longest_overlap(holds, "acquire_ts", "believed_end")
    if pair is None:
        return None
    key = pair["key"]
    if pair["ttl_end_a"] is not None and pair["acquire_ts_b"] >= pair["ttl_end_a"]:
        return (f"lock {key!r} expired after its {pair['ttl_s_a']:g} s TTL while the first execution still ran; "
                f"the second took it and both held it for {pair['overlap_s']:.1f} s")
    if ctx.orphan_release_between(key, pair["acquire_ts_a"] - timedelta(seconds=ctx.skew_s), pair["acquire_ts_b"]):
        return (f"a worker that did not hold lock {key!r} released it; the second execution then acquired it "
                f"while the first still held it ({pair['overlap_s']:.1f} s together)")
    return f"both executions held lock {key!r} at once for {pair['overlap_s']:.1f} s: the lock did not exclude the second"


def attribute(ctx: AnalysisContext, action_id: int, requests: list[dict], facts: ActionFacts) -> Attribution:
    """Explain why the counted side-effect requests (rows, in time order) of one action happened more than once."""
    exec_ids = [e for e in dict.fromkeys(r["exec_id"] for r in requests) if e is not None]
    wanted = set(exec_ids)
    execs = [e for e in facts.executions if e["exec_id"] in wanted]
    records = facts.records
    if len(execs) < 2:
        rids = [r["rid"] for r in requests]
        notes = {r: "side effect request" for r in rids}
        if len(execs) == 1 and len(execs[0]["job_ids"]) >= 2 and len(requests) >= 2:
            return _two_messages_at_once(ctx, action_id, execs[0], requests, rids, notes)
        return Attribution(
            "unknown", "possible",
            "the same execution requested the side effect more than once (an HTTP client retry after a timeout?)",
            rids, notes,
        )
    first, later = execs[0], execs[1]
    first_req = next(r for r in requests if r["exec_id"] == first["exec_id"])
    later_req = next(r for r in requests if r["exec_id"] == later["exec_id"])
    base_rids = [first_req["rid"], later_req["rid"]]
    notes = {first_req["rid"]: "first side effect", later_req["rid"]: "repeated side effect"}
    later_entry = later["entry_ts"] or later["start"]

    publishes = [r for r in records if r["kind"] == "publish"]
    published_jobs = {r["job_id"] for r in publishes if r["job_id"] is not None}
    # No message ran in both: two consumer groups' messages of one Kafka record are one publish.
    apart = {record_of(j) for j in first["job_ids"]}.isdisjoint(record_of(j) for j in later["job_ids"])
    published_twice = apart and (len(published_jobs) >= 2 or len(publishes) >= 2)

    # 1. Lock overlap: both executions held one lock key during intersecting intervals (the
    # safeguard that failed, whatever brought the second execution: a double publish is said too).
    overlap = _lock_overlap(ctx, first["exec_id"], later["exec_id"])
    if overlap is not None:
        locks = [r["rid"] for r in records if r["kind"] in LOCK_KINDS and r["exec_id"] in wanted]
        notes.update({r: "lock" for r in locks})
        if published_twice:
            overlap += f"; they ran different messages of one event, published {max(len(published_jobs), len(publishes))} times"
        return Attribution("lock_overlap", "certain", overlap, locks[:6] + base_rids, notes)

    # 2. Double publish: the two executions ran different messages of one event. Without the
    # publishes in the logs (a scheduler's `Sending due task` names no message), two messages'
    # runs still tell it: a queue redelivers the message it handed out, not another.
    # No message at all (no id, no receive): runs a process started itself, as a scheduler in
    # every replica does (APScheduler's `Running job` lines in each: DF108's sends).
    unsent = not first["job_ids"] and not later["job_ids"] and first["receive_ts"] is None and later["receive_ts"] is None
    two_messages = apart and bool(first["job_ids"]) and bool(later["job_ids"])
    if (unsent or two_messages) and not publishes:
        scheduled = _scheduled_twice(ctx, action_id, first, later, base_rids, notes)
        if scheduled is not None:
            return scheduled
    # A run that failed after its side effect, then another message of the action: the failure's
    # retry sent as a message of its own (a Kafka retry topic's record, a job enqueued again), not
    # a second publish (5).
    failed_after = first["fail_ts"] is not None and first["fail_ts"] >= first_req["ts"] and later_entry >= first["fail_ts"]
    if two_messages and not publishes and not failed_after:
        return Attribution(
            "double_publish", "likely",
            f"the two executions ran different messages of one action ({', '.join([*first['job_ids'], *later['job_ids']][:3])}): "
            "it was published twice (no publish is in these logs); each message was processed once",
            base_rids, notes,
        )
    if published_twice:
        pub_rids = [r["rid"] for r in publishes[:4]]
        notes.update({r: "publish" for r in pub_rids})
        count = max(len(published_jobs), len(publishes))
        detail = (f"the event was published {count} times as different messages "
                  f"({', '.join(sorted(published_jobs)[:3])}); each was processed once")
        pair = ctx.scheduler_pair_of([r["rid"] for r in publishes])
        if pair is not None:  # the publishes are two schedulers' sends of one entry (DF108's)
            detail = f"{_two_sends(pair, pair['job_type'] or None)}; {detail}"
        restart = _publisher_restart(ctx, publishes)
        if restart is not None:
            words, restart_rids, restart_notes = restart
            detail += f"; {words}"
            notes.update(restart_notes)
            pub_rids = [*pub_rids[:2], *restart_rids, *pub_rids[2:]]
        return Attribution("double_publish", "certain", detail, pub_rids + base_rids, notes, {"publishes": float(count)})

    # How the second execution followed the first (for 3, 6, 7 and 8).
    gap = (later_entry - (first["entry_ts"] or first["start"])).total_seconds()
    running = later_entry < first["end"]

    # 3. Two consumer groups read the record: each reads every record, so no kill, failure or lease
    # brought it to the other group; a deploy that renamed the group, or one handler in two groups.
    groups = two_groups(first["job_ids"], later["job_ids"])
    if groups is not None:
        return _read_by_two_groups(ctx, first, later, later_entry, running, gap, groups, base_rids, notes)

    # 4. Worker killed mid-job: the first execution ended with its worker's kill/exit (or the
    # worker went silent after its stop signal, or a broker logged its connection dropped): a
    # deploy or crash cause, not a timeout.
    killed = ctx.exec_killed_rows.get(first["exec_id"])
    if killed is not None and killed["kill_ts"] <= later_entry:
        return _killed(ctx, first, later, killed, base_rids, notes)

    # 5. Retry after a partial success: side effect done, then the execution failed.
    if failed_after:
        fail = [r["rid"] for r in records if r["exec_id"] == first["exec_id"] and r["kind"] == "fail"][:1]
        notes.update({r: "failed after the side effect" for r in fail})
        again = f" as another message ({', '.join(later['job_ids'][:2])})" if two_messages else ""
        return Attribution(
            "partial_success_retry", "certain",
            f"the first execution's side effect succeeded, then it failed before saving the status and was retried{again}",
            fail + base_rids, notes,
        )

    # 6. The whole batch came back: another message of the first execution's invocation failed it.
    batch = facts.batches.get(first["exec_id"])
    if batch is not None and not first["failed"] and later_entry >= batch["inv_end"]:
        return _batch_retried(ctx, action_id, first, later, batch, gap, base_rids, notes)

    found = ctx.action_timeout(action_id)
    timeout = found[0] if found else None
    expiry = [r["rid"] for r in records if r["kind"] == "lease_expired"] or ctx.worker_lease_expiry(
        first["worker_id"], first["start"], first["end"], later_entry)
    near_timeout = timeout is not None and abs(gap - timeout) <= max(2.0, 0.25 * timeout)
    figures = {"gap_s": round(gap, 3)}
    if timeout is not None:
        figures["timeout_s"] = timeout

    # 7. Two deploy generations each received the message while both were consuming.
    if not expiry and not near_timeout:
        overlap = _generation_overlap(ctx, first, later, later_entry, running, base_rids, notes, figures)
        if overlap is not None:
            return overlap

    # 8. Lease / visibility timeout expiry while the first execution was still running.
    if running or expiry or near_timeout:
        evidence = expiry[:1]
        notes.update({r: "lease expired" for r in evidence})
        confidence = "certain" if running and (expiry or near_timeout) else "likely"
        where = "while it was still running" if running else "once it had stopped logging"
        earlier, again = two_runs(first["attempt"], later["attempt"])
        detail = f"{again} started {gap:.1f} s after {earlier} {where}"
        if timeout is not None:
            detail += f" ({ctx.action_timeout_words(action_id)})"
        if unsent and not expiry and not near_timeout:
            # Neither run names a message or logs a receive: a queue whose ids the logs leave out
            # (Lambda's), or none (a scheduler in each replica), which no lease explains.
            confidence = "possible"
            detail += ("; neither run names a message or logs a receive: if no queue delivered them (a scheduler "
                       "or timer running in every replica), it was no lease expiry")
        return Attribution("lease_expired", confidence, detail, evidence + base_rids, notes, figures)

    return Attribution(
        "unknown", "possible",
        "no publish, lock, kill, failure or lease expiry explains the second execution",
        base_rids, notes, figures,
    )


def _publisher_restart(ctx: AnalysisContext, publishes: list[dict]) -> tuple[str, list[int], dict[int, str]] | None:
    """The second publish came from a new process of the publisher (one log, another pid) that
    started after the first process had published and gone silent: a publisher (an outbox relay)
    restarted between its publish and its mark, and published again what it had not marked."""
    first = publishes[0]
    later = next((p for p in publishes[1:] if p["source"] == first["source"] and p["process_id"] is not None
                  and first["process_id"] is not None and p["process_id"] != first["process_id"]), None)
    if later is None:
        return None
    spans = ctx.process_spans
    old, new = spans.get((first["source"], first["process_id"])), spans.get((later["source"], later["process_id"]))
    skew = timedelta(seconds=ctx.skew_s)
    if old is None or new is None or new["first_ts"] < first["ts"] or old["last_ts"] > new["first_ts"] + skew:
        return None
    words = (f"process {first['process_id']} published it at {iso(first['ts'])} and logged nothing after "
             f"{iso(old['last_ts'])}; process {later['process_id']} of the same publisher started at "
             f"{iso(new['first_ts'])} and published it again: the publisher restarted before it marked the "
             "first publish done")
    notes = {int(old["last_rid"]): f"process {first['process_id']}'s last line",
             int(new["first_rid"]): f"process {later['process_id']}'s first line"}
    return words, list(notes), notes


def _two_messages_at_once(
    ctx: AnalysisContext, action_id: int, run: dict, requests: list[dict], rids: list[int], notes: dict,
) -> Attribution:
    """One worker's process ran two messages of the action at once (two threads: Huey's worker
    threads, whose lines name no thread), so their records make one run: the messages tell it was
    two, published twice; by two schedulers where their sends are in the logs."""
    first = {**run, "job_ids": run["job_ids"][:1]}
    later = {**run, "job_ids": run["job_ids"][1:], "entry_ts": requests[-1]["ts"], "start": requests[-1]["ts"]}
    scheduled = _scheduled_twice(ctx, action_id, first, later, rids[:1] + rids[-1:], notes)
    if scheduled is not None:
        return scheduled
    return Attribution(
        "double_publish", "likely",
        f"{run['identity']} ran two messages of the action at once ({', '.join(run['job_ids'][:3])}): it was "
        "published twice; each message was processed once",
        rids, notes,
    )


def _in_time_order(pair: dict) -> list[tuple]:
    """A scheduler pair's two sends as (ts, scheduler, rid), the earlier first."""
    return sorted([(pair["ts_a"], pair["publisher_a"], pair["rid_a"]), (pair["ts_b"], pair["publisher_b"], pair["rid_b"])])


def _task_label(pair: dict, job_type: str | None) -> str:
    """A scheduler pair's entry, with its task where that differs: `reminder-ord_1 (notify.send)`."""
    return f"{pair['entry']} ({job_type})" if job_type and pair["entry"] != job_type else pair["entry"]


def _two_sends(pair: dict, job_type: str | None) -> str:
    """`two schedulers sent it: beat-v1 sent reminder-ord_1 (notify.send) at ... and beat-v2 0.015 s later`."""
    (ts_a, who_a, _), (ts_b, who_b, _) = _in_time_order(pair)
    return (f"two schedulers sent it: {who_a} sent {_task_label(pair, job_type)} at {iso(ts_a)} and {who_b} "
            f"{(ts_b - ts_a).total_seconds():.3f} s later")


def _scheduled_twice(
    ctx: AnalysisContext, action_id: int, first: dict, later: dict, base_rids: list[int], notes: dict,
) -> Attribution | None:
    """Two schedulers sent the task the two executions ran (DF108's sends): the publishes a
    scheduler logs name no message, so they are told by task, entry and time."""
    if ctx.scheduler_pairs.is_empty():
        return None
    attributes = ctx.action_attributes.filter(pl.col("action_id") == action_id)
    job_type = attributes["job_type"][0] if attributes.height else None
    id_values = {v for values in ctx.action_ids(action_id).values() for v in values if v}
    found = ctx.scheduler_sends_of(
        job_type, first["entry_ts"] or first["start"], later["entry_ts"] or later["start"], id_values,
    )
    if found is None:
        return None
    pair, own = found
    (ts_a, who_a, rid_a), (ts_b, who_b, rid_b) = _in_time_order(pair)
    notes[int(rid_a)] = f"scheduler {who_a} sent the task"
    notes[int(rid_b)] = f"scheduler {who_b} sent it too"
    gap = (ts_b - ts_a).total_seconds()
    messages = ", ".join([*first["job_ids"], *later["job_ids"]][:3])
    ran = (f"the two executions ran the two messages ({messages}), each processed once" if messages
           else "each ran it in its own process, no queue between")
    if own:
        detail = _two_sends(pair, job_type)
    else:
        detail = (f"two schedulers were sending {job_type or 'their entries'} at once: {who_a} and {who_b} both sent "
                  f"{_task_label(pair, job_type)} at {iso(ts_a)}, {gap:.3f} s apart (these logs do not say which entry "
                  "this action's task was)")
    return Attribution(
        "double_publish", "certain" if own else "likely", f"{detail}; {ran}",
        [int(rid_a), int(rid_b), *base_rids], notes, {"send_gap_s": round(gap, 3)},
    )


def _batch_retried(
    ctx: AnalysisContext, action_id: int, first: dict, later: dict, batch: dict, gap: float, base_rids: list[int],
    notes: dict,
) -> Attribution:
    """The first execution's invocation failed on another of its messages: none of the batch was
    deleted, so the whole batch came back, this message with it."""
    fail_rid = int(batch["fail_rid"])
    notes[fail_rid] = "another message of the batch failed the invocation"
    others = batch["siblings"]
    what = ((batch["fail_name"] or "").strip().splitlines() or ["an error"])[0][:80]
    detail = (
        f"{first['identity']} ran it in invocation {batch['request_id']}, which took up {others} other message(s) too; "
        f"{what!r} failed that invocation, so no message of the batch was deleted and the whole batch came back "
        f"(this one {gap:.1f} s later"
        + (f", on {later['identity']})" if later["identity"] != first["identity"] else ")")
        + "; report the failed messages alone (partial batch response: batchItemFailures)"
    )
    figures = {"gap_s": round(gap, 3), "batch_messages": float(others + 1)}
    found = ctx.action_timeout(action_id)
    if found is not None:
        figures["timeout_s"] = found[0]
    confidence = "certain" if first["completed"] else "likely"
    return Attribution("batch_retry", confidence, detail, [fail_rid, *base_rids], notes, figures)


def _killed(
    ctx: AnalysisContext, first: dict, later: dict, kill: dict, base_rids: list[int], notes: dict,
) -> Attribution:
    """The first execution was in flight when its worker ended: say how, and which deploy did it."""
    kill_rid = int(kill["kill_rid"])
    model = ctx.deploys
    info = model.worker_rows.get(first["worker_id"], {})
    generation = info.get("generation")
    how = {
        "worker_killed": "was killed", "worker_exit": "exited", "process_killed": "lost the pool process running it (killed)",
        "worker_gone": "went silent after its stop signal (no exit was logged)",
        "connection_lost": "stopped logging, and the broker logged its connection ending without a close",
    }.get(kill["kill_kind"], kill["kill_kind"])
    lost = kill["kill_kind"] == "connection_lost"
    figures: dict[str, float] = {}
    if lost:
        said = ctx.message_of(kill_rid)
        silent = (kill["kill_ts"] - (first["work_end"] or first["end"])).total_seconds()
        figures["s_after_last_record"] = round(silent, 3)
        how += (f" {_seconds(silent)} later" + (f" ({said!r})" if said else "")
                + ": its process was killed or lost its network, the broker requeuing what it held unacknowledged")
    crash = ctx.crash_exception(kill_rid) if kill["kill_kind"] == "worker_exit" else None
    if crash is not None:
        how = f"crashed on an uncaught {crash}"
    process = f" (process {first['work_pid']})" if lost and first["work_pid"] else ""
    detail = f"{first['identity']}{process}" + (f" (generation {generation})" if generation else "") + f" {how}"
    window = model.window_at(kill["kill_ts"])
    if window:
        detail += f" during deploy {window['deploy']}"
        figures["s_after_deploy_start"] = round((kill["kill_ts"] - window["start"]).total_seconds(), 3)
    stop_ts = info.get("stop_ts")
    if stop_ts is not None and kill["kill_ts"] >= stop_ts and not kill["inferred"]:
        figures["s_after_stop_signal"] = round((kill["kill_ts"] - stop_ts).total_seconds(), 3)
        detail += f", {figures['s_after_stop_signal']:.0f} s after its stop signal"
    entry = first["receive_ts"] or first["entry_ts"] or first["start"]
    if stop_ts is not None and entry > stop_ts:
        figures["taken_after_stop_s"] = round((entry - stop_ts).total_seconds(), 3)
        detail += f"; it had taken this job {figures['taken_after_stop_s']:.1f} s after the stop signal"
    # How soon it came back tells how: at once, a broker's requeue of a dead connection's
    # messages; after a while, a lease (a visibility timeout, a stale lock) that ran out.
    back = ((later["entry_ts"] or later["start"]) - kill["kill_ts"]).total_seconds()
    figures["requeued_after_s"] = round(back, 3)
    detail += (", with the job in flight after the side effect and before the ack; the message came back "
               + f"{_seconds(back)} later" + (f" on {later['identity']}" if later["identity"] != first["identity"] else ""))
    if lost:
        detail += " (no kill is in these logs: add the deploy's or the orchestrator's events to confirm)"
    notes[kill_rid] = (
        "the broker saw the consumer's connection drop: its unacked messages requeued" if lost
        else "stop signal; nothing logged after it" if kill["inferred"]
        else "worker crashed with this job in flight" if crash is not None else "worker ended with this job in flight"
    )
    rids = [kill_rid, *base_rids]
    if info.get("stop_rid") is not None and int(info["stop_rid"]) != kill_rid:
        notes[int(info["stop_rid"])] = "stop signal"
        rids.insert(0, int(info["stop_rid"]))
    confidence = "likely" if kill["inferred"] else "certain"
    return Attribution("worker_killed", confidence, detail, rids, notes, figures)


def _seconds(value: float) -> str:
    """`10.8 s`, `0.004 s`: tenths, or milliseconds below a tenth."""
    value = max(value, 0.0)
    return f"{value:.1f} s" if value >= 0.1 else f"{value:.3f} s"


def _read_by_two_groups(
    ctx: AnalysisContext, first: dict, later: dict, later_entry, running: bool, gap: float,
    groups: tuple[str, str, str], base_rids: list[int], notes: dict,
) -> Attribution:
    """Two consumer groups each read the record: a deploy overlap where two generations consumed in
    them (a release that renamed the group), else one handler's consumers in groups of their own."""
    record, group_a, group_b = groups
    figures = {"gap_s": round(gap, 3)}
    overlap = _generation_overlap(ctx, first, later, later_entry, running, base_rids, notes, figures, groups)
    if overlap is not None:
        return overlap
    return Attribution(
        "two_consumer_groups", "certain",
        f"{first['identity']} read record {record} in consumer group {group_a!r} and {later['identity']} in group "
        f"{group_b!r}: each group reads every record, so one handler consuming in two groups runs each record once "
        "in each; no redelivery brought it back",
        base_rids, notes, figures,
    )


def _generation_overlap(
    ctx: AnalysisContext, first: dict, later: dict, later_entry, running: bool, base_rids: list[int], notes: dict,
    figures: dict, groups: tuple[str, str, str] | None = None,
) -> Attribution | None:
    """Both generations of a deploy took the message (not a redelivery): a deploy overlap cause.
    `groups`: the record and the two consumer groups each generation read it in."""
    generations = ctx.generation_of
    gen_a, gen_b = generations.get(first["worker_id"]), generations.get(later["worker_id"])
    if gen_a is None or gen_b is None or gen_a == gen_b:
        return None
    window = ctx.deploys.window_at(later_entry)
    if window is None:
        return None
    rids = list(base_rids)
    if window["start_rid"] is not None:
        rids.insert(0, int(window["start_rid"]))
        notes[int(window["start_rid"])] = f"deploy {window['deploy']} started"
    figures = {**figures, "s_after_deploy_start": round((later_entry - window["start"]).total_seconds(), 3)}
    at_once = " and ran it at the same time" if running else ""
    if groups is not None:
        record, group_a, group_b = groups
        detail = (
            f"generation {gen_a} ({first['identity']}) read record {record} in consumer group {group_a!r} and "
            f"generation {gen_b} ({later['identity']}) in group {group_b!r} during deploy {window['deploy']}{at_once}; "
            "each group reads every record: the new generation's group read again what the old one had"
        )
    else:
        detail = (
            f"generation {gen_a} ({first['identity']}) and generation {gen_b} ({later['identity']}) both took the "
            f"message during deploy {window['deploy']}{at_once}; no lease expiry or failure explains a redelivery"
        )
    return Attribution("deploy_overlap", "certain" if running else "likely", detail, rids, notes, figures)

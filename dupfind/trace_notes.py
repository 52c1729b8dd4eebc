"""Annotations for a trace: the records where one action's story turns, and why."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import polars as pl

from dupfind.analysis import AnalysisContext
from dupfind.effects import COUNTED
from dupfind.record_ids import two_groups

ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def ordinal(n: int) -> str:
    return ORDINALS.get(n, f"{n}th")


def _secs(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def short_span(seconds: float) -> str:
    """0.31 s, 12.4 s; below 10 ms in milliseconds (0.00 s would hide an order)."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


class _Story:
    """The facts of one action that the annotators share."""

    def __init__(self, ctx: AnalysisContext, action_id: int, records: pl.DataFrame, execs: pl.DataFrame,
                 labels: dict[int, str]) -> None:
        self.ctx = ctx
        self.action_id = action_id
        self.records = records
        self.execs = {row["exec_id"]: row for row in execs.iter_rows(named=True)}
        self.labels = labels
        killed = ctx.exec_killed.filter(pl.col("exec_id").is_in(list(labels)))
        self.killed = dict(killed.select("exec_id", "kill_ts").rows())
        self.connection_lost = set(killed.filter(pl.col("kill_kind") == "connection_lost")["exec_id"].to_list())
        self.notes: dict[int, list[str]] = defaultdict(list)
        found = ctx.action_timeout(action_id)
        self.timeout, self.timeout_inferred = (found[0], found[1] == "inferred") if found else (None, False)
        self.timeout_name = ctx.action_timeout_name(action_id)

    def note(self, rid: int | None, text: str) -> None:
        if rid is not None and text not in self.notes[rid]:
            self.notes[rid].append(text)

    def of_kind(self, *kinds: str) -> pl.DataFrame:
        return self.records.filter(pl.col("kind").is_in(list(kinds))).sort("ts", "source", "line")

    def in_flight(self, ts: datetime, exclude: int | None = None) -> list[int]:
        """Executions running at `ts`: started, not yet at their last record, not acked before."""
        running = []
        for exec_id, row in self.execs.items():
            if exec_id == exclude or row["start"] > ts or row["end"] < ts:
                continue
            if row["done_ts"] is not None and row["done_ts"] <= ts:
                continue
            running.append(exec_id)
        return running

    def timeout_phrase(self, gap: float) -> str:
        if self.timeout is None:
            return ""
        inferred = "inferred " if self.timeout_inferred else ""
        if abs(gap - self.timeout) <= max(2.0, 0.25 * self.timeout):
            return f", close to the {inferred}{self.timeout:g} s {self.timeout_name}"
        return f"; {inferred}{self.timeout_name} {self.timeout:g} s"


def _entries(story: _Story) -> None:
    """Where a later run of the action begins: what the earlier run was doing then."""
    pairs = story.ctx.pairs.filter(pl.col("action_id") == story.action_id)
    entries = story.of_kind("receive", "start").filter(pl.col("exec_id").is_not_null()).unique("exec_id", keep="first")
    entry_of = {row["exec_id"]: (row["rid"], row["kind"], row["ts"]) for row in entries.iter_rows(named=True)}
    for exec_b, (rid, kind, entered) in entry_of.items():
        candidates = pairs.filter(pl.col("exec_id_b") == exec_b).sort("start_a")
        if candidates.height == 0:
            continue
        overlapping = candidates.filter(pl.col("overlap") != "none")
        pair = (overlapping if overlapping.height else candidates).row(-1, named=True)
        exec_a = pair["exec_id_a"]
        la, lb = story.labels.get(exec_a, "an earlier run"), story.labels.get(exec_b, "a later run")
        verb = "received" if kind == "receive" else "started"
        gap = pair["gap_s"]
        groups = two_groups(pair["job_ids_a"], pair["job_ids_b"])
        other_message = groups is None and set(pair["job_ids_a"]).isdisjoint(pair["job_ids_b"]) and pair["job_ids_b"]
        if overlapping.height:
            timeout = "" if other_message or groups is not None else story.timeout_phrase(gap)
            text = f"{lb} {verb} while {la} in flight (+{gap:.1f} s{timeout})"
            # Certain only if the later run began clearly (beyond the clock skew) before the earlier one's last record.
            if pair["cross_host"] and _secs(pair["end_a"], entered) < story.ctx.skew_s:
                text += "; within the clock-skew tolerance of its last record, so only possibly"
        elif exec_a in story.connection_lost:
            text = f"{lb} {verb} {gap:.1f} s after {la}, whose consumer's connection the broker lost with it in flight"
        elif exec_a in story.killed:
            text = f"{lb} {verb} {gap:.1f} s after {la}, whose worker was killed with it in flight"
        elif pair["failed_a"]:
            text = f"{lb} {verb} after {la} failed (+{gap:.1f} s)"
        elif pair["completed_a"]:
            text = f"{lb} {verb} although {la} had completed (+{gap:.1f} s)"
        else:
            text = f"{lb} {verb} {gap:.1f} s after {la}, which stopped logging without an ack"
        if groups is not None:
            text += f"; record {groups[0]} read in another consumer group ({groups[2]!r}, not {groups[1]!r})"
        elif other_message:
            text += f"; a different message ({', '.join(pair['job_ids_b'][:2])}) of the same action"
        story.note(rid, text)


def _side_effects(story: _Story) -> None:
    """Repeated provider requests, replays, and how long a success waited for its status write."""
    effects = story.ctx.side_effects
    if effects.height == 0:
        return
    requests = story.ctx.side_effects_of(story.action_id).sort("ts", "source", "line")
    commits = story.of_kind("commit")
    repeated = len(story.execs) > 1 or requests.filter(pl.col("outcome").is_in(COUNTED)).height > 1
    keys = [k for k in story.records["idempotency_key"].drop_nulls().unique().to_list()] \
        if "idempotency_key" in story.records.columns else []
    for (effect,), group in requests.group_by("effect", maintain_order=True):
        counted = group.filter(pl.col("outcome").is_in(COUNTED)).height
        n = 0
        for row in group.iter_rows(named=True):
            answer = row["result_rid"] if row["result_rid"] is not None else row["rid"]
            label = story.labels.get(row["exec_id"], "this run")
            if row["outcome"] in COUNTED:
                n += 1
                key = row.get("idempotency_key") or (keys[0] if len(keys) == 1 else None)
                if n == 1 and counted > 1:
                    story.note(row["rid"], f"first {effect} request")
                elif n > 1:
                    text = (f"{ordinal(n)} provider request for the same idempotency key ({key})" if key
                            else f"{ordinal(n)} {effect} request for the same action")
                    if row["provider_protected"]:
                        text += ", sent with the provider's idempotency key (done at most once)"
                    story.note(row["rid"], text)
                if row["outcome"] == "uncertain":
                    story.note(answer, "no clear provider answer (timeout or none logged): it may have been done")
            elif row["outcome"] == "replay":
                story.note(answer, "provider answered as a replay: its idempotency key held, nothing repeated")
            elif row["outcome"] == "rejected":
                story.note(answer, "provider rejected the request: not done")
            if row["outcome"] != "success" or not repeated or commits.height == 0 or row["exec_id"] is None:
                continue
            done_at = row["result_ts"] or row["ts"]
            after = commits.filter((pl.col("exec_id") == row["exec_id"]) & (pl.col("ts") >= done_at))
            if after.height:
                wait = short_span(_secs(after["ts"][0], done_at))
                story.note(answer, f"provider success {wait} before the status write")
            else:
                story.note(answer, f"provider success, but {label} never wrote the status")


def _lease_expiries(story: _Story) -> None:
    for row in story.of_kind("lease_expired").iter_rows(named=True):
        running = story.in_flight(row["ts"])
        if row["action_id"] is None:  # a worker's own (no job named): the leases of the jobs it held
            running = [e for e in running if story.execs[e]["worker_id"] == row["worker_id"]]
        if not running:
            _lease_after_end(story, row)
            continue
        # The lease that expired is the latest delivery's: the one whose attempt the record names, else the newest.
        same_attempt = [e for e in running if row["attempt"] is not None
                        and story.execs[e]["attempt"] == row["attempt"]]
        holder = (same_attempt or sorted(running, key=lambda e: story.execs[e]["start"]))[-1]
        since = _secs(row["ts"], story.execs[holder]["entry_ts"] or story.execs[holder]["start"])
        text = f"lease expired while {story.labels[holder]} still running ({since:.1f} s after it began)"
        others = [story.labels[e] for e in running if e != holder]
        if others:
            text += f"; {', '.join(others)} also still running"
        story.note(row["rid"], text)


def _lease_after_end(story: _Story, row: dict) -> None:
    """A lease that expired after the run holding it ended without an ack: the message comes back."""
    ended = [e for e, ex in story.execs.items() if ex["end"] <= row["ts"] and not ex["completed"]]
    if not ended:
        return
    last = max(ended, key=lambda e: story.execs[e]["end"])
    label = story.labels[last]
    if last in story.killed:
        why = f"{label}'s worker was killed"
    elif story.execs[last]["failed"]:
        why = f"{label} failed"
    else:
        why = f"{label} stopped logging without an ack"
    story.note(row["rid"], f"lease expired {_secs(row['ts'], story.execs[last]['end']):.1f} s after {why}: "
                           "the message comes back")


def _worker_ends(story: _Story) -> None:
    """Kills with a job of this action in flight; stop signals around its runs."""
    kills = story.ctx.exec_killed.filter(pl.col("exec_id").is_in(list(story.labels)))
    for exec_id, rid, kind in kills.select("exec_id", "kill_rid", "kill_kind").rows():
        never = f"{story.labels[exec_id]} never acked"
        story.note(int(rid), f"the broker lost the consumer's connection with this job in flight (no kill logged; {never})"
                   if kind == "connection_lost" else f"worker killed with this job in flight ({never})")
    stops = story.of_kind("stop_signal")
    for row in stops.iter_rows(named=True):
        for exec_id, ex in story.execs.items():
            if ex["worker_id"] != row["worker_id"] or row["ts"] > ex["end"]:
                continue
            label = story.labels[exec_id]
            if row["ts"] >= ex["start"]:
                story.note(row["rid"], f"stop signal with this job in flight ({label})")
            else:
                story.note(row["rid"], f"stop signal {_secs(ex['start'], row['ts']):.1f} s before {label} began: "
                                       "the stopping worker kept taking jobs")


def _failures(story: _Story) -> None:
    effects = story.ctx.side_effects
    if effects.height == 0:
        return
    done = story.ctx.side_effects_of(story.action_id).filter(pl.col("outcome") == "success")
    for row in story.of_kind("fail").unique("exec_id", keep="first").iter_rows(named=True):
        before = done.filter((pl.col("exec_id") == row["exec_id"]) & (pl.col("ts") <= row["ts"]))
        if row["exec_id"] is not None and before.height:
            label = story.labels.get(row["exec_id"], "this run")
            effect = before["effect"][0]
            story.note(row["rid"], f"{label} failed after its {effect} request succeeded: a retry repeats it")


def _guards(story: _Story) -> None:
    for row in story.of_kind("dedup_hit", "claim_lost").iter_rows(named=True):
        label = story.labels.get(row["exec_id"], "this run")
        story.note(row["rid"], f"guard held: {label} did not repeat the side effect")


def _publishes(story: _Story) -> None:
    publishes = story.of_kind("publish")
    if publishes.height < 2:
        return
    first = publishes.row(0, named=True)
    for n, row in enumerate(publishes.iter_rows(named=True), start=1):
        if n == 1:
            continue
        text = f"{ordinal(n)} publish of the same action (+{_secs(row['ts'], first['ts']):.1f} s after the first)"
        if row["job_id"] and row["job_id"] != first["job_id"]:
            text += f" as a new message {row['job_id']}"
        story.note(row["rid"], text)


def _locks(story: _Story) -> None:
    acquires = story.of_kind("lock_acquire").filter(pl.col("exec_id").is_not_null())
    releases = story.of_kind("lock_release", "lock_expired")
    for row in acquires.iter_rows(named=True):
        earlier = acquires.filter((pl.col("exec_id") != row["exec_id"]) & (pl.col("ts") <= row["ts"]))
        for other in earlier.iter_rows(named=True):
            if other["lock_key"] != row["lock_key"] or story.execs[other["exec_id"]]["end"] < row["ts"]:
                continue
            freed = releases.filter(
                (pl.col("exec_id") == other["exec_id"]) & pl.col("ts").is_between(other["ts"], row["ts"])
            )
            if freed.filter(pl.col("kind") == "lock_release").height == 0:
                story.note(row["rid"], f"lock acquired while {story.labels[other['exec_id']]} still works under it")
    for row in story.of_kind("lock_expired").iter_rows(named=True):
        label = story.labels.get(row["exec_id"], "its holder")
        story.note(row["rid"], f"the lock expired before {label} was done: its TTL was shorter than the work")


ANNOTATORS = (_publishes, _entries, _lease_expiries, _side_effects, _failures, _worker_ends, _guards, _locks)


def annotate(ctx: AnalysisContext, action_id: int, records: pl.DataFrame, execs: pl.DataFrame,
             labels: dict[int, str]) -> dict[int, list[str]]:
    """rid -> the annotations of that record, for one action's trace records."""
    story = _Story(ctx, action_id, records, execs, labels)
    for annotator in ANNOTATORS:
        annotator(story)
    return dict(story.notes)

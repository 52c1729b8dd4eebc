"""The answer key: per action, the true side-effect count (from the provider sink), executions, causes."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from dupfind.synth.clock import iso_true
from dupfind.synth.model import Action, Execution

if TYPE_CHECKING:
    from dupfind.synth.world import World

CAUSES = ("double_publish", "worker_killed", "lease_expired", "partial_success_retry", "lock_overlap", "unknown")
GUARD_OUTCOMES = ("noop_already_sent", "noop_claimed_by_other_worker", "unique_violation", "provider_replay", "lock_denied")
_REDELIVERY_CAUSE = {"lease_expired": "lease_expired", "worker_killed": "worker_killed", "retry": "partial_success_retry"}
SCHEMA = "dupfind.synth.truth/1"


def _repeat_causes(e: Execution, earlier: list[Execution]) -> list[str]:
    """Why execution `e` could repeat a side effect that `earlier` executions already caused."""
    causes = []
    if e.lock_overlap:
        causes.append("lock_overlap")
    same = [p for p in earlier if p.msg is e.msg]
    if not same:
        causes.append("double_publish")
    else:
        prev = same[-1]
        # Leases of one message are sequential: delivery prev.attempt + 1 followed prev's lease.
        reasons = e.msg.receive_reasons
        why = reasons[prev.attempt] if prev.attempt < len(reasons) else None
        causes.append(_REDELIVERY_CAUSE.get(why, "unknown"))
    return causes


def _mark_lock_overlaps(a: Action) -> None:
    """An execution overlaps on the lock when its holding interval intersects another's."""
    held = [ex for ex in a.executions if ex.lock_from is not None]
    for ex in held:
        ex.lock_overlap = False
    for i, x in enumerate(held):
        x_to = x.lock_to if x.lock_to is not None else x.end
        for y in held[i + 1:]:
            y_to = y.lock_to if y.lock_to is not None else y.end
            if x.lock_from < y_to and y.lock_from < x_to:
                x.lock_overlap = y.lock_overlap = True


def _action_causes(a: Action) -> list[str]:
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    senders: list[Execution] = []
    for _, ex in a.side_effects:
        if senders:
            for c in _repeat_causes(ex, senders):
                counts[c] += 1
                first_seen.setdefault(c, len(first_seen))
        senders.append(ex)
    # A lock that let two holders through is the guard that failed: it is the primary cause.
    return sorted(counts, key=lambda c: (c != "lock_overlap", -counts[c], first_seen[c]))


def _execution(ex: Execution) -> dict:
    return {
        "job_id": ex.msg.job_id,
        "event_id": ex.msg.event_id,
        "worker": ex.pod.name,
        "process": str(ex.slot.process),
        "deployment": ex.pod.gen.deployment_id,
        "attempt": ex.attempt,
        "received_because": ex.reason,
        "start": iso_true(ex.start),
        "end": iso_true(ex.end if ex.end is not None else ex.start),
        "outcome": ex.outcome,
        "provider_request": ex.requested,
        "side_effect": ex.side_effect,
        "lock_overlap": ex.lock_overlap,
        "then": ex.followup,
    }


def action_truth(a: Action) -> dict:
    _mark_lock_overlaps(a)
    exs = a.executions
    index = {id(ex): i for i, ex in enumerate(exs)}
    overlaps = [
        [i, j]
        for i in range(len(exs))
        for j in range(i + 1, len(exs))
        if exs[j].start < (exs[i].end or 0) and exs[i].start < (exs[j].end or 0)
    ]
    count = len(a.side_effects)
    causes = _action_causes(a) if count > 1 else []
    return {
        "action": f"a-{a.index + 1:06d}",
        "type": a.atype.name,
        "ids": {
            "job_id": [m.job_id for m in a.messages],
            "event_id": list(a.event_ids),
            "idempotency_key": [a.idem],
            "notification_id": list(a.rows),
        },
        "order_id": a.order,
        "user_id": a.user,
        "job_type": a.atype.job_type,
        "side_effect": a.atype.channel,
        "provider": a.atype.provider,
        "published": iso_true(a.messages[0].published_at) if a.messages else None,
        "publishes": len(a.messages),
        "double_publish": a.double_variant,
        "true_count": count,
        "duplicated": count > 1,
        "causes": causes,
        "side_effects": [{"at": iso_true(t), "execution": index[id(ex)]} for t, ex in a.side_effects],
        "executions": [_execution(ex) for ex in exs],
        "overlapping_executions": overlaps,
        "redeliveries": sum(1 for ex in exs if ex.attempt > 1),
        "retries": sum(1 for ex in exs if ex.followup == "retry"),
        "guard_hits": sum(1 for ex in exs if ex.outcome in GUARD_OUTCOMES),
        "lost": count == 0,
        "dead_lettered": a.dead_lettered,
    }


def build_truth(w: "World", preset: str, description: str, fmt: str, files: list[dict], end: int) -> dict:
    actions = [action_truth(a) for a in w.actions]
    execs = [e for a in actions for e in a["executions"]]
    guard_kinds = Counter(e["outcome"] for e in execs if e["outcome"] in GUARD_OUTCOMES)
    primary = Counter(a["causes"][0] for a in actions if a["duplicated"])
    counters = {
        "actions": len(actions),
        "duplicated_actions": sum(1 for a in actions if a["duplicated"]),
        "side_effects": sum(a["true_count"] for a in actions),
        "extra_side_effects": sum(max(0, a["true_count"] - 1) for a in actions),
        "publishes": sum(a["publishes"] for a in actions),
        "double_published_actions": sum(1 for a in actions if a["publishes"] > 1),
        "executions": len(execs),
        "redeliveries": sum(a["redeliveries"] for a in actions),
        "lease_expirations": w.counters["lease_expirations"],
        "retries": sum(a["retries"] for a in actions),
        "dead_lettered": sum(1 for a in actions if a["dead_lettered"]),
        "guard_hits": sum(guard_kinds.values()),
        "guard_hits_by_kind": {k: guard_kinds[k] for k in GUARD_OUTCOMES if guard_kinds[k]},
        "killed_executions": sum(1 for e in execs if e["outcome"] == "killed"),
        "lost_actions": sum(1 for a in actions if a["lost"]),
        "duplicates_by_primary_cause": {c: primary[c] for c in CAUSES if primary[c]},
        "lines": sum(f["lines"] for f in files),
        "dropped_lines": sum(f["dropped_lines"] for f in files),
        "reordered_lines": sum(f["reordered_lines"] for f in files),
    }
    pods = w.workers.pods
    return {
        "schema": SCHEMA,
        "preset": preset,
        "description": description,
        "seed": w.seed,
        "format": fmt,
        "params": w.p.as_dict(),
        "start": iso_true(0),
        "end": iso_true(end),
        "counters": counters,
        "files": files,
        "deployments": [
            {
                "deployment_id": d["deployment_id"],
                "previous": d["previous"],
                "started": iso_true(d["started"]),
                "finished": iso_true(d["finished"]) if d["finished"] is not None else None,
                "workers": [pod.name for g in w.workers.generations if g.deployment_id == d["deployment_id"] for pod in g.pods],
            }
            for d in w.deploy_history
        ],
        "workers": [
            {
                "worker": pod.name,
                "deployment": pod.gen.deployment_id,
                "processes": [str(s.process) for s in pod.slots],
                "started": iso_true(pod.started_at),
                "sigterm": iso_true(pod.sigterm_at) if pod.sigterm_at is not None else None,
                "stopped": iso_true(pod.stopped_at) if pod.stopped_at is not None else None,
                "end": pod.end,
            }
            for pod in pods
        ],
        "actions": actions,
    }

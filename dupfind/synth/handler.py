"""The job handler: one generator per execution, implementing each business design step by step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dupfind.synth.engine import Process, us
from dupfind.synth.model import Execution

if TYPE_CHECKING:
    from dupfind.synth.world import World

_PROVIDER_ERRORS = {
    "sendgrid": "503 Service Unavailable from api.sendgrid.com",
    "fcm": "UNAVAILABLE: FCM backend unavailable",
    "twilio": "HTTP 500 from api.twilio.com",
    "inventory-api": "502 Bad Gateway from inventory-api",
}
_DB_ERRORS = (
    "could not serialize access due to concurrent update",
    "connection reset by peer while writing to primary",
    "canceling statement due to lock timeout",
)
TRACEBACK_LINES = (
    "Traceback (most recent call last):",
    '  File "/app/worker/handlers.py", line 142, in perform',
    "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='api.provider.internal', port=443): Read timed out. (read timeout=30)",
    "psycopg2.errors.SerializationFailure: could not serialize access due to concurrent update",
)


# Steps logged with the whole bound context; the others carry only the correlation ids,
# as services commonly do once the job line has said what the job is.
FULL_CONTEXT = frozenset({
    "start", "provider_response", "provider_replay", "fail", "db_update_failed", "already_sent", "claim_lost",
    "unique_violation",
})


def log(w: "World", ex: Execution, event: str, level: str, msg: str, extra: dict | None = None) -> None:
    style = ex.pod.log.style
    if event in style.quiet:
        return
    base = ex.base if event in FULL_CONTEXT else ex.slim
    ex.pod.log.records.append((w.engine.now, level, style.event(event), msg, base, extra))


def run_job(w: "World", ex: Execution) -> Process:
    """One attempt: guard (per design), provider call, status write, ack; failures retry."""
    p = w.p
    rng = w.rng
    st = w.stores
    a = ex.action
    msg = ex.msg
    atype = a.atype
    yield int(rng.uniform(1.0, 15.0) * 1000)
    log(w, ex, "start", "info", f"processing {atype.job_type}")
    if p.heartbeat:
        w.engine.spawn(_heartbeat(w, ex), us(p.visibility_timeout_s / 3), owner=ex)

    if p.design == "lock":
        got = yield from _acquire_lock(w, ex)
        if not got:
            return
    if p.design == "claim":
        yield w.db_time()
        status = st.status.get(msg.row, "pending")
        stale = p.claim_stale_s is not None and status == "processing" and w.engine.now - st.claimed_at[msg.row] > us(p.claim_stale_s)
        if status == "pending" or stale:
            st.status[msg.row] = "processing"
            st.claimed_at[msg.row] = w.engine.now
            log(w, ex, "claim", "info", "claimed notification: pending -> processing (1 row updated)", {"status": "processing", "rows_affected": 1})
        elif status == "sent":
            yield from _noop(w, ex, "already_sent", "notification already sent, skipping", "noop_already_sent")
            return
        else:
            yield from _noop(w, ex, "claim_lost", "claim update touched 0 rows: claimed by other worker", "noop_claimed_by_other_worker")
            return
    elif p.design == "idem_unique":
        yield w.db_time()
        status = st.deliveries.get(a.idem)
        if status is None:
            st.deliveries[a.idem] = "sending"
        elif status == "sent":
            yield from _noop(w, ex, "already_sent", "delivery already recorded as sent, skipping", "noop_already_sent")
            return
        else:
            yield from _noop(w, ex, "unique_violation", "insert into deliveries hit unique constraint deliveries_idempotency_key_key, skipping",
                             "unique_violation", {"err": 'duplicate key value violates unique constraint "deliveries_idempotency_key_key"'})
            return
    else:
        yield w.db_time()
        status = st.status.get(msg.row, "pending")
        log(w, ex, "status_read", "debug", f"notification status is {status}", {"status": status})
        if status == "sent":
            yield from _release_lock(w, ex)
            yield from _noop(w, ex, "already_sent", "notification already sent, skipping", "noop_already_sent")
            return

    yield w.uniform_us(p.pre_send_s)
    outcome, latency = _call_provider(w, ex)
    ex.requested = True
    req_extra = {"effect": atype.channel, "provider": atype.provider}
    if p.design == "provider_idem":
        req_extra["idempotency_header"] = True
    ex.pod.log.records.append((w.engine.now, "info", ex.pod.log.style.side_effect_event(atype.channel),
                               f"calling {atype.provider} ({atype.channel})", ex.base, req_extra))
    yield latency
    took = latency // 1000
    if outcome == "ok":
        log(w, ex, "provider_response", "info", f"{atype.provider} accepted the request",
            {"effect": atype.channel, "provider": atype.provider, "status": "ok", "pmid": w.ids.provider_message(atype.provider), "dur_ms": took})
    elif outcome == "replay":
        log(w, ex, "provider_replay", "info", f"{atype.provider} answered with an idempotent replay of an earlier request",
            {"effect": atype.channel, "provider": atype.provider, "status": "replayed", "dur_ms": took})
    else:
        err = _PROVIDER_ERRORS[atype.provider] if outcome == "error" else f"no response from {atype.provider} after {p.provider_timeout_s:g}s"
        log(w, ex, "provider_response", "error" if outcome == "error" else "warn", f"{atype.provider} call did not succeed",
            {"effect": atype.channel, "provider": atype.provider, "status": outcome, "err": err, "dur_ms": took})
        if rng.random() < 0.3:
            ex.pod.log.records.append((w.engine.now, None, rng.choice(TRACEBACK_LINES), None, None, None))
        # Undo the guard so that the retry may send: the worker believes nothing was sent.
        if p.design == "claim":
            st.status[msg.row] = "pending"
        elif p.design == "idem_unique":
            st.deliveries.pop(a.idem, None)
        yield from _release_lock(w, ex)
        yield from _fail(w, ex, "provider_error" if outcome == "error" else "provider_timeout", err)
        return

    yield w.uniform_us(p.post_send_s)
    yield w.db_time()
    if rng.random() < p.db_update_fail_rate:
        err = rng.choice(_DB_ERRORS)
        log(w, ex, "db_update_failed", "error", "status update failed after the provider call", {"err": err})
        yield from _release_lock(w, ex)
        yield from _fail(w, ex, "db_update_failed", err)
        return
    st.status[msg.row] = "sent"
    if p.design == "idem_unique":
        st.deliveries[a.idem] = "sent"
    log(w, ex, "commit", "info", "notification marked as sent", {"status": "sent"})
    yield from _release_lock(w, ex)
    yield from _ack_finish(w, ex, "provider_replay" if outcome == "replay" else "acked")


def _call_provider(w: "World", ex: Execution) -> tuple[str, int]:
    """Decide what the provider does with this request; schedule the real side effect if any."""
    p = w.p
    rng = w.rng
    r = rng.random()
    timeout = us(p.provider_timeout_s)
    if r < p.provider_error_rate:
        return "error", us(rng.uniform(0.05, 1.2))
    r -= p.provider_error_rate
    if r < p.provider_timeout_rate:
        return "timeout", timeout
    r -= p.provider_timeout_rate
    if r < p.provider_timeout_accepted_rate:
        outcome, latency = "timeout", timeout
    else:
        if p.slow_rate and rng.random() < p.slow_rate:
            latency = w.uniform_us(p.slow_s)
        else:
            latency = us(rng.lognormvariate(0.0, p.provider_sigma) * p.provider_median_s)
        outcome = "ok"
        if latency >= timeout:
            outcome, latency = "timeout", timeout  # the client gave up; the provider had already accepted
    accept = min(w.uniform_us(p.accept_delay_s), latency)
    if p.design == "provider_idem":
        if ex.action.idem in w.stores.provider_keys:
            if outcome == "ok":
                return "replay", us(rng.lognormvariate(0.0, 0.4) * 0.12)
            return outcome, latency
        w.stores.provider_keys[ex.action.idem] = w.engine.now
    w.engine.after(accept, _side_effect_happened, w, ex)
    return outcome, latency


def _side_effect_happened(w: "World", ex: Execution) -> None:
    ex.side_effect = True
    ex.action.side_effects.append((w.engine.now, ex))


def _heartbeat(w: "World", ex: Execution) -> Process:
    interval = us(w.p.visibility_timeout_s / 3)
    while True:
        if not ex.active or not w.broker.extend(ex.msg, ex.lease):
            return
        log(w, ex, "lease_extended", "debug", f"extended message lease by {w.p.visibility_timeout_s:g}s", {"vt": w.p.visibility_timeout_s})
        yield interval


def _lock_key(ex: Execution) -> str:
    return f"lock:{ex.action.idem}"


def _acquire_lock(w: "World", ex: Execution) -> Process:
    p = w.p
    st = w.stores
    key = _lock_key(ex)
    token = f"{ex.pod.name}:{w.ids.lock_token()}"
    yield int(w.rng.uniform(0.5, 3.0) * 1000)
    holder = st.lock_holder(key, w.engine.now)
    if holder is None and p.lock_mode == "nonatomic":
        # GET said free; the SET comes later and overwrites whatever is there by then.
        yield w.uniform_us(p.lock_get_set_gap_ms, 0.001)
        st.locks[key] = (token, w.engine.now + us(p.lock_ttl_s))
    elif holder is None:
        st.locks[key] = (token, w.engine.now + us(p.lock_ttl_s))
    else:
        log(w, ex, "lock_denied", "warn", f"lock busy, held by {holder}", {"lock": key, "owner": holder, "ttl": p.lock_ttl_s})
        if p.lock_mode == "release_no_owner":
            # The bug: the `finally` block deletes the key although this worker never held it.
            yield int(w.rng.uniform(0.5, 3.0) * 1000)
            st.locks.pop(key, None)
            log(w, ex, "lock_released", "info", "lock released", {"lock": key, "owner": token, "ttl": p.lock_ttl_s})
        delay = int(w.uniform_us(p.lock_retry_s) * min(1.5 ** (ex.attempt - 1), 8.0))
        log(w, ex, "retry", "warn", f"lock busy, retrying in {delay / 1e6:.1f}s", {"backoff_s": round(delay / 1e6, 3)})
        w.broker.nack(ex.msg, ex.lease, delay, "lock_denied")
        ex.followup = "retry"
        w.workers.end_execution(ex, "lock_denied")
        return False
    ex.lock_token = token
    ex.lock_from = w.engine.now
    log(w, ex, "lock_acquired", "info", "lock acquired", {"lock": key, "owner": token, "ttl": p.lock_ttl_s})
    return True


def _release_lock(w: "World", ex: Execution) -> Process:
    if ex.lock_token is None:
        return
    p = w.p
    key = _lock_key(ex)
    token = ex.lock_token
    yield int(w.rng.uniform(0.5, 3.0) * 1000)
    ex.lock_token = None
    ex.lock_to = w.engine.now
    if p.lock_mode in ("nonatomic", "release_no_owner"):
        w.stores.locks.pop(key, None)  # plain DEL, no owner check
        log(w, ex, "lock_released", "info", "lock released", {"lock": key, "owner": token, "ttl": p.lock_ttl_s})
        return
    entry = w.stores.locks.get(key)
    if entry is not None and entry[0] == token and entry[1] > w.engine.now:
        del w.stores.locks[key]
        log(w, ex, "lock_released", "info", "lock released", {"lock": key, "owner": token, "ttl": p.lock_ttl_s})
    else:
        log(w, ex, "lock_expired", "warn", "lock TTL ran out before release; not deleting a key we no longer own",
            {"lock": key, "owner": token, "ttl": p.lock_ttl_s})


def _noop(w: "World", ex: Execution, event: str, text: str, outcome: str, extra: dict | None = None) -> Process:
    log(w, ex, event, "warn" if outcome != "noop_already_sent" else "info", text, extra)
    yield from _ack_finish(w, ex, outcome)


def _ack_finish(w: "World", ex: Execution, outcome: str) -> Process:
    yield int(w.rng.uniform(2.0, 25.0) * 1000)
    w.broker.ack(ex.msg)
    log(w, ex, "ack", "debug", "message deleted from queue")
    log(w, ex, "finish", "info", "job done", {"dur_ms": (w.engine.now - ex.start) // 1000, "status": "done"})
    w.workers.end_execution(ex, outcome)


def _fail(w: "World", ex: Execution, outcome: str, err: str) -> Process:
    p = w.p
    yield int(w.rng.uniform(1.0, 6.0) * 1000)
    log(w, ex, "fail", "error", f"job failed: {outcome.replace('_', ' ')}", {"err": err, "dur_ms": (w.engine.now - ex.start) // 1000})
    if ex.attempt >= p.max_attempts:
        log(w, ex, "dead_letter", "error", "giving up after max attempts, moved to dead-letter queue")
        w.broker.dead_letter(ex.msg)
        ex.followup = "dead_letter"
    else:
        delay = min(p.backoff_base_s * 2 ** (ex.attempt - 1), p.backoff_cap_s) * w.rng.uniform(0.8, 1.2)
        log(w, ex, "retry", "warn", f"retrying in {delay:.1f}s", {"backoff_s": round(delay, 3)})
        w.broker.nack(ex.msg, ex.lease, us(delay), "retry")
        ex.followup = "retry"
    w.workers.end_execution(ex, outcome)

"""Per-service logging styles: field names, event names, levels and timestamp shapes teams use."""

from __future__ import annotations

from dataclasses import dataclass, field

# Canonical field slots used inside the simulator; each style renames them.
SLOTS = (
    "ts", "level", "event", "msg", "job", "evt", "idem", "row", "order", "user", "worker", "proc",
    "deploy", "attempt", "queue", "jtype", "effect", "provider", "status", "dur_ms", "lock",
    "owner", "ttl", "vt", "err", "pmid", "req",
)

# Lifecycle event names shared by every style unless a style overrides them.
COMMON_EVENTS = {
    "publish": "job_enqueued",
    "receive": "job_received",
    "start": "job_started",
    "status_read": "status_checked",
    "claim": "status_claimed",
    "claim_lost": "noop_claimed_by_other_worker",
    "already_sent": "noop_already_sent",
    "unique_violation": "unique_violation",
    "lock_acquired": "lock_acquired",
    "lock_released": "lock_released",
    "lock_denied": "lock_denied",
    "lock_expired": "lock_expired",
    "provider_request": "provider_request",
    "provider_response": "provider_response",
    "provider_replay": "provider_replay",
    "commit": "status_updated",
    "db_update_failed": "db_update_failed",
    "ack": "job_acked",
    "finish": "job_finished",
    "fail": "job_failed",
    "retry": "retry_scheduled",
    "dead_letter": "dead_lettered",
    "lease_extended": "lease_extended",
    "worker_started": "worker_started",
    "sigterm": "sigterm_received",
    "worker_exited": "worker_exited",
}

# Event names written on purpose that dupfind should classify as `other`: background noise,
# plus a step the vocabulary has no kind for (a status read).
OTHER_EVENTS = frozenset({
    "heartbeat", "healthcheck", "config_loaded", "db_pool_stats", "http_access", "queue_stats", "image_pulled",
    "rollout_progress", "status_checked",
})


@dataclass(frozen=True)
class Style:
    """How one service names things in its log records."""

    name: str
    keys: dict[str, str]
    ts_kind: str  # "iso_ms" | "iso_us" | "epoch_ms"
    levels: dict[str, str]
    events: dict[str, str] = field(default_factory=dict)
    side_effect_events: dict[str, str] | None = None  # per channel, overrides provider_request
    attempt_zero_based: bool = False  # retry counters count retries, not attempts
    process_kind: str = "pid"  # "pid" | "thread"
    quiet: frozenset[str] = frozenset()  # lifecycle steps this service does not log

    def logs(self, name: str) -> bool:
        return name not in self.quiet

    def event(self, name: str) -> str:
        return self.events.get(name) or COMMON_EVENTS[name]

    def side_effect_event(self, channel: str) -> str:
        if self.side_effect_events:
            return self.side_effect_events[channel]
        return self.event("provider_request")


_LOWER = {"debug": "debug", "info": "info", "warn": "warn", "error": "error"}

SNAKE = Style(
    name="snake",
    keys={
        "ts": "ts", "level": "level", "event": "event", "msg": "msg", "job": "job_id", "evt": "event_id",
        "idem": "idempotency_key", "row": "notification_id", "order": "order_id", "user": "user_id",
        "worker": "worker_id", "proc": "pid", "deploy": "deployment_id", "attempt": "attempt",
        "queue": "queue", "jtype": "job_type", "effect": "side_effect", "provider": "provider",
        "status": "status", "dur_ms": "duration_ms", "lock": "lock_key", "owner": "lock_owner",
        "ttl": "ttl_s", "vt": "visibility_timeout_s", "err": "error", "pmid": "provider_message_id",
        "req": "request_id",
    },
    ts_kind="iso_ms",
    levels=_LOWER,
)

CAMEL = Style(
    name="camel",
    keys={
        "ts": "timestamp", "level": "level", "event": "eventName", "msg": "message", "job": "jobId",
        "evt": "eventId", "idem": "idempotencyKey", "row": "notificationId", "order": "orderId",
        "user": "userId", "worker": "hostname", "proc": "threadName", "deploy": "version",
        "attempt": "retryCount", "queue": "queueName", "jtype": "jobType", "effect": "channel",
        "provider": "provider", "status": "status", "dur_ms": "durationMs", "lock": "lockKey",
        "owner": "lockOwner", "ttl": "ttlSeconds", "vt": "visibilityTimeout", "err": "err",
        "pmid": "providerMessageId", "req": "requestId",
    },
    ts_kind="iso_us",
    levels={"debug": "DEBUG", "info": "INFO", "warn": "WARN", "error": "ERROR"},
    events={
        "publish": "event_published", "receive": "message_received", "start": "processing_started",
        "claim": "job_claimed", "provider_response": "provider_result", "commit": "marked_sent",
        "ack": "message_acked", "finish": "job_completed", "fail": "job_error", "retry": "job_retrying",
    },
    side_effect_events={"email": "send_email", "push": "send_push", "sms": "send_sms", "stock": "deduct_stock"},
    attempt_zero_based=True,
    process_kind="thread",
    quiet=frozenset({"status_read"}),
)

TERSE = Style(
    name="terse",
    keys={
        "ts": "t", "level": "lvl", "event": "evt", "msg": "msg", "job": "jid", "evt": "evt_id",
        "idem": "idem_key", "row": "notif_id", "order": "order_id", "user": "uid", "worker": "pod",
        "proc": "tid", "deploy": "release", "attempt": "try", "queue": "queue", "jtype": "task",
        "effect": "effect", "provider": "vendor", "status": "status", "dur_ms": "took_ms",
        "lock": "lock", "owner": "owner", "ttl": "ttl", "vt": "lease_timeout_s", "err": "err",
        "pmid": "sid", "req": "req_id",
    },
    ts_kind="epoch_ms",
    levels=_LOWER,
    events={
        "publish": "enqueued", "receive": "job_reserved", "start": "perform_start", "claim": "claimed",
        "provider_request": "provider_call", "commit": "db_update", "ack": "ack", "finish": "done",
        "fail": "failed", "retry": "retry",
    },
    quiet=frozenset({"start", "ack"}),
)

SQS = Style(
    name="sqs",
    keys={
        "ts": "@timestamp", "level": "severity", "event": "event_type", "msg": "message",
        "job": "MessageId", "evt": "event_uuid", "idem": "Idempotency-Key", "row": "delivery_id",
        "order": "orderId", "user": "customer_id", "worker": "instance_id", "proc": "process_id",
        "deploy": "image_tag", "attempt": "ApproximateReceiveCount", "queue": "queue_name",
        "jtype": "handler", "effect": "action_type", "provider": "integration", "status": "outcome",
        "dur_ms": "elapsed_ms", "lock": "lock_name", "owner": "holder", "ttl": "lock_ttl_s",
        "vt": "VisibilityTimeout", "err": "error_message", "pmid": "external_id", "req": "trace_id",
    },
    ts_kind="iso_us",
    levels={"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "error": "ERROR"},
    events={
        "publish": "message_published", "receive": "receive_message", "start": "handler_started",
        "claim": "claim_acquired", "provider_request": "external_call", "commit": "status_write",
        "ack": "delete_message", "finish": "handler_finished", "fail": "handler_failed",
        "retry": "requeued", "dead_letter": "moved_to_dlq",
    },
)

# The deploy pipeline names the pod it acts on; it is not itself a worker.
DEPLOY = Style(
    name="deploy",
    keys={**SNAKE.keys, "worker": "pod"},
    ts_kind="iso_ms",
    levels=_LOWER,
)

STYLES = {s.name: s for s in (SNAKE, CAMEL, TERSE, SQS, DEPLOY)}

"""Entities of the simulated world: actions, messages, executions, pods and their log files."""

from __future__ import annotations

from typing import Any

from dupfind.synth.params import ActionType
from dupfind.synth.styles import Style

# One log record before rendering: (true time µs, level, event name, msg, styled base fields,
# canonical extra fields). A plain-text line is (time, None, text, None, None, None).
Record = tuple


class LogFile:
    """The log of one host: records in true-time order plus what noise generation needs."""

    __slots__ = ("name", "kind", "host", "style", "records", "skew_us", "start", "end", "meta")

    def __init__(self, name: str, kind: str, host: str, style: Style, skew_us: int, meta: dict | None = None):
        self.name = name
        self.kind = kind  # producer | worker | broker | deploy
        self.host = host
        self.style = style
        self.records: list[Record] = []
        self.skew_us = skew_us
        self.start = 0
        self.end: int | None = None
        self.meta = meta or {}


class Action:
    """One business intent (send this email once, deduct this stock once)."""

    __slots__ = (
        "index", "atype", "order", "user", "idem", "rows", "event_ids", "messages", "executions",
        "side_effects", "double_variant", "dead_lettered",
    )

    def __init__(self, index: int, atype: ActionType, order: str, user: str, idem: str):
        self.index = index
        self.atype = atype
        self.order = order
        self.user = user
        self.idem = idem
        self.rows: list[str] = []
        self.event_ids: list[str] = []
        self.messages: list[Message] = []
        self.executions: list[Execution] = []
        self.side_effects: list[tuple[int, Execution]] = []
        self.double_variant: str | None = None
        self.dead_lettered = False


class Message:
    """A queue message (one publish): its lease state and why it was delivered each time."""

    __slots__ = (
        "job_id", "action", "event_id", "row", "producer", "request_id", "published_at", "state",
        "receive_count", "lease", "expires_at", "current", "next_reason", "receive_reasons",
    )

    def __init__(self, job_id: str, action: Action, event_id: str, row: str, producer: str, request_id: str):
        self.job_id = job_id
        self.action = action
        self.event_id = event_id
        self.row = row
        self.producer = producer
        self.request_id = request_id
        self.published_at = 0
        self.state = "new"  # new | visible | delayed | inflight | deleted | dead
        self.receive_count = 0
        self.lease = 0
        self.expires_at = 0
        self.current: Execution | None = None
        self.next_reason = "first"
        self.receive_reasons: list[str] = []


class Execution:
    """One attempt run of a message on one worker slot."""

    __slots__ = (
        "seq", "action", "msg", "pod", "slot", "attempt", "start", "end", "outcome", "side_effect",
        "requested", "alive", "killed", "reason", "lock_token", "lock_from", "lock_to", "lock_overlap", "base", "slim", "lease", "followup",
    )

    def __init__(self, seq: int, msg: Message, pod: "Pod", slot: "Slot", start: int, reason: str):
        self.seq = seq
        self.action = msg.action
        self.msg = msg
        self.pod = pod
        self.slot = slot
        self.attempt = msg.receive_count
        self.lease = msg.lease
        self.start = start
        self.end: int | None = None
        self.outcome = "running"
        self.side_effect = False
        self.requested = False
        self.alive = True
        self.killed = False
        self.reason = reason
        self.lock_token: str | None = None
        self.lock_from: int | None = None  # when this execution believed it held the lock
        self.lock_to: int | None = None
        self.lock_overlap = False  # filled in by the truth builder
        self.base: dict[str, Any] = {}  # styled fields every record about this execution carries
        self.slim: dict[str, Any] = {}  # the correlation ids only, for the less important steps
        self.followup: str | None = None  # "retry" | "dead_letter" after a failure

    @property
    def active(self) -> bool:
        return self.alive and self.end is None


class Slot:
    """One unit of worker concurrency (a prefork process or a pool thread)."""

    __slots__ = ("pod", "index", "process", "busy")

    def __init__(self, pod: "Pod", index: int, process: Any):
        self.pod = pod
        self.index = index
        self.process = process
        self.busy: Execution | None = None


class Generation:
    """One deployment (release) of the worker service."""

    __slots__ = ("index", "deployment_id", "rs_hash", "pods")

    def __init__(self, index: int, deployment_id: str, rs_hash: str):
        self.index = index
        self.deployment_id = deployment_id
        self.rs_hash = rs_hash
        self.pods: list[Pod] = []


class Pod:
    """A worker process/pod of one generation."""

    __slots__ = ("name", "gen", "log", "slots", "alive", "polling", "stopping", "started_at", "stopped_at", "end", "sigterm_at")

    def __init__(self, name: str, gen: Generation, log: LogFile):
        self.name = name
        self.gen = gen
        self.log = log
        self.slots: list[Slot] = []
        self.alive = True
        self.polling = False
        self.stopping = False
        self.started_at = 0
        self.stopped_at: int | None = None
        self.sigterm_at: int | None = None
        self.end = "running"  # running | exited | killed

    def in_flight(self) -> int:
        return sum(1 for s in self.slots if s.busy is not None)

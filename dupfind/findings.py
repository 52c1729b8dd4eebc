"""Findings: what a detector reports, with a stable fingerprint and its evidence."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, NamedTuple

from dupfind.timefmt import iso_us

SEVERITIES = ("info", "low", "medium", "high", "critical")
CAUSES = (
    "double_publish", "worker_killed", "deploy_overlap", "lease_expired", "partial_success_retry", "batch_retry",
    "lock_overlap", "two_consumer_groups", "unknown",
)
CAUSE_TITLES = {
    "double_publish": "double publish upstream (the queue is innocent)",
    "worker_killed": "worker killed or stopped mid-job",
    "deploy_overlap": "two deploy generations both took the message",
    "lease_expired": "lease / visibility timeout expired while the job was running",
    "partial_success_retry": "retry after a partial success (side effect done, status not saved)",
    "batch_retry": "another message of its batch failed, and the whole batch came back",
    "lock_overlap": "two holders of one lock",
    "two_consumer_groups": "two consumer groups of one handler each read the record",
    "unknown": "unknown",
}


def two_runs(first_attempt: int | None, later_attempt: int | None) -> tuple[str, str]:
    """How a summary names two runs of one message: `attempt 2` after `attempt 1` when each logged
    its own number, else `a second run (of attempt 1)` after `the first`."""
    if first_attempt is not None and later_attempt is not None and first_attempt != later_attempt:
        return f"attempt {first_attempt}", f"attempt {later_attempt}"
    number = first_attempt if first_attempt is not None else later_attempt
    return "the first", "a second run" + (f" of attempt {number}" if number is not None else "")


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def fingerprint(rule: str, identity: str) -> str:
    """Same rule and action identity, same fingerprint, on every run and machine."""
    return hashlib.sha256(f"{rule}|{identity}".encode()).hexdigest()[:16]


class FindingBrief(NamedTuple):
    """What a report's counts need of a finding (by rule, severity, harmful, root cause): a cached
    analysis keeps these beside its findings, so a view that counts them decodes none."""

    rule: str
    fingerprint: str
    severity: str
    harmful: bool
    cause: str | None

    @classmethod
    def of(cls, finding: Finding) -> FindingBrief:
        return cls(finding.rule, finding.fingerprint, finding.severity, finding.harmful, finding.cause)


@dataclass(slots=True)  # a 5M-line export's report holds a quarter of a million
class Evidence:
    """One log record that supports a finding."""

    ts: datetime
    source: str
    line: int
    worker: str | None
    kind: str
    name: str | None
    attempt: int | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ts": iso_us(self.ts), "source": self.source, "line": self.line, "worker": self.worker,
            "kind": self.kind, "name": self.name, "attempt": self.attempt, "note": self.note,
        }


@dataclass
class Finding:
    """A rule's verdict on one action (or one worker/lock for rules about those)."""

    rule: str
    name: str
    title: str
    severity: str
    identity: str
    summary: str
    harmful: bool = False
    cause: str | None = None
    confidence: str | None = None
    cause_detail: str | None = None
    ids: dict[str, list[str]] = field(default_factory=dict)
    workers: list[str] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    deployments: list[str] = field(default_factory=list)
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    remediation: list[str] = field(default_factory=list)
    action_id: int | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.rule, self.identity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "rule": self.rule,
            "name": self.name,
            "title": self.title,
            "severity": self.severity,
            "harmful": self.harmful,
            "summary": self.summary,
            "cause": self.cause,
            "cause_title": CAUSE_TITLES.get(self.cause) if self.cause else None,
            "confidence": self.confidence,
            "cause_detail": self.cause_detail,
            "ids": self.ids,
            "workers": self.workers,
            "attempts": self.attempts,
            "deployments": self.deployments,
            "first_ts": iso_us(self.first_ts),
            "last_ts": iso_us(self.last_ts),
            "figures": self.figures,
            "evidence": [e.to_dict() for e in self.evidence],
            "remediation": self.remediation,
        }

    def to_state(self) -> dict[str, Any]:
        """Every field (action_id and the evidence too), exactly, as JSON-safe data (the result cache):
        `Finding.from_state(f.to_state()) == f` with the same types (datetimes with their zone,
        tuples, ...). Raises TypeError for a value it could not give back."""
        from dupfind.exact_json import encode_values

        # Evidence by column: a column of plain values (most) is read back without a walk.
        rows = [[getattr(e, name) for name in EVIDENCE_FIELDS] for e in self.evidence]
        return {
            "values": encode_values([getattr(self, name) for name in _FINDING_VALUES]),
            "evidence": [encode_values(list(column)) for column in zip(*rows)] if rows else [],
        }

    @classmethod
    def from_state(cls, data: dict[str, Any], evidence: bool = True) -> Finding:
        """The finding `to_state` was given; with `evidence` False, without its evidence (most of
        the decoding, for a view that shows none)."""
        from dupfind.exact_json import decode_values

        values = dict(zip(_FINDING_VALUES, decode_values(data["values"], len(_FINDING_VALUES))))
        columns = data["evidence"]
        if columns and len(columns) != len(EVIDENCE_FIELDS):
            raise ValueError("evidence state has other fields")
        if not evidence:
            return cls(**values)
        count = len(columns[0]) - 1 if columns else 0
        rows = [Evidence(*row) for row in zip(*(decode_values(c, count) for c in columns))]
        return cls(**values, evidence=rows)


EVIDENCE_FIELDS = tuple(f.name for f in fields(Evidence))
FINDING_FIELDS = tuple(f.name for f in fields(Finding))  # a cached finding's layout (result_cache checks it)
_FINDING_VALUES = tuple(name for name in FINDING_FIELDS if name != "evidence")

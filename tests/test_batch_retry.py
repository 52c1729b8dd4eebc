"""The batch_retry cause (attribution.invocation_batches): a duplicate is the whole batch coming back
only where another message of its invocation failed it, before the message came back."""

from __future__ import annotations

import json
from pathlib import Path

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules

from conftest import FIXTURES

CASE = FIXTURES / "scenarios" / "sqs-lambda-batch-retry" / "logs"
EXPORT = "order-push-sender.json"


def _causes(logs: Path) -> dict[str, tuple[str, str]]:
    """order id -> (cause, confidence) of each DF101 finding."""
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(logs)], config), config, load_rules(config))
    return {f.ids["order_id"][0]: (f.cause, f.confidence) for f in report.findings if f.rule == "DF101"}


def _rewritten(tmp_path: Path, change) -> Path:
    """The export with `change(events)` applied to its events."""
    doc = json.loads((CASE / EXPORT).read_text())
    doc["events"] = change(doc["events"])
    (tmp_path / EXPORT).write_text(json.dumps(doc, indent=4))
    return tmp_path


def test_the_two_messages_pushed_before_the_failure_came_back_with_their_batch():
    assert _causes(CASE) == {"ord-88527": ("batch_retry", "certain"), "ord-88528": ("batch_retry", "certain")}


def test_without_the_failure_the_same_return_is_a_visibility_timeout_expiry(tmp_path):
    """Nothing failed the invocation (its uncaught exception's event dropped): no batch to blame."""
    logs = _rewritten(tmp_path, lambda events: [e for e in events if not e["message"].startswith("[ERROR]")])
    causes = _causes(logs)
    assert set(causes) == {"ord-88527", "ord-88528"}
    assert {cause for cause, _ in causes.values()} == {"lease_expired"}


def test_a_failure_after_the_invocation_ended_is_not_its_batchs(tmp_path):
    """The same error logged after the invocation's REPORT line belongs to no invocation."""
    def moved(events):
        at = next(i for i, e in enumerate(events) if e["message"].startswith("[ERROR]"))
        error = events[at]
        report = next(e for e in events[at:] if e["logStreamName"] == error["logStreamName"]
                      and e["message"].startswith("REPORT"))
        rest = events[:at] + events[at + 1:]
        return sorted([*rest, {**error, "timestamp": report["timestamp"] + 40}], key=lambda e: e["timestamp"])
    causes = _causes(_rewritten(tmp_path, moved))
    assert {cause for cause, _ in causes.values()} == {"lease_expired"}


def test_without_request_ids_there_is_no_invocation_to_speak_of(tmp_path):
    """Lines without the runtime's prefix or its invocation lines name no invocation."""
    def plain(events):
        out = []
        for e in events:
            m = e["message"]
            if m.startswith("[INFO]\t"):
                _, t, _rid, text = m.split("\t", 3)
                m = f"{t} INFO {text}"
            elif m.startswith(("START ", "END ", "REPORT ")):
                continue
            out.append({**e, "message": m})
        return out
    causes = _causes(_rewritten(tmp_path, plain))
    assert set(causes) == {"ord-88527", "ord-88528"}
    assert "batch_retry" not in {cause for cause, _ in causes.values()}

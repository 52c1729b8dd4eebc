"""The recorded outbox relay (fixtures/real/celery_redis_outbox_relay_*): a relay killed after it
published a batch and before it marked it sent, restarted, publishes the batch again. The cause
is the double publish, and DF105 cites the two relay processes' publishes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES
from truth_compare import analyze_logs, truth_of

NAIVE = FIXTURES / "real" / "celery_redis_outbox_relay_double_publish"
CONTROL = FIXTURES / "real" / "celery_redis_outbox_relay_guarded_control"


def test_a_restarted_relays_second_publish_cites_both_processes():
    truth = truth_of(NAIVE)
    (killed,) = truth["relay_kills"]
    (restart,) = truth["relay_restarts"]
    report = analyze_logs(NAIVE / "logs")
    duplicates = [f for f in report.findings if f.rule == "DF101"]
    assert len(duplicates) == truth["counters"]["duplicated_actions"]
    assert {(f.cause, f.confidence) for f in duplicates} == {("double_publish", "certain")}
    published = [f for f in report.findings if f.rule == "DF105"]
    assert len(published) == truth["counters"]["double_published_actions"]
    relay = NAIVE / "logs" / "outbox-relay.ndjson"
    for finding in published:
        # The evidence cites each publish: the killed relay's, then its restart's.
        pids = [json.loads(relay.read_text().splitlines()[ev.line - 1])["pid"] for ev in finding.evidence
                if ev.note == "publish"]
        assert pids == [killed["pid"], restart["new_pid"]]
    assert not [f for f in report.findings if f.rule in ("DF103", "DF201", "DF202", "DF203", "DF204")]


def test_each_duplicate_says_the_relay_restarted_before_it_marked_the_batch():
    """The killed relay logs no exit (SIGKILL): its last line and the new process's first tell it."""
    truth = truth_of(NAIVE)
    (killed,) = truth["relay_kills"]
    relay = (NAIVE / "logs" / "outbox-relay.ndjson").read_text().splitlines()
    report = analyze_logs(NAIVE / "logs")
    for finding in [f for f in report.findings if f.rule == "DF101"]:
        assert "the publisher restarted before it marked the first publish done" in finding.cause_detail
        assert f"process {killed['pid']} published it" in finding.cause_detail
        lines = {ev.note: json.loads(relay[ev.line - 1]) for ev in finding.evidence if ev.note and "line" in ev.note}
        last, first = lines[f"process {killed['pid']}'s last line"], lines[f"process {killed['restarted_pid']}'s first line"]
        assert last["pid"] == killed["pid"] and last["ts"] <= killed["killed_at"]
        assert first["pid"] == killed["restarted_pid"] and first["event"] == "relay_started"


def test_the_guarded_consumer_keeps_the_relays_second_publish_harmless():
    report = analyze_logs(CONTROL / "logs")
    assert report.verdict == "no_harmful_duplicates"
    published = [f for f in report.findings if f.rule == "DF105"]
    assert published and {f.severity for f in published} == {"low"}
    assert len([f for f in report.findings if f.rule == "DF106"]) == truth_of(CONTROL)["counters"]["double_published_actions"]


REAL = sorted(p for p in (FIXTURES / "real").iterdir() if (p / "truth.json").is_file())


@pytest.mark.parametrize("folder", REAL, ids=[p.name for p in REAL])
def test_the_deploy_summarys_redeliveries_are_runs_of_a_message_again(folder: Path):
    """summary.deploys.concentration.redeliveries: each execution after an action's first that
    runs a message again (a lease's, a kill's, a retry's), not a second publish's new message."""
    counters = truth_of(folder)["counters"]
    report = analyze_logs(folder / "logs")
    # (a message a killed node's consumer had taken and not begun, Dramatiq's prefetch, is
    # delivered there too: its run elsewhere is a redelivery)
    again = counters["executions"] - counters["actions"] - counters.get("double_published_actions", 0)
    again += counters.get("prefetched_unstarted_at_kill", 0)
    assert report.to_dict()["summary"]["deploys"]["concentration"]["redeliveries"]["total"] == again

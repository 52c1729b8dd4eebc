"""How a lease expiry's cause names its timeout and its runs: the timeout a broker logs is taken,
an inferred timeout says so (no configuration nor log states it), and two runs that logged no
distinct attempt numbers are not given invented ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.findings import two_runs
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules

RABBITMQ = FIXTURES / "real" / "celery_rabbitmq_consumer_timeout" / "logs"
BROKER_LOG = "rabbit@localhost.log"


def _lease_findings(logs: Path, timeouts: dict[str, float] | None = None):
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(logs)], config), config, load_rules(config), timeouts=timeouts)
    causes = [f for f in report.findings if f.rule == "DF101" and f.cause == "lease_expired"]
    redeliveries = [f for f in report.findings if f.rule == "DF103"]
    assert causes and redeliveries
    return causes, redeliveries


def _workers_only(tmp_path: Path) -> Path:
    """The recording as exported without the broker's own log (the workers' logs only)."""
    logs = tmp_path / "logs"
    shutil.copytree(RABBITMQ, logs)
    (logs / BROKER_LOG).unlink()
    return logs


def test_a_timeout_inferred_from_redelivery_gaps_is_called_inferred(tmp_path):
    """Without the broker's log, RabbitMQ's consumer timeout is stated nowhere: dupfind's figure is
    an estimate (about 51 s: the 15 s timeout checked on a 60 s tick)."""
    causes, redeliveries = _lease_findings(_workers_only(tmp_path))
    for finding in causes:
        assert "(inferred visibility timeout 5" in finding.cause_detail, finding.cause_detail
    for finding in redeliveries:
        assert "; inferred visibility timeout 5" in finding.summary, finding.summary


def test_the_consumer_timeout_rabbitmq_logs_is_the_timeout_by_its_name():
    """`... timed out waiting for delivery acknowledgement. Timeout used: 15000 ms.` in the broker's
    log: RabbitMQ's consumer_timeout, named as RabbitMQ names it (not an SQS visibility timeout)."""
    assert "Timeout used: 15000 ms" in (RABBITMQ / BROKER_LOG).read_text()
    causes, redeliveries = _lease_findings(RABBITMQ)
    for finding in causes:
        assert finding.cause_detail.endswith("(consumer_timeout 15 s)"), finding.cause_detail
    for finding in redeliveries:
        assert "; consumer_timeout 15 s" in finding.summary and "inferred" not in finding.summary
        assert "visibility" not in finding.summary


def test_a_kafka_consumers_max_poll_interval_is_named_as_kafka_names_it():
    """The Kafka client's `ConsumerConfig values:` dump states `max.poll.interval.ms = 30000`: the
    lease a poll's records had, which the cause names as such."""
    logs = FIXTURES / "scenarios" / "spring-kafka-max-poll-rebalance" / "logs"
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(logs)], config), config, load_rules(config))
    causes = [f for f in report.findings if f.rule == "DF101" and f.cause == "lease_expired"]
    assert causes
    for finding in causes:
        assert finding.cause_detail.endswith("(max.poll.interval.ms 30 s)"), finding.cause_detail


def test_a_configured_timeout_comes_before_the_logged_one(tmp_path):
    causes, redeliveries = _lease_findings(_workers_only(tmp_path), timeouts={"": 20.0})
    for finding in causes:
        assert finding.cause_detail.endswith("(visibility timeout 20 s)"), finding.cause_detail
    causes, redeliveries = _lease_findings(RABBITMQ, timeouts={"": 20.0})
    for finding in causes:
        assert finding.cause_detail.endswith("(visibility timeout 20 s)"), finding.cause_detail
    for finding in redeliveries:
        assert "; visibility timeout 20 s" in finding.summary


@pytest.mark.parametrize(("first", "later", "names"), [
    (1, 2, ("attempt 1", "attempt 2")),
    (1, 1, ("the first", "a second run of attempt 1")),
    (None, 3, ("the first", "a second run of attempt 3")),
    (None, None, ("the first", "a second run")),
    (0, 1, ("attempt 0", "attempt 1")),
])
def test_two_runs_are_named_by_the_attempt_numbers_they_logged(first, later, names):
    assert two_runs(first, later) == names

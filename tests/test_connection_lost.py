"""A kill the workers' logs do not tell, told by the broker: RabbitMQ's `client unexpectedly closed
TCP connection` after a run's last record and before its message came back (the recording
fixtures/real/dramatiq_rabbitmq_sigkill_redelivery, its deploy log left out, as an export of the
workers' and the broker's logs alone would be)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES
from truth_compare import analyze_logs

RECORDING = FIXTURES / "real" / "dramatiq_rabbitmq_sigkill_redelivery"
CONTROL = FIXTURES / "real" / "dramatiq_rabbitmq_guarded_control"


def _without(folder: Path, tmp_path: Path, *names: str) -> Path:
    logs = tmp_path / "logs"
    shutil.copytree(folder / "logs", logs)
    for name in names:
        (logs / name).unlink()
    return logs


def _duplicated(folder: Path) -> dict[str, list[str]]:
    truth = json.loads((folder / "truth.json").read_text())
    return {a["ids"]["job_id"][0]: a["causes"] for a in truth["actions"] if a["duplicated"]}


def _harmful(report) -> dict[str, object]:
    return {f.ids["job_id"][0]: f for f in report.findings if f.rule == "DF101" and f.harmful}


def test_the_brokers_dropped_connection_is_the_kill_no_other_log_tells(tmp_path):
    report = analyze_logs(_without(RECORDING, tmp_path, "deploy.ndjson"))
    truth = _duplicated(RECORDING)
    found = _harmful(report)
    assert set(found) == set(truth) and all(causes == ["worker_killed"] for causes in truth.values())
    for finding in found.values():
        assert (finding.cause, finding.confidence) == ("worker_killed", "likely"), finding.cause_detail
        assert "client unexpectedly closed TCP connection" in finding.cause_detail
        cited = [ev for ev in finding.evidence if ev.source.endswith("rabbit@localhost.log")]
        assert len(cited) == 1 and cited[0].name == "consumer_connection_lost"
        # between the first run's last record and the message's return
        assert 0 < finding.figures["requeued_after_s"] < 0.2 and finding.figures["s_after_last_record"] > 5


def test_with_the_kill_logged_the_kill_is_cited_and_certain(tmp_path):
    report = analyze_logs(RECORDING / "logs")
    for finding in _harmful(report).values():
        assert (finding.cause, finding.confidence) == ("worker_killed", "certain")
        assert "client unexpectedly closed" not in finding.cause_detail


def test_without_the_brokers_log_nothing_explains_it(tmp_path):
    report = analyze_logs(_without(RECORDING, tmp_path, "deploy.ndjson", "rabbit@localhost.log"))
    assert {(f.cause, f.confidence) for f in _harmful(report).values()} == {("unknown", "possible")}


def test_a_process_that_logs_on_after_the_drop_was_not_the_one_cut(tmp_path):
    """A consumer whose connection dropped while it lived goes on logging: the drop is not its."""
    logs = _without(RECORDING, tmp_path, "deploy.ndjson")
    app = logs / "app-worker1.ndjson"
    lines = app.read_text().splitlines()
    # the process the kill cut (pid 14160) logs on at 18.9 s, after the drop at 18.391 s
    later = {"ts": "2026-12-07T00:56:18.900000Z", "level": "info", "event": "worker_idle", "worker_id": "worker1@rec",
             "pid": 14160, "msg": "waiting for messages"}
    app.write_text("\n".join([*lines, json.dumps(later, separators=(",", ":"))]) + "\n")
    report = analyze_logs(logs)
    assert {f.cause for f in _harmful(report).values()} == {"unknown"}


@pytest.mark.parametrize("left_out", [("deploy.ndjson",), ()])
def test_the_guarded_control_stays_quiet(tmp_path, left_out):
    report = analyze_logs(_without(CONTROL, tmp_path, *left_out))
    assert report.verdict == "no_harmful_duplicates"
    assert not _harmful(report)


NODE_KILLED = FIXTURES / "real" / "celery_rabbitmq_node_sigkill_no_deploy_log"
NODE_KILLED_CONTROL = FIXTURES / "real" / "celery_rabbitmq_node_sigkill_no_deploy_log_guarded_control"


def test_a_whole_celery_node_killed_with_no_log_of_it_is_told_by_rabbitmq():
    """The recording: worker1 (main process and pool) SIGKILLed, nothing logged of it but RabbitMQ's
    `closing AMQP connection` / `client unexpectedly closed TCP connection` of its connections; the
    tasks it had sent and not acked came back on worker2 at once."""
    report = analyze_logs(NODE_KILLED / "logs")
    truth = json.loads((NODE_KILLED / "truth.json").read_text())
    (kill,) = truth["node_kills"]
    found = _harmful(report)
    assert set(found) == set(kill["requeued_after_provider_request"]) == {
        a["ids"]["job_id"][0] for a in truth["actions"] if a["duplicated"]}
    reasons = {(r["file"], r["reason_line"]) for r in kill["rabbitmq_lines"]}
    for finding in found.values():
        assert (finding.cause, finding.confidence) == ("worker_killed", "likely"), finding.cause_detail
        assert finding.cause_detail.startswith(f"{kill['worker_id']} (process ")
        (cited,) = [ev for ev in finding.evidence if ev.name == "consumer_connection_lost"]
        assert (Path(cited.source).name, cited.line) in reasons
        assert finding.figures["requeued_after_s"] < 0.1  # RabbitMQ requeues a dead connection's messages at once
    # The requeues are no lease that ran out: nothing is inferred from those gaps.
    assert report.context.inferred_timeouts == {}
    assert all(report.context.redelivery_gaps.filter(pl.col("prev_exec_id").is_not_null())["after_kill"])


def test_the_same_kill_guarded_is_quiet():
    report = analyze_logs(NODE_KILLED_CONTROL / "logs")
    truth = json.loads((NODE_KILLED_CONTROL / "truth.json").read_text())
    assert report.verdict == "no_harmful_duplicates" and not _harmful(report)
    guards = [f for f in report.findings if f.rule == "DF106"]
    assert len(guards) == truth["counters"]["noop_claimed_by_other_worker"] == 3


@pytest.mark.parametrize("folder", [NODE_KILLED, NODE_KILLED_CONTROL], ids=lambda p: p.name)
def test_the_runs_the_dropped_connection_held_are_cut_short(folder):
    """DF203 from the broker's log alone: the node's runs in flight at its dropped connection, each
    delivered again (the truth's requeued jobs), those past their send counted."""
    report = analyze_logs(folder / "logs")
    (kill,) = json.loads((folder / "truth.json").read_text())["node_kills"]
    (cut,) = [f for f in report.findings if f.rule == "DF203"]
    assert cut.ids["worker_id"] == [kill["worker_id"]] and cut.confidence == "likely"
    assert cut.figures["end"] == "connection_lost"
    assert set(cut.ids["job_id"]) == set(kill["requeued_jobs"])
    assert cut.figures["in_flight"] == len(kill["requeued_jobs"])
    assert cut.figures["side_effect_done"] == len(kill["requeued_after_provider_request"])


def test_the_trace_says_the_broker_lost_the_connection_not_that_a_kill_was_logged(cli):
    job = json.loads((NODE_KILLED / "truth.json").read_text())["node_kills"][0]["requeued_after_provider_request"][0]
    done = cli("trace", job, str(NODE_KILLED / "logs"), "--no-cache")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.decode().split())
    assert "attempt 1: worker1@rec" in text and ", connection lost," in text and "worker killed" not in text
    assert "the broker lost the consumer's connection with this job in flight (no kill logged; attempt 1 never acked)" in text

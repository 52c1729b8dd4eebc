"""A lease expiry a worker logs with no job id (the Kafka client's poll timeout, Celery's channel
error on RabbitMQ's consumer timeout) is cited for the job that worker was running when it was
logged, before the job ran again: not for another worker's job, nor outside the run."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.trace import correlation_context, trace_ids

KAFKA = FIXTURES / "scenarios" / "spring-kafka-max-poll-rebalance" / "logs"
FIRST, SECOND = "notifier-7b9c6d5f4-2kq8x.log", "notifier-7b9c6d5f4-xz4mp.log"
POLL_TIMEOUT = "consumer poll timeout has expired"
RABBITMQ = FIXTURES / "real" / "celery_rabbitmq_consumer_timeout" / "logs"


def _duplicate(logs: Path):
    """The DF101 finding of the Kafka scenario's order (there is one)."""
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(logs)], config), config, load_rules(config))
    (finding,) = [f for f in report.findings if f.rule == "DF101" and "ord_55520" in f.ids.get("order_id", [])]
    return finding


def _cited(finding) -> dict[tuple[str, int], str | None]:
    return {(Path(ev.source).name, ev.line): ev.note for ev in finding.evidence}


def _poll_timeout_lines(path: Path) -> list[int]:
    return [n for n, line in enumerate(path.read_text().splitlines(), start=1) if "poll timeout has expired" in line]


def _moved(tmp_path: Path, move) -> Path:
    """The scenario with the first pod's poll-timeout lines taken out and given to `move(lines)`,
    which writes them where it wants."""
    logs = tmp_path / "logs"
    shutil.copytree(KAFKA, logs)
    lines = (logs / FIRST).read_text().splitlines(keepends=True)
    expiries = [line for line in lines if "poll timeout has expired" in line]
    assert len(expiries) == 2
    (logs / FIRST).write_text("".join(line for line in lines if line not in expiries))
    move(logs, expiries)
    return logs


def _insert_sorted(path: Path, new: list[str]) -> None:
    lines = path.read_text().splitlines(keepends=True) + new
    path.write_text("".join(sorted(lines, key=lambda line: line[:24])))


def test_the_kafka_poll_timeout_of_the_worker_running_the_job_is_its_evidence():
    finding = _duplicate(KAFKA)
    assert (finding.cause, finding.confidence) == ("lease_expired", "certain")
    cited = _cited(finding)
    lines = _poll_timeout_lines(KAFKA / FIRST)
    assert lines
    assert cited.get((FIRST, lines[0])) == "lease expired"


def test_the_trace_shows_the_poll_timeout_as_the_runs_lease_expiring():
    config = load_config(cwd=Path("/"))
    read = ingest([str(KAFKA)], config)
    ctx = correlation_context(read.table, config, texts=read.texts)
    (trace,) = trace_ids(ctx, ["ord_55520"]).traces
    first = _poll_timeout_lines(KAFKA / FIRST)[0]
    (row,) = [r for r in trace.records if Path(r["source"]).name == FIRST and r["line"] == first]
    assert any(note.startswith("lease expired while run 1 still running") for note in trace.notes[row["rid"]])


def test_another_workers_poll_timeout_is_not_cited(tmp_path):
    """The same lines logged by the pod that ran the job second (it held nothing of this job then)."""
    def to_second(logs: Path, expiries: list[str]) -> None:
        _insert_sorted(logs / SECOND, expiries)

    logs = _moved(tmp_path, to_second)
    finding = _duplicate(logs)
    assert not [key for key, note in _cited(finding).items() if note == "lease expired"]
    assert _poll_timeout_lines(logs / SECOND)  # still read, still a lease expiry of that pod


def test_a_poll_timeout_after_the_run_ended_is_not_cited(tmp_path):
    """The first pod's poll timeout logged after its run of the job ended (10:15:02.722)."""
    def later(logs: Path, expiries: list[str]) -> None:
        _insert_sorted(logs / FIRST, [line.replace("2026-12-06T10:14:50", "2026-12-06T10:15:40") for line in expiries])

    logs = _moved(tmp_path, later)
    finding = _duplicate(logs)
    assert not [key for key, note in _cited(finding).items() if note == "lease expired"]


def test_celerys_channel_error_on_rabbitmqs_consumer_timeout_is_cited():
    """The recording: worker1's `PRECONDITION_FAILED - delivery acknowledgement ... timed out`
    (no task id) is the evidence of each task it held when RabbitMQ took them back."""
    config = load_config(cwd=Path("/"))
    report = analyze(ingest([str(RABBITMQ)], config), config, load_rules(config))
    duplicates = [f for f in report.findings if f.rule == "DF101"]
    assert duplicates
    for finding in duplicates:
        notes = {key: note for key, note in _cited(finding).items() if note == "lease expired"}
        assert notes, finding.summary
        for name, line in notes:
            text = (RABBITMQ / name).read_text().splitlines()[line - 1]
            assert "PRECONDITION_FAILED" in text and "timed out" in text

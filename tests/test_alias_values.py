"""Alias values as the canonical table holds them: stripped of Unicode whitespace, empty as null,
other values as they were read (normalize._materialize_paths strips only the columns that need it)."""

from __future__ import annotations

import json

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.config import load_config
from dupfind.ingest import ingest

CONFIG = load_config(None, None, None)
# Whitespace Python and Rust agree on (Unicode White_Space), and characters that are not.
PADS = ["", " ", "  ", "\t", "\u00a0", "\u2003", "\u3000", "\u200b", "x"]


def _read(tmp_path, workers: list[str], queues: list[str]) -> pl.DataFrame:
    lines = [
        json.dumps({"ts": f"2026-07-21T10:00:{i % 60:02d}Z", "event": "job_started", "job_id": f"j{i}",
                    "worker": w, "queue": q})
        for i, (w, q) in enumerate(zip(workers, queues))
    ]
    (tmp_path / "w.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = ingest([str(tmp_path / "w.log")], CONFIG)
    return result.table.sort("line").select(pl.col("worker_id").cast(pl.String), pl.col("queue").cast(pl.String))


def _expected(value: str) -> str | None:
    stripped = value.strip()  # str.strip() strips Unicode White_Space too (U+200B is not)
    return stripped or None


def test_padded_and_empty_values(tmp_path):
    workers = ["w1", " w2 ", "\u2003w3\u3000", "", "   ", "w\u200b", "w 5"]
    queues = ["emails"] * len(workers)  # a column with nothing to strip, beside one with
    table = _read(tmp_path, workers, queues)
    assert table["worker_id"].to_list() == ["w1", "w2", "w3", None, None, "w\u200b", "w 5"]
    assert table["queue"].to_list() == queues


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PADS), st.text(alphabet="ab \u2003c", max_size=4), st.sampled_from(PADS)),
                min_size=1, max_size=12))
def test_values_are_stripped_as_python_strips_them(tmp_path_factory, parts):
    workers = [f"{a}{b}{c}" for a, b, c in parts]
    table = _read(tmp_path_factory.mktemp("pads"), workers, ["q"] * len(workers))
    assert table["worker_id"].to_list() == [_expected(w) for w in workers]


def test_a_consumer_shared_by_the_workers_does_not_name_them(tmp_path):
    """NATS JetStream's durable consumer (and Kafka's group) is one name for every worker that pulls
    from it: where a record names its host too, the host is the worker (fixtures/real/nats_*)."""
    lines = [json.dumps({"ts": f"2026-12-06T22:03:0{i}Z", "event": "job_started", "job_id": f"n-{i}",
                         "consumer": "notify-workers", "hostname": f"notifier-{i % 2}"}) for i in range(4)]
    lines.append(json.dumps({"ts": "2026-12-06T22:03:05Z", "event": "job_started", "job_id": "n-5",
                             "consumer": "notify-workers-7f3c"}))  # no host: the consumer is all it says
    (tmp_path / "w.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = ingest([str(tmp_path / "w.log")], CONFIG).table.sort("line")
    assert table["worker_id"].cast(pl.String).to_list() == [
        "notifier-0", "notifier-1", "notifier-0", "notifier-1", "notify-workers-7f3c"]


def test_a_timeout_in_milliseconds_is_read_in_seconds(tmp_path):
    """`consumer_timeout_ms` (RabbitMQ), `max_poll_interval_ms` (Kafka): the timeout in seconds; a
    field in seconds on the same record wins; a value that is no number is no timeout."""
    records = [
        {"ts": "2026-07-21T10:00:00Z", "event": "worker_started", "worker": "w1", "consumer_timeout_ms": 15000},
        {"ts": "2026-07-21T10:00:01Z", "event": "worker_started", "worker": "w2", "max_poll_interval_ms": "300000"},
        {"ts": "2026-07-21T10:00:02Z", "event": "worker_started", "worker": "w3", "visibility_timeout_ms": 4500,
         "visibility_timeout": 30},
        {"ts": "2026-07-21T10:00:03Z", "event": "worker_started", "worker": "w4", "visibility_timeout_ms": "soon"},
        {"ts": "2026-07-21T10:00:04Z", "event": "worker_started", "worker": "w5"},
    ]
    (tmp_path / "w.log").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    table = ingest([str(tmp_path / "w.log")], CONFIG).table.sort("line")
    assert table["visibility_timeout_s"].to_list() == [15.0, 300.0, 30.0, None, None]


def test_a_stated_timeout_keeps_the_name_its_platform_gives_it(tmp_path):
    """Each platform's lease feeds the one timeout column and names it (findings say `ack deadline
    10 s` for Pub/Sub, not `visibility timeout`); a record stating two takes the first of
    schema.STATED_TIMEOUTS' order, value and name alike."""
    records = [
        {"ts": "2026-07-21T10:00:00Z", "event": "worker_started", "worker": "w1", "ackDeadlineSeconds": 10},
        {"ts": "2026-07-21T10:00:01Z", "event": "worker_started", "worker": "w2", "ack_wait_s": 30},
        {"ts": "2026-07-21T10:00:02Z", "event": "worker_started", "worker": "w3", "maxPollIntervalMs": 300000},
        {"ts": "2026-07-21T10:00:03Z", "event": "worker_started", "worker": "w4", "consumer_timeout_ms": "1800000"},
        {"ts": "2026-07-21T10:00:04Z", "event": "worker_started", "worker": "w5", "VisibilityTimeout": 45,
         "max_poll_interval_ms": 300000},
        {"ts": "2026-07-21T10:00:05Z", "event": "worker_started", "worker": "w6", "ack_deadline_ms": "soon",
         "max_poll_interval_ms": 60000},
        {"ts": "2026-07-21T10:00:06Z", "event": "worker_started", "worker": "w7"},
    ]
    (tmp_path / "w.log").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    table = ingest([str(tmp_path / "w.log")], CONFIG).table.sort("line")
    assert table["visibility_timeout_s"].to_list() == [10.0, 30.0, 300.0, 1800.0, 45.0, 60.0, None]
    assert table["timeout_name"].cast(pl.String).to_list() == [
        "ack deadline", "ack wait", "max.poll.interval.ms", "consumer_timeout", "visibility timeout",
        "max.poll.interval.ms", None]

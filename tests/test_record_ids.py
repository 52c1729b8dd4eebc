"""A Kafka record's coordinates as its message (dupfind.record_ids): a record that names no message
of its own runs the one at its topic, partition and offset, in the consumer group that read it;
two runs in one group are a redelivery, two groups' runs of one record are two deliveries."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES, run_cli
from truth_compare import CONFIG, analyze_logs

from dupfind.ingest import ingest
from dupfind.record_ids import is_record, record_of, single_topic, split, two_groups
from dupfind.schema import as_strings
from dupfind.textcodes import Texts

T0 = datetime(2026, 12, 8, 14, 0, tzinfo=UTC)


def _ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _job_ids(tmp_path: Path, rows: list[dict]) -> list[str | None]:
    (tmp_path / "consumer.log").write_text("".join(json.dumps({"ts": _ts(i), "event": "message_received", **row}) + "\n"
                                                   for i, row in enumerate(rows)))
    read = ingest([str(tmp_path)], CONFIG)
    table = as_strings(read.texts.decoded(read.table.select("line", "job_id"))).sort("line")
    return table["job_id"].to_list()


def test_a_record_without_a_message_id_runs_the_one_at_its_coordinates_in_its_group(tmp_path):
    rows = [
        {"topic": "order-events", "partition": 1, "offset": 48252, "group_id": "notifier"},
        {"topic": "order-events", "partition": "3", "offset": 48321.0, "groupId": "search-indexer"},
        {"topic": "audit-log", "partition": 0, "offset": 9007199254740993, "group_id": "archiver"},  # above 2**53: exact
        {"topic": "order-events", "partition": 1, "offset": 48252},  # a producer's delivery report: no group
        {"topic": "order-events", "partition": 1, "offset": 48252, "group_id": "notifier", "message_id": "m-1"},
        {"partition": 1, "offset": 48252, "group_id": "notifier"},  # no topic: no record is named
        {"topic": "order-events", "partition": 1, "offset": "latest", "group_id": "notifier"},  # a setting, no offset
        {"queue": "emails", "group_id": "admins"},  # a group of another kind, no coordinates: nothing
        {"topic": "order-events", "partition": -1, "offset": -1001},  # a failed delivery report: no record
        # OpenTelemetry's messaging conventions, as an OTLP export's attributes name them
        {"messaging.destination.name": "payments", "messaging.destination.partition.id": "4",
         "messaging.kafka.offset": 77, "messaging.consumer.group.name": "ledger"},
        {"messaging.destination.name": "payments", "messaging.kafka.destination.partition": 4,
         "messaging.kafka.message.offset": 78, "messaging.kafka.consumer.group": "ledger"},
        {"messaging.destination.name": "payments", "messaging.message.id": "5d1e-77"},
        # an offset commit may log the committed position, the next record's offset: no id
        {"event": "offset_committed", "topic": "order-events", "partition": 1, "offset": 48253, "group_id": "notifier"},
        # a consumer that logs no group reads in its service's; a producer's delivery report is the record
        {"topic": "order-events", "partition": 1, "offset": 48252, "service": "search-indexer"},
        {"event": "event_published", "topic": "order-events", "partition": 1, "offset": 48252, "service": "orders-api"},
    ]
    assert _job_ids(tmp_path, rows) == [
        "order-events-1@48252 (group notifier)",
        "order-events-3@48321 (group search-indexer)",
        "audit-log-0@9007199254740993 (group archiver)",
        "order-events-1@48252",
        "m-1",
        None,
        None,
        None,
        None,
        "payments-4@77 (group ledger)",
        "payments-4@78 (group ledger)",
        "5d1e-77",
        None,
        "order-events-1@48252 (service search-indexer)",
        "order-events-1@48252",
    ]


@pytest.mark.parametrize(("job_id", "parts"), [
    ("order-events-1@48252 (group notifier)", ("order-events-1@48252", "notifier")),
    ("order-events-1@48252 (group a (b))", ("order-events-1@48252", "a (b)")),
    ("order-events-1@48252", ("order-events-1@48252", None)),
    ("order-events-1@48252 (service notifier)", ("order-events-1@48252", None)),
    ("report (group by day", ("report (group by day", None)),  # no closing bracket: an id of its own
    (" (group x)", (" (group x)", None)),
])
def test_a_job_id_splits_into_its_record_and_group_only_when_it_names_both(job_id, parts):
    assert split(job_id) == parts
    assert record_of(job_id) == parts[0]


def test_two_runs_read_one_record_in_two_groups_only_when_both_name_a_group_and_they_differ():
    a, b = "order-events-1@48252 (group notifier)", "order-events-1@48252 (group notifier-v2)"
    assert two_groups([a], [b]) == ("order-events-1@48252", "notifier", "notifier-v2")
    assert two_groups([a], [a]) is None  # one group: a redelivery
    assert two_groups([a], ["order-events-1@48252"]) is None  # the producer's record names no group
    assert two_groups([a], ["order-events-1@48253 (group notifier-v2)"]) is None  # another record
    # a run some of whose lines leave the group out still read the record in its group
    assert two_groups([a], [b, "order-events-1@48252 (service notifier)"]) == ("order-events-1@48252", "notifier", "notifier-v2")
    assert is_record("order-events-1@48252") and is_record("orders.v2_eu-12@0")
    assert not is_record("order-events-1@48252 (group notifier)") and not is_record("job@1") and not is_record("a/b-1@2")


def test_a_dictionary_finds_the_texts_that_begin_with_a_prefix():
    texts = Texts(pl.Series(sorted(["order-events-1@48252", "order-events-1@48252 (group a)",
                                    "order-events-1@48252 (group b)", "order-events-1@482520 (group a)", "zeta"])), ("job_id",))
    assert texts.starting_with("order-events-1@48252 (group ") == ["order-events-1@48252 (group a)", "order-events-1@48252 (group b)"]
    assert texts.starting_with("nothing") == []
    assert Texts.empty(("job_id",)).starting_with("a") == []


def _run(at: float, pod: str, group: str, offset: int, *, hang: float = 0.0, provider_id: str) -> list[dict]:
    """A notifier's run of the record at order-events-1@offset, read in `group`."""
    base = {"pod": pod, "service": "notifier", "group_id": group, "topic": "order-events", "partition": 1,
            "offset": offset, "event_id": f"evt-{offset}"}
    steps = [(0.0, "message_received", {}), (0.002, "job_started", {}),
             (0.01, "provider_request", {"side_effect": "email", "provider": "sendgrid"}),
             (0.2 + hang, "provider_response", {"status": 202, "provider_message_id": provider_id}),
             (0.21 + hang, "db_update", {}), (0.22 + hang, "offset_committed", {})]
    return [{"ts": _ts(at + dt), "level": "info", "event": name, **base, **extra} for dt, name, extra in steps]


def _two_runs(tmp_path: Path, second_group: str) -> Path:
    """Record order-events-1@500: pod a's call hangs 35 s; pod b reads the record 31 s later in `second_group`."""
    logs = tmp_path / "logs"
    logs.mkdir()
    start = {"ts": _ts(0), "level": "info", "event": "consumer_started", "pod": "notifier-a", "group_id": "notifier",
             "topic": "order-events", "max_poll_interval_ms": 30000}
    first = [start, *_run(1.0, "notifier-a", "notifier", 500, hang=35.0, provider_id="sg-a")]
    second = _run(32.0, "notifier-b", second_group, 500, provider_id="sg-b")
    for name, rows in (("notifier-a.log", first), ("notifier-b.log", second)):
        (logs / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return logs


def test_a_record_read_again_in_its_group_while_it_runs_is_a_lease_expiry(tmp_path):
    report = analyze_logs(_two_runs(tmp_path, "notifier"))
    [duplicate] = [f for f in report.findings if f.rule == "DF101"]
    assert (duplicate.cause, duplicate.confidence) == ("lease_expired", "certain")
    [lease] = [f for f in report.findings if f.rule == "DF103"]
    assert lease.ids["job_id"] == ["order-events-1@500 (group notifier)"]


def test_a_record_read_in_two_groups_of_one_handler_is_no_redelivery(tmp_path):
    report = analyze_logs(_two_runs(tmp_path, "notifier-canary"))
    [duplicate] = [f for f in report.findings if f.rule == "DF101"]
    assert (duplicate.cause, duplicate.confidence) == ("two_consumer_groups", "certain")
    assert "read record order-events-1@500 in consumer group 'notifier'" in duplicate.cause_detail
    assert "in group 'notifier-canary'" in duplicate.cause_detail
    # what to fix for that cause comes first, then DF101's own steps
    assert duplicate.remediation[0].startswith("Give every consumer of one handler the same consumer group id")
    [rule] = [r for r in report.rules if r.code == "DF101"]
    assert duplicate.remediation == [*rule.cause_remediation["two_consumer_groups"], *rule.remediation]
    assert not [f for f in report.findings if f.rule in ("DF103", "DF105")]


def test_trace_of_a_records_coordinates_finds_its_runs_in_every_group():
    logs = FIXTURES / "scenarios" / "kafka-consumer-group-per-pod" / "logs"
    done = run_cli("trace", "order-events-3@48321", str(logs), "--no-cache", "--format", "json")
    assert done.returncode == 0, done.stderr
    traces = json.loads(done.stdout)["traces"]
    matched = {m for trace in traces for m in trace["matched"]}
    groups = ("notifier-notifier-6f7d9c8b5-k2x4p", "notifier-notifier-6f7d9c8b5-q8m2z", "search-indexer")
    assert matched == {"job_id=order-events-3@48321", *(f"job_id=order-events-3@48321 (group {g})" for g in groups)}
    # the notifier's action (each pod ran it in a group of its own), then the indexer's
    notifier = traces[0]
    assert len({r["worker"] for r in notifier["records"] if r["kind"] == "receive"}) == 2
    assert len(traces) == 2


def test_a_failed_runs_retry_sent_as_a_record_of_a_retry_topic_is_no_double_publish(tmp_path):
    """Spring Kafka's non-blocking retries: the run of order-events-0@100 sends the e-mail, then fails
    to write its status; the record goes to order-events-retry-0, whose run sends again. Two
    messages of one action, but the second is the first's retry (before this change such a pair
    with message ids of their own read as a likely double publish)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    base = {"pod": "notifier-6f7d9c8b5-k2x4p", "service": "notifier", "group_id": "notifier", "event_id": "evt-100"}
    first = {**base, "topic": "order-events", "partition": 0, "offset": 100}
    retry = {**base, "topic": "order-events-retry-0", "partition": 0, "offset": 7}
    steps = [
        (0.0, "message_received", first, {}), (0.002, "job_started", first, {}),
        (0.01, "provider_request", first, {"side_effect": "email", "provider": "sendgrid"}),
        (0.2, "provider_response", first, {"status": 202, "provider_message_id": "sg-1"}),
        (5.2, "job_failed", first, {"level": "error", "error": "status write timed out"}),
        (5.21, "retry_scheduled", first, {"detail": "sent to order-events-retry-0 after 5000 ms"}),
        (10.3, "message_received", retry, {}), (10.302, "job_started", retry, {}),
        (10.31, "provider_request", retry, {"side_effect": "email", "provider": "sendgrid"}),
        (10.5, "provider_response", retry, {"status": 202, "provider_message_id": "sg-2"}),
        (10.51, "db_update", retry, {}), (10.52, "job_finished", retry, {}),
    ]
    rows = [{"ts": _ts(at), "level": "info", "event": name, **fields, **extra} for at, name, fields, extra in steps]
    (logs / "notifier-6f7d9c8b5-k2x4p.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = analyze_logs(logs)
    [duplicate] = [f for f in report.findings if f.rule == "DF101"]
    assert (duplicate.cause, duplicate.confidence) == ("partial_success_retry", "certain")
    assert "retried as another message (order-events-retry-0-0@7 (group notifier))" in duplicate.cause_detail
    assert not [f for f in report.findings if f.rule in ("DF103", "DF105")]


def test_consumers_that_log_no_group_read_in_their_services_and_redeliver_nothing_of_each_other(tmp_path):
    """The fan-out control with every `group_id` taken out of its lines: each service's run of a
    record is its own delivery, no redelivery of the other service's (the bare record as the
    message counted 72 redeliveries: 39 and 33)."""
    from dupfind.queue_stats import build_stats

    logs = tmp_path / "logs"
    logs.mkdir()
    for path in (FIXTURES / "scenarios" / "kafka-fanout-two-services-control" / "logs").iterdir():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        (logs / path.name).write_text("".join(json.dumps({k: v for k, v in r.items() if k != "group_id"}) + "\n" for r in rows))
    report = analyze_logs(logs)
    assert report.verdict == "no_harmful_duplicates" and not report.findings
    queues = build_stats(report).to_dict()["queues"]
    assert sorted((q["job_type"], q["redelivered"]) for q in queues) == [("IndexOrder", 0), ("SendOrderConfirmation", 0)]
    held = set(report.context.texts.as_text(report.context.columns("job_id")["job_id"].drop_nulls().unique()).to_list())
    assert "order-events-1@48252 (service notifier)" in held and "order-events-1@48252 (service search-indexer)" in held


def test_a_consumer_naming_its_group_on_some_lines_reads_in_it_on_the_others(tmp_path):
    """deploy-consumer-group-overlap's lines without `group_id` but on each pod's receive line (two
    generations reading in two groups): the lines without it read in the group their pod's other
    lines name (its only one for the topic), so the two groups' runs share no message and no
    DF103 reads them as a redelivery."""
    logs = tmp_path / "logs"
    logs.mkdir()
    source = FIXTURES / "scenarios" / "deploy-consumer-group-overlap" / "logs"
    for path in source.iterdir():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        kept = [r if r.get("msg") == "record received" else {k: v for k, v in r.items() if k != "group_id"} for r in rows]
        (logs / path.name).write_text("".join(json.dumps(r) + "\n" for r in kept))
    ids = ingest([str(logs)], CONFIG).text_table()["job_id"].drop_nulls().unique().to_list()
    assert not [i for i in ids if "(service " in i]
    assert "order-events-4@18355 (group notify-consumer)" in ids and "order-events-4@18355 (group notify-consumer-v2)" in ids
    report = analyze_logs(logs)
    assert not [f for f in report.findings if f.rule == "DF103"]
    assert {f.cause for f in report.findings if f.rule == "DF101"} == {"deploy_overlap"}


@pytest.mark.parametrize(("partitions", "topic"), [
    ("order-events-0, order-events-1, order-events-2", "order-events"),
    ("[order.events_v2-10]", "order.events_v2"),
    ("order-events-0, payments-0", ""),  # two topics: a partition number names no one record (read as none)
    ("", None),
])
def test_a_consumers_partitions_name_its_topic_only_when_they_are_one_topics(partitions, topic):
    found = pl.select(single_topic(pl.lit(partitions))).item()
    assert found == topic


def _spring(at: float, thread: str, logger: str, message: str) -> str:
    return f"{_ts(at)}  INFO 1 --- [notifier] [{thread}] {logger:<40} : {message}\n"


def test_a_spring_listeners_record_line_reads_the_topic_and_group_its_consumer_thread_was_given(tmp_path):
    """spring-kafka-max-poll-rebalance's listener lines name partition and offset only: they take
    the topic and group their consumer thread subscribed to or was assigned, in their own file (the
    files are small: read as one batch, where one thread name is each pod's)."""
    consumer, client, listener = "ntainer#0-0-C-1", "o.a.k.c.c.KafkaConsumer", "c.e.n.OrderConfirmationListener"
    coordinator, container = "o.a.k.c.c.internals.ConsumerCoordinator", "o.s.k.l.KafkaMessageListenerContainer"
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "notifier-a.log").write_text(
        _spring(0, consumer, client, "[Consumer clientId=consumer-notifier-1, groupId=notifier] Subscribed to topic(s): order-events")
        + _spring(1, "main", listener, "Started job order_id=ord_1 partition=0 offset=10")  # another thread
        + _spring(2, consumer, listener, "Started job order_id=ord_2 partition=0 offset=11")
    )
    (logs / "notifier-b.log").write_text(
        _spring(3, consumer, coordinator, "[Consumer clientId=consumer-billing-1, groupId=billing] "
                "Adding newly assigned partitions: payments-3, payments-4")
        + _spring(4, consumer, listener, "Started job order_id=ord_3 partition=4 offset=20")
        + _spring(5, consumer, container, "billing-v2: partitions assigned: [payments-4]")
        + _spring(6, consumer, listener, "Started job order_id=ord_4 partition=4 offset=20")
    )
    (logs / "notifier-c.log").write_text(  # nothing says what it reads: no record is named
        _spring(7, consumer, listener, "Started job order_id=ord_5 partition=0 offset=12")
    )
    (logs / "notifier-e.log").write_text(  # a pattern's new topic after a rebalance: partition 0 is either's
        _spring(11, consumer, container, "notifier: partitions assigned: [order-events-0]")
        + _spring(12, consumer, listener, "Started job order_id=ord_7 partition=0 offset=14")
        + _spring(13, consumer, container, "notifier: partitions assigned: [order-events-0, order-returns-0]")
        + _spring(14, consumer, listener, "Started job order_id=ord_8 partition=0 offset=15")
    )
    (logs / "notifier-d.log").write_text(  # two topics: partition 0 is either's
        _spring(8, consumer, client, "[Consumer clientId=consumer-notifier-1, groupId=notifier] Subscribed to topic(s): a, b")
        + _spring(9, consumer, coordinator, "[Consumer clientId=consumer-notifier-1, groupId=notifier] "
                  "Adding newly assigned partitions: a-0, b-0")
        + _spring(10, consumer, listener, "Started job order_id=ord_6 partition=0 offset=13")
    )
    table = as_strings(ingest([str(logs)], CONFIG).text_table()).filter(pl.col("order_id").is_not_null())
    assert dict(zip(table["order_id"], table["job_id"], strict=True)) == {
        "ord_1": None,
        "ord_2": "order-events-0@11 (group notifier)",
        "ord_3": "payments-4@20 (group billing)",
        "ord_4": "payments-4@20 (group billing-v2)",
        "ord_5": None,
        "ord_6": None,
        "ord_7": "order-events-0@14 (group notifier)",
        "ord_8": None,
    }


def test_a_spring_listener_in_a_kubectl_prefix_export_reads_its_own_pods_topic(tmp_path):
    """`kubectl logs --prefix -l app=notifier`: two pods' lines in one file, their consumer threads
    of one name; the pod whose thread was given no topic names no record."""
    consumer, listener = "ntainer#0-0-C-1", "c.e.n.OrderConfirmationListener"
    subscribed = "[Consumer clientId=consumer-notifier-1, groupId=notifier] Subscribed to topic(s): order-events"
    lines = [
        ("notifier-a", _spring(0, consumer, "o.a.k.c.c.KafkaConsumer", subscribed)),
        ("notifier-b", _spring(1, consumer, listener, "Started job order_id=ord_1 partition=0 offset=10")),
        ("notifier-a", _spring(2, consumer, listener, "Started job order_id=ord_2 partition=0 offset=11")),
    ]
    path = tmp_path / "notifier.log"
    path.write_text("".join(f"[pod/{pod}/notifier] {line}" for pod, line in lines))
    table = as_strings(ingest([str(path)], CONFIG).text_table()).filter(pl.col("order_id").is_not_null())
    assert dict(zip(table["order_id"], table["job_id"], strict=True)) == {
        "ord_1": None, "ord_2": "order-events-0@11 (group notifier)",
    }


def test_a_spring_listeners_json_log_gives_the_findings_of_its_text_log():
    """spring-kafka-json-rebalance is spring-kafka-max-poll-rebalance's pods as logstash-logback-encoder
    writes them (spring-kafka-ecs-rebalance as Spring Boot's ECS structured logging): the Kafka client's lines read by the same rules, each listener line in its consumer
    thread's topic and group, the config dump's timeout stated (before: no action at all)."""
    def findings(name: str) -> list[tuple]:
        report = analyze_logs(FIXTURES / "scenarios" / name / "logs")
        return sorted((f.rule, f.fingerprint, f.cause, f.confidence, f.summary) for f in report.findings)

    text = findings("spring-kafka-max-poll-rebalance")
    assert [f[0] for f in text].count("DF103") == 1
    assert findings("spring-kafka-json-rebalance") == text
    assert findings("spring-kafka-ecs-rebalance") == text  # Spring Boot's own ECS JSON, no host: the file is the pod

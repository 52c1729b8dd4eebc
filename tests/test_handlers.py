"""One event, several consumers (dupfind.handlers): each service's, or each job type's, run of an
event is an action of its own, not a repeat of another consumer's; one handler's runs stay one
action however its framework and application spell its name."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from truth_compare import analyze_logs

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def _ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _run(at: float, worker: str, event_id: str, *, service: str | None = None, handler: str | None = None,
         email: bool = False, provider_id: str = "") -> list[dict]:
    """A consumer's run of an event: received, started, maybe an e-mail sent, the status written,
    the offset committed."""
    base = {"worker_id": worker, "event_id": event_id, "order_id": "ord_" + event_id[4:]}
    if service is not None:
        base["service"] = service
    steps = [(0.0, "message_received", {}), (0.002, "job_started", {} if handler is None else {"handler": handler})]
    if email:
        steps += [(0.03, "provider_request", {"side_effect": "email", "provider": "sendgrid"}),
                  (0.23, "provider_response", {"status": 202, "provider_message_id": provider_id})]
    steps += [(0.25, "db_update", {}), (0.26, "offset_committed", {})]
    return [{"ts": _ts(at + dt), "level": "info", "event": name, **base, **extra} for dt, name, extra in steps]


def _write(folder: Path, files: dict[str, list[dict]]) -> Path:
    logs = folder / "logs"
    logs.mkdir()
    for name, rows in files.items():
        rows = sorted(rows, key=lambda r: r["ts"])
        (logs / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return logs


def _fan_out(tmp_path: Path, events: int, *, again: int | None = None) -> Path:
    """Each event consumed by the notifier (an e-mail) and by the search indexer (no side effect),
    within milliseconds of each other; `again`: an event the notifier ran twice (a redelivery)."""
    notifier, indexer = [], []
    for i in range(events):
        at, event_id = 2.0 * i, f"evt_{i:04d}"
        notifier += _run(at + 0.031, "notifier-6f7d9c8b5-k2x4p", event_id, service="notifier",
                         email=True, provider_id=f"sg_{i}_a")
        indexer += _run(at + 0.027, "search-indexer-5d2b9-0", event_id, service="search-indexer")
        if i == again:
            notifier += _run(at + 31.0, "notifier-6f7d9c8b5-q8m2z", event_id, service="notifier",
                             email=True, provider_id=f"sg_{i}_b")
    return _write(tmp_path, {"notifier.ndjson": notifier, "indexer.ndjson": indexer})


def test_two_services_consuming_one_event_are_two_actions_and_no_repeat(tmp_path):
    report = analyze_logs(_fan_out(tmp_path, 20))
    assert report.verdict == "no_harmful_duplicates"
    assert not report.findings, [(f.rule, f.summary) for f in report.findings]
    assert report.summary["actions"] == 40 and report.summary["actions_with_repeated_executions"] == 0
    identities = report.context.actions["identity"].to_list()
    assert sum("handler=notifier" in i for i in identities) == sum("handler=search-indexer" in i for i in identities) == 20


def test_a_service_that_ran_an_event_twice_is_still_a_duplicate_of_its_own(tmp_path):
    report = analyze_logs(_fan_out(tmp_path, 20, again=7))
    duplicated = [f for f in report.findings if f.rule == "DF101" and f.harmful]
    assert len(duplicated) == 1 and duplicated[0].ids["event_id"] == ["evt_0007"]
    assert set(duplicated[0].workers) == {"notifier-6f7d9c8b5-k2x4p", "notifier-6f7d9c8b5-q8m2z"}
    # The indexer's run of that event is no third execution of it, nor a run at the same time.
    assert duplicated[0].figures["executions"] == 2
    assert not [f for f in report.findings if f.rule == "DF102"]


def test_one_handler_spelt_two_ways_is_one_handler(tmp_path):
    """Celery's line names the task `notify.send_email`, the application's `send_email`; a second
    run tells only the application's: one handler, and its repeat is found."""
    first = _run(0.0, "worker-a", "evt_0001", handler="send_email", email=True, provider_id="p1")
    first.append({"ts": _ts(0.001), "level": "info", "event": "task_received", "task": "notify.send_email",
                  "worker_id": "worker-a", "event_id": "evt_0001"})
    second = _run(40.0, "worker-b", "evt_0001", handler="send_email", email=True, provider_id="p2")
    report = analyze_logs(_write(tmp_path, {"a.ndjson": first, "b.ndjson": second}))
    assert report.summary["actions"] == 1
    assert [f.rule for f in report.findings if f.harmful] == ["DF101"]


def test_two_tasks_of_one_service_for_one_event_are_two_actions(tmp_path):
    """One event triggers two tasks of the same service (send the e-mail, update the CRM): two
    actions; a run that names no handler goes with the first to run."""
    rows = (_run(0.0, "worker-a", "evt_0001", service="shop", handler="send_confirmation", email=True, provider_id="p1")
            + _run(0.1, "worker-b", "evt_0001", service="shop", handler="sync_crm")
            + _run(50.0, "worker-c", "evt_0001", service="shop"))
    report = analyze_logs(_write(tmp_path, {"shop.ndjson": rows}))
    assert report.summary["actions"] == 2
    executions = report.context.executions.sort("start")
    first, crm, unnamed = executions["action_id"].to_list()
    assert first == unnamed != crm
    assert not [f for f in report.findings if f.rule in ("DF101", "DF102")]


def test_a_duplicates_timeout_is_the_one_its_own_service_states(tmp_path):
    """Two consumer groups of one topic state their own max.poll.interval.ms (the notifier 30 s, the
    search indexer 300 s): the notifier's duplicate is worded with the notifier's, however often the
    indexer states its own (kafka-fanout-rebalance-duplicate, the indexer's statement said 4 times
    more in each of its pods)."""
    import shutil

    from conftest import FIXTURES

    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "scenarios" / "kafka-fanout-rebalance-duplicate" / "logs", logs)
    for path in logs.glob("search-indexer-*.log"):
        lines = path.read_text().splitlines()
        started = json.loads(lines[0])
        assert started["max_poll_interval_ms"] == 300000
        again = [json.dumps({**started, "ts": started["ts"][:-4] + f"{500 + n:03d}Z", "msg": "consumer config"})
                 for n in range(4)]
        path.write_text("\n".join([lines[0], *again, *lines[1:]]) + "\n")
    report = analyze_logs(logs)
    (duplicate,) = [f for f in report.findings if f.rule == "DF101" and f.harmful]
    assert duplicate.cause == "lease_expired" and duplicate.figures["timeout_s"] == 30.0
    assert "(max.poll.interval.ms 30 s)" in duplicate.cause_detail
    assert report.context.stated_timeouts["order-events"] == 300.0  # the topic's, over both groups


def test_a_trace_of_a_fanned_out_event_names_each_consumer(cli):
    """`trace EVENT` finds one action a consumer, each saying which it is."""
    logs = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios" / "kafka-fanout-two-services-control" / "logs"
    line = next(json.loads(x) for x in (logs / "notifier-6f7d9c8b5-k2x4p.log").read_text().splitlines() if '"event_id"' in x)
    done = cli("trace", line["event_id"], str(logs), "--no-cache", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert text.count("- Handler: ") == 2
    assert "`notifier/SendOrderConfirmation`" in text and "`search-indexer/IndexOrder`" in text


def test_each_handler_of_a_fan_out_counts_the_events_publish(tmp_path):
    """The producer published each event once, to both consumers: `stats` counts the publish, and
    the wait before each consumer's first delivery, for each handler (the action that keeps the
    publish is the first handler's; before 2026-12-08 each publish counted for one handler only)."""
    from dupfind.queue_stats import build_stats

    producer, notifier, indexer = [], [], []
    for i in range(12):
        at, event_id = 2.0 * i, f"evt_{i:04d}"
        producer.append({"ts": _ts(at), "level": "info", "event": "event_published", "service": "orders-api",
                         "event_id": event_id, "topic": "order-events", "worker_id": "orders-api-5d8f7b6c9-x7vq2"})
        # the indexer runs first for even events, the notifier for odd ones
        notifier += _run(at + (0.031 if i % 2 == 0 else 0.012), "notifier-6f7d9c8b5-k2x4p", event_id,
                         service="notifier", handler="SendOrderConfirmation", email=True, provider_id=f"sg_{i}")
        indexer += _run(at + 0.02, "search-indexer-5d2b9-0", event_id, service="search-indexer", handler="IndexOrder")
    consumers = [{**row, "topic": "order-events"} for row in notifier], [{**row, "topic": "order-events"} for row in indexer]
    logs = _write(tmp_path, {"orders-api.ndjson": producer, "notifier.ndjson": consumers[0], "indexer.ndjson": consumers[1]})
    queues = build_stats(analyze_logs(logs)).to_dict()["queues"]
    by_type = {q["job_type"]: q for q in queues}
    assert set(by_type) == {"SendOrderConfirmation", "IndexOrder"}
    for handler in by_type.values():
        assert (handler["published"], handler["received"], handler["queue_wait_s"]["n"]) == (12, 12, 12)
        assert handler["lost"] == 0
    assert by_type["IndexOrder"]["queue_wait_s"]["max"] == 0.02
    assert by_type["SendOrderConfirmation"]["queue_wait_s"]["max"] == 0.031

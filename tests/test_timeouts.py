"""Visibility timeouts inferred from redelivery gaps alone (synth 30 s and 5 s, Celery, SQS), and their sources."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import polars as pl
import pytest

from dupfind.analysis import AnalysisContext
from dupfind.config import load_config
from dupfind.correlate import correlate
from dupfind.ingest import ingest
from dupfind.synth import PRESETS, write_scenario

from conftest import FIXTURES

CONFIG = load_config(cwd=Path("/"))
REAL = sorted(p for p in (FIXTURES / "real").iterdir() if (p / "truth.json").is_file())


def _context(logs: Path, strip_stated: bool = True, timeouts: dict[str, float] | None = None) -> AnalysisContext:
    """The analysis context of some logs; by default every stated timeout is removed first."""
    read = ingest([str(logs)], CONFIG)
    table = read.table
    if strip_stated:
        table = table.with_columns(visibility_timeout_s=pl.lit(None, dtype=pl.Float64))
    return AnalysisContext(correlate(table, CONFIG.link_keys, texts=read.texts), CONFIG, timeouts=timeouts or {})


def _only_estimate(ctx: AnalysisContext):
    assert ctx.stated_timeouts == {}, "the stated timeout must not be visible to the inference"
    assert len(ctx.inferred_timeouts) == 1, ctx.inferred_timeouts
    return next(iter(ctx.inferred_timeouts.values()))


@pytest.mark.parametrize("timeout_s, slow_s", [(30.0, (85.0, 95.0)), (5.0, (6.5, 14.0))])
def test_simulated_timeout_is_recovered_within_a_second(timeout_s, slow_s, tmp_path_factory):
    base = PRESETS["visibility-timeout"].params
    for seed in range(1, 6):
        folder = tmp_path_factory.mktemp(f"vt{timeout_s:g}-{seed}")
        params = replace(base, visibility_timeout_s=timeout_s, slow_s=slow_s, jobs=30)
        truth = write_scenario("visibility-timeout", folder, seed=seed, params=params)
        assert truth["counters"]["lease_expirations"] > 0
        estimate = _only_estimate(_context(folder / "logs"))
        assert abs(estimate.estimate_s - timeout_s) <= 1.0, (seed, estimate)
        assert estimate.reliable and estimate.support <= estimate.gaps
        assert estimate.spread_s < 1.0


def _leases_expired(folder: Path) -> bool:
    """Whether the recording's redeliveries are leases that ran out: a visibility timeout, some
    redeliveries (an hour's timeout no run reached has none), and no framework handing its jobs
    back (a killed child's requeue, a push back, a retry)."""
    truth = orjson.loads((folder / "truth.json").read_bytes())
    handed_back = truth.get("worker_kills") or truth.get("shutdowns") or truth.get("job_timeouts")
    redelivered = truth["counters"].get("redeliveries", 0) > 0
    return truth["params"].get("visibility_timeout_s") is not None and redelivered and not handed_back


def _checked_on_a_tick(folder: Path) -> bool:
    """Whether the broker takes a delivery back only when it next checks (RabbitMQ's consumer
    timeout, looked at on each channel's tick): a redelivery comes between the timeout and the
    timeout plus the tick after the delivery, not at the timeout."""
    return "consumer_timeout_check" in orjson.loads((folder / "truth.json").read_bytes())["params"]


@pytest.mark.parametrize("folder", [p for p in REAL if _leases_expired(p)], ids=lambda p: p.name)
def test_real_broker_timeout_is_recovered_within_a_second(folder: Path):
    truth = orjson.loads((folder / "truth.json").read_bytes())
    estimate = _only_estimate(_context(folder / "logs"))
    assert abs(estimate.estimate_s - truth["params"]["visibility_timeout_s"]) <= 1.0, estimate
    assert estimate.reliable


@pytest.mark.parametrize("folder", [p for p in REAL if _checked_on_a_tick(p)], ids=lambda p: p.name)
def test_a_timeout_checked_on_a_tick_is_inferred_between_it_and_the_tick(folder: Path):
    """fixtures/real/celery_rabbitmq_consumer_timeout*: consumer_timeout 15 s, checked every 60 s;
    the deliveries came back 50-57 s after they were delivered."""
    params = orjson.loads((folder / "truth.json").read_bytes())["params"]
    timeout_s = params["consumer_timeout_ms"] / 1000
    tick_s = params["consumer_timeout_check"]["channel_tick_interval_ms"] / 1000
    estimate = _only_estimate(_context(folder / "logs"))
    assert timeout_s <= estimate.estimate_s <= timeout_s + tick_s, estimate


def _stale_lock(folder: Path) -> dict | None:
    """Delayed::Job's lease (fixtures/real/rails_delayed_job_*): a row's lock older than
    max_run_time is free again, and a worker takes it when it next polls (sleep_delay)."""
    return orjson.loads((folder / "truth.json").read_bytes())["params"].get("delayed_job")


@pytest.mark.parametrize("folder", [p for p in REAL if _stale_lock(p)], ids=lambda p: p.name)
def test_a_stale_lock_taken_on_a_poll_is_inferred_between_max_run_time_and_the_poll(folder: Path):
    """A killed worker's rows run again once their lock is older than max_run_time (15 s), on the
    next poll of a worker (every 5 s): the gaps, 15.6-19.5 s, give the lease between the two."""
    dj = _stale_lock(folder)
    estimate = _only_estimate(_context(folder / "logs"))
    assert dj["max_run_time_s"] <= estimate.estimate_s <= dj["max_run_time_s"] + dj["sleep_delay_s"], estimate


@pytest.mark.parametrize("folder", [p for p in REAL if not _leases_expired(p) and not _checked_on_a_tick(p)
                                    and not _stale_lock(p)], ids=lambda p: p.name)
def test_jobs_handed_back_by_their_framework_infer_no_timeout(folder: Path):
    """Celery's requeue of a killed child's task, Sidekiq's push back at its hard shutdown, RQ's
    retry after a job timeout: the job comes back when asked, not after a lease; nothing may be
    inferred from those gaps."""
    ctx = _context(folder / "logs")
    assert ctx.inferred_timeouts == {}


@pytest.mark.parametrize("preset", ["lock-atomic-control", "db-update-fails", "baseline"])
def test_requested_redeliveries_and_heartbeats_infer_nothing(preset: str):
    """Retries after a failure or a lock denial, and leases kept alive by a heartbeat, are no evidence
    of the timeout: these fixtures redeliver plenty but no lease ever expires under a running job."""
    folder = FIXTURES / "synth" / preset
    truth = orjson.loads((folder / "truth.json").read_bytes())
    assert truth["counters"]["redeliveries"] > 0
    ctx = _context(folder / "logs")
    assert ctx.inferred_timeouts == {}
    assert ctx.timeout_source("notifications") is None


def test_fan_out_is_not_a_lease_expiry():
    """Two consumer groups reading one record within milliseconds is not a sub-second timeout: each
    group's message of it is its own (before 2026-12-08 the two deliveries of the action were gaps
    of under a second, which only the inference's floor kept from being a timeout)."""
    ctx = _context(FIXTURES / "scenarios" / "deploy-consumer-group-overlap" / "logs")
    assert ctx.redelivery_gaps.height == 0
    assert ctx.inferred_timeouts == {}


def test_timeout_sources_in_order_configured_logged_inferred():
    logs = FIXTURES / "synth" / "visibility-timeout" / "logs"
    inferred = _context(logs)
    value, source = inferred.timeout_source("notifications")
    assert source == "inferred" and abs(value - 30.0) <= 1.0
    logged = _context(logs, strip_stated=False)
    assert logged.timeout_source("notifications") == (30.0, "logged")
    configured = _context(logs, strip_stated=False, timeouts={"notifications": 45.0})
    assert configured.timeout_source("notifications") == (45.0, "configured")
    assert configured.timeout_source("other-queue") == (30.0, "logged")


def test_jetstream_ack_wait_and_num_delivered_are_read():
    """NATS JetStream workers log the consumer's AckWait (`ack_wait_s`, on worker_ready) and each
    message's `num_delivered` (on message_received / message_acked): the first is the queue's lease,
    logged, not inferred; the second is the delivery's attempt (1, then 2 for a redelivery)."""
    folder = FIXTURES / "real" / "nats_jetstream_ack_wait_redelivery"
    assert _context(folder / "logs", strip_stated=False).timeout_source("notifications") == (5.0, "logged")
    truth = orjson.loads((folder / "truth.json").read_bytes())
    delivered = sorted((a["ids"]["job_id"][0], d["num_delivered"]) for a in truth["actions"] for d in a["deliveries"])
    assert max(n for _, n in delivered) == 2
    table = ingest([str(folder / "logs")], CONFIG).text_table()
    for name in ("message_received", "message_acked"):
        rows = table.filter(pl.col("name") == name).select("job_id", "attempt")
        assert sorted(zip(rows["job_id"].to_list(), rows["attempt"].to_list())) == delivered, name


def test_config_file_timeouts(tmp_path: Path):
    from dupfind.errors import DupfindError

    (tmp_path / "dupfind.toml").write_text('[timeouts]\nnotifications = 20\n"*" = 90\n')
    config = load_config(cwd=tmp_path)
    assert config.timeouts == {"notifications": 20.0, "": 90.0}
    (tmp_path / "dupfind.toml").write_text('[timeouts]\nnotifications = "soon"\n')
    with pytest.raises(DupfindError, match="timeouts.notifications"):
        load_config(cwd=tmp_path)


def _gaps_by_windows(rows: pl.DataFrame) -> pl.DataFrame:
    """The redelivery gaps as window functions over each message state them (the reference for
    the run-based formulation in timeouts.redelivery_gaps)."""
    from dupfind.timeouts import REQUESTED_REDELIVERY_KINDS

    rows = rows.with_columns(has_receive=(pl.col("kind") == "receive").any().over("message"))
    delivery_kind = pl.when(pl.col("has_receive")).then(pl.lit("receive")).otherwise(pl.lit("start"))
    rows = rows.filter((pl.col("kind") == delivery_kind) | pl.col("kind").is_in(REQUESTED_REDELIVERY_KINDS))
    rows = rows.with_columns(is_delivery=pl.col("kind").is_in(["receive", "start"])).sort(
        "message", "ts", "is_delivery", "rid"
    ).with_columns(
        requests=(~pl.col("is_delivery")).cast(pl.Int32).cum_sum().over("message"),
        queue=pl.col("queue").forward_fill().backward_fill().over("message"),
        action_id=pl.col("action_id").forward_fill().backward_fill().over("message"),
    )
    deliveries = rows.filter(pl.col("is_delivery"))
    # a run's delivery told again by its next step (another name) counts once
    deliveries = deliveries.filter(
        pl.col("exec_id").is_null() | (pl.col("exec_id") != pl.col("exec_id").shift(1).over("message")).fill_null(True)
        | (pl.col("name") == pl.col("name").shift(1).over("message")).fill_null(True)
    )
    return deliveries.with_columns(
        prev_ts=pl.col("ts").shift(1).over("message"),
        prev_rid=pl.col("rid").shift(1).over("message"),
        prev_exec_id=pl.col("exec_id").shift(1).over("message"),
        asked=pl.col("requests") - pl.col("requests").shift(1).over("message"),
    ).filter(pl.col("prev_ts").is_not_null() & (pl.col("asked") == 0)).select(
        pl.col("queue").fill_null(""), pl.col("message"), "action_id",
        gap_s=(pl.col("ts") - pl.col("prev_ts")).dt.total_microseconds() / 1e6,
        prev_rid="prev_rid", rid="rid", prev_exec_id="prev_exec_id", exec_id="exec_id",
    )


@pytest.mark.parametrize("seed", range(6))
def test_redelivery_gaps_equal_their_window_function_statement(seed):
    """Random messages (few and many records, receives or only starts, failures and retries
    between deliveries, queues and actions named on some records only, ties in time) give the
    same gaps, in the same order, as the per-message window functions."""
    import random
    from datetime import UTC, datetime, timedelta

    from dupfind.timeouts import gap_schema, redelivery_gaps

    rnd = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    records = []
    for m in range(rnd.randint(1, 300)):
        kinds = ["receive", "start", "fail", "retry", "lock_denied", "finish"]
        logs_receives = rnd.random() < 0.6
        for _ in range(rnd.randint(1, 9)):
            kind = rnd.choice(kinds if logs_receives else kinds[1:])
            records.append({
                "job_id": f"job-{m % 97}" if rnd.random() < 0.8 else None,
                "action_id": m if rnd.random() < 0.7 else None,
                "ts": start + timedelta(seconds=rnd.randint(0, 40)),
                "kind": kind,
                "queue": rnd.choice([None, None, "emails", "push"]),
                "exec_id": rnd.choice([None, m * 10, m * 10 + 1]),
                "echo": rnd.random() < 0.05,
                "name": rnd.choice(["delivered", "message_received"]),
            })
    table = pl.DataFrame(records, schema={
        "job_id": pl.String, "action_id": pl.Int64, "ts": pl.Datetime("us", "UTC"), "kind": pl.String,
        "queue": pl.String, "exec_id": pl.Int64, "echo": pl.Boolean, "name": pl.String,
    }).with_row_index("rid").with_columns(pl.col("kind", "queue", "job_id").cast(pl.Categorical))
    got = redelivery_gaps(table)
    rows = (
        table.filter((pl.col("job_id").is_not_null() | pl.col("action_id").is_not_null()) & ~pl.col("echo"))
        .filter(pl.col("kind").is_in(["receive", "start", "fail", "retry", "lock_denied"]))
        .select("rid", "ts", pl.col("kind").cast(pl.String), pl.col("queue").cast(pl.String), "action_id", "exec_id", "name",
                message=pl.coalesce(pl.col("job_id").cast(pl.String),
                                    pl.concat_str(pl.lit("action:"), pl.col("action_id").cast(pl.String))))
    )
    expected = _gaps_by_windows(rows).cast(gap_schema())
    assert got.height > 0
    assert got.equals(expected)


def _consumer(pod: str, service: str, poll_ms: int, runs: list[float], statements: int = 1) -> list[dict]:
    """A Kafka consumer pod of `service` stating its max.poll.interval.ms, then runs of these lengths."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 12, 8, 14, 0, tzinfo=UTC)

    def at(s: float) -> str:
        return (t0 + timedelta(seconds=s)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    base = {"pod": pod, "service": service, "topic": "order-events", "group_id": service}
    rows = [{"ts": at(0.01 * n), "event": "consumer_started", **base, "max_poll_interval_ms": poll_ms}
            for n in range(statements)]
    start = 1.0
    for i, length in enumerate(runs):
        run = {**base, "partition": 0, "offset": 1000 + i, "event_id": f"evt-{service}-{i}"}
        rows += [{"ts": at(start), "event": "message_received", **run}, {"ts": at(start + 0.001), "event": "job_started", **run},
                 {"ts": at(start + length), "event": "job_finished", **run}]
        start += length + 0.5
    return rows


def test_a_topics_consumers_stating_their_own_timeouts_are_advised_each_against_its_own(tmp_path):
    """A topic's two consumer groups state their max.poll.interval.ms, the notifier 30 s, the indexer
    300 s (three times): the notifier's 35 s runs are above its own 30 s (DF401 for its consumers),
    though the topic's statements' median is 300 s, which before 2026-12-08 was every consumer's."""
    from truth_compare import analyze_logs

    from dupfind.queue_stats import build_stats

    logs = tmp_path / "logs"
    logs.mkdir()
    for name, rows in (("notifier-6f7d9c8b5-k2x4p.log", _consumer("notifier-6f7d9c8b5-k2x4p", "notifier", 30000, [35.0] * 6)),
                       ("search-indexer-7c9b8d6f4-h5t2n.log",
                        _consumer("search-indexer-7c9b8d6f4-h5t2n", "search-indexer", 300000, [0.1] * 20, statements=3))):
        (logs / name).write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    report = analyze_logs(logs)
    [finding] = [f for f in report.findings if f.rule == "DF401"]
    assert finding.figures["service"] == "notifier" and finding.figures["timeout_s"] == 30.0
    assert finding.figures["timeout_name"] == "max.poll.interval.ms" and finding.figures["executions"] == 6
    assert "queue 'order-events' (its notifier consumers)" in finding.summary
    advice = {t["service"]: t for t in build_stats(report).to_dict()["timeouts"]}
    assert set(advice) == {"notifier", "search-indexer"}
    assert (advice["notifier"]["timeout_s"], advice["notifier"]["logged_s"], advice["notifier"]["durations"]["n"]) == (30.0, 30.0, 6)
    assert (advice["search-indexer"]["timeout_s"], advice["search-indexer"]["durations"]["n"]) == (300.0, 20)

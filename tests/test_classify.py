"""Kinds and side-effect types remembered across blocks are the ones each block would compute."""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.normalize import _classify

CONFIG = load_config(cwd=Path("/"))
KEYS = {"name": pl.String, "exit_code": pl.Int32, "action": pl.String, "provider": pl.String, "status": pl.String}


def _block(rows: list[tuple]) -> pl.DataFrame:
    """Rows of (name, exit code, action, provider[, status])."""
    rows = [(*row, None) if len(row) == 4 else row for row in rows]
    return pl.DataFrame(rows, schema=KEYS, orient="row").with_row_index("line")


BLOCKS = [
    _block([("job_received", None, None, None), ("email_sent", None, None, "sendgrid"), ("worker_exit", 137, None, None)]),
    _block([("email_sent", None, None, "sendgrid"), ("provider_request", None, "SMS", "twilio"), ("job_received", None, None, None),
            ("worker_exit", 0, None, None), (None, None, None, None), ("Something Else", None, None, None)]),
    _block([("worker_exit", 137, None, None), ("provider_request", None, None, "stripe"), ("job_received", None, None, None)]),
]


def _fresh(frame: pl.DataFrame) -> pl.DataFrame:
    """_classify with a configuration that remembers nothing yet."""
    return _classify(frame, copy.deepcopy(CONFIG))


def test_later_blocks_get_what_a_fresh_classification_gives():
    config = copy.deepcopy(CONFIG)
    for block in BLOCKS:
        assert _classify(block, config).equals(_fresh(block))
    remembered = config.__dict__["_classified"][1]
    assert ("worker_exit", 137, None, None, None) in remembered and len(remembered) == 8
    kinds = dict(zip(BLOCKS[1]["name"], _classify(BLOCKS[1], config)["kind"]))
    assert kinds["job_received"] == "receive" and kinds["Something Else"] == "other"
    assert _classify(BLOCKS[0], config)["kind"].to_list()[2] == "worker_killed"


def test_a_changed_vocabulary_is_not_answered_from_memory():
    config = copy.deepcopy(CONFIG)
    before = _classify(BLOCKS[0], config)["kind"].to_list()
    config.kinds = {**config.kinds, "job_received": "start"}
    after = _classify(BLOCKS[0], config)["kind"].to_list()
    assert before[0] == "receive" and after[0] == "start" and after[1:] == before[1:]


def test_a_formats_configuration_is_derived_once_and_again_after_a_change():
    from dupfind.normalize import config_for_format

    config = copy.deepcopy(CONFIG)
    first = config_for_format(config, "cri+celery")
    assert config_for_format(config, "cri+celery") is first  # what it remembers of classified keys is kept
    assert config_for_format(config, "ndjson") is not first
    config.aliases = {**config.aliases, "job_id": ["job_ref", *config.aliases["job_id"]]}
    changed = config_for_format(config, "cri+celery")
    assert changed is not first and changed.aliases["job_id"][0] == "job_ref"


def test_a_status_decides_the_kind_where_the_vocabulary_names_it_with_the_name():
    """Lambda's JSON platform events: `platform.report` is an invocation's end; `timeout` a kill."""
    block = _block([
        ("platform.report", None, None, None, "timeout"), ("platform.report", None, None, None, "success"),
        ("platform.runtimeDone", None, None, None, "Timeout"), ("platform.start", None, None, None, None),
        ("job_failed", None, None, None, "timeout"), ("provider_response", None, None, None, "timeout"),
        ("platform.report", None, None, None, "error"),
    ])
    config = copy.deepcopy(CONFIG)
    kinds = _classify(block, config)["kind"].to_list()
    assert kinds == ["worker_killed", "other", "worker_killed", "other", "fail", "side_effect_result", "fail"]
    assert _classify(block, config)["kind"].to_list() == kinds  # the same, remembered
    config.status_kinds = {}
    assert _classify(block, config)["kind"].to_list()[:3] == ["other", "other", "other"]


def test_a_status_table_of_the_vocabulary_is_checked(tmp_path):
    from dupfind.errors import DupfindError

    config = tmp_path / "dupfind.toml"
    config.write_text('[vocabulary.statuses."run.done"]\nworker_killed = ["killed", "OOM"]\n')
    loaded = load_config(config, None, None)
    assert loaded.status_kinds["run_done"] == {"killed": "worker_killed", "oom": "worker_killed"}
    assert loaded.status_kinds["platform_report"]["timeout"] == "worker_killed"  # the defaults stay
    config.write_text('[vocabulary.statuses.run_done]\nstopped = ["killed"]\n')
    with pytest.raises(DupfindError, match="vocabulary.statuses.run_done.stopped is not a canonical kind"):
        load_config(config, None, None)
    config.write_text('[vocabulary]\nstatuses = ["killed"]\n')
    with pytest.raises(DupfindError, match="one table per event name"):
        load_config(config, None, None)


def test_kinds_picked_by_the_vocabularys_regex_are_those_every_pattern_gives():
    """_with_kinds classifies only the names one regex of the vocabulary could name: the same kinds."""
    from dupfind.normalize import _kind_expr, _with_kinds

    names = [
        "job_received", "Job Received", " job.received ", "job--received", "JOB/RECEIVED:", "job__received",
        "Processed order 88412 in 35 ms", "Shutting down gracefully, received SIGTERM", "provider request sent",
        "Sending push to device 7781", "Error R12 (Exit timeout) -> At least one process failed to exit",
        "Process exited with status 137", "exited", "lock acquired for key a", "task timed out after 30.00 seconds",
        "State changed from starting to up", "platform.report", "", None, "noop_already_sent", "unique constraint hit",
    ] * 5
    rows = [(n, 137 if i % 17 == 0 else None, None, None, "timeout" if i % 11 == 0 else None) for i, n in enumerate(names)]
    block = _block(rows)
    assert block.height >= 64
    fast = _with_kinds(block, CONFIG)["kind"].to_list()
    every = block.with_columns(kind=_kind_expr(CONFIG))["kind"].to_list()
    assert fast == every
    assert {"receive", "stop_signal", "side_effect", "worker_killed", "worker_start", "other"} <= set(fast)


def test_a_block_of_many_keys_is_classified_without_the_memo():
    from dupfind.normalize import REMEMBERED_BLOCK_KEYS

    rows = [(f"Processed order {i} in {i % 900} ms", None, None, None) for i in range(REMEMBERED_BLOCK_KEYS + 10)]
    rows += [("job_received", None, None, None), ("Sending email to customer", None, None, "sendgrid")]
    block = _block(rows)
    config = copy.deepcopy(CONFIG)
    out = _classify(block, config)
    assert out["kind"].to_list()[-2:] == ["receive", "side_effect"] and out["action"].to_list()[-1] == "email"
    assert set(out["kind"].to_list()[:-2]) == {"other"}
    assert "_classified" not in config.__dict__  # nothing remembered of a block of its own keys


@pytest.mark.parametrize(("name", "kind"), [
    ("Worker started on queue notifications", "worker_start"),
    ("Starting process with command `python -m notifier.worker`", "worker_start"),  # Heroku's
    ("State changed from starting to up", "worker_start"),
    ("Job 4417 started", "start"),
    ("Starting job 4417", "start"),
])
def test_a_workers_own_start_in_words_is_not_a_jobs(name, kind):
    assert _classify(_block([(name, None, None, None)]), copy.deepcopy(CONFIG))["kind"].to_list() == [kind]


@pytest.mark.parametrize("name", ["job_published", "task.published", "Job published", "message_enqueued"])
def test_a_job_published_is_a_publish(name):
    # A producer's `job_published` was kind `other`: its jobs never received were no DF107 lost action.
    assert _classify(_block([(name, None, None, None)]), copy.deepcopy(CONFIG))["kind"].to_list() == ["publish"]


@pytest.mark.parametrize("name", [
    # RabbitMQ 3.10's log when a consumer held a delivery past consumer_timeout, and the channel exception
    "[warning] <0.698.0> Consumer 4 on channel 1 has timed out waiting for delivery acknowledgement. Timeout used: "
    "15000 ms. This timeout value can be configured, see consumers doc guide to learn more",
    "[error] <0.698.0> operation none caused a channel exception precondition_failed: delivery acknowledgement on "
    "channel 1 timed out. Timeout value used: 15000 ms. This timeout value can be configured, see consumers doc guide "
    "to learn more",
    # Celery 5's worker on that channel close (the message's name is not a failure of a job)
    "Unrecoverable error: PreconditionFailed(406, 'PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed "
    "out. Timeout value used: 15000 ms. This timeout value can be configured, see consumers doc guide to learn "
    "more', (0, 0), '')",
    # RabbitMQ 3.8's wording
    "PRECONDITION_FAILED - consumer ack timed out on channel 1",
])
def test_rabbitmqs_consumer_timeout_is_the_brokers_lease_expiry(name):
    assert _classify(_block([(name, None, None, None)]), copy.deepcopy(CONFIG))["kind"].to_list() == ["lease_expired"]


@pytest.mark.parametrize("size", [3, 80])  # below and above the size the prefilter starts at
def test_an_event_name_with_its_fields_after_it_is_that_events(size):
    """Spring's `job_started job_id=j-2 order_id=ord_2`, structlog's console `email_sent    job_id=j-1
    status=202`: the words before the trailing fields name the kind; a name whose words are no
    event's stays other, and fields alone name nothing."""
    named = [
        ("job_started job_id=j-2 order_id=ord_2", "start"),
        ("email_sent                     job_id=j-1 provider_message_id=0100019c status=202", "side_effect"),
        ("db_update_failed job_id=j-1 error='server closed the connection'", "fail"),
        ("ack offset=18842", "ack"),
        ("job_finished                   [notifier.worker] job_id=j-1 duration_ms=412", "finish"),  # structlog's logger name
        ("cache_warmed entries=3120", "other"),
        ("status=200 latency_ms=12", "other"),
    ]
    filler = [(f"heartbeat_{i} seq={i}", "other") for i in range(size)]
    rows = [(name, None, None, None) for name, _ in named + filler]
    kinds = _fresh(_block(rows))["kind"].to_list()
    assert kinds[:len(named)] == [kind for _, kind in named]
    assert set(kinds[len(named):]) == {"other"}

"""The recorded Huey consumers (fixtures/real/huey_redis_*): two consumers that both run the
periodic scheduler enqueue each occurrence twice (DF108), and each task sends several orders'
reminders, so its id is a batch's and links none of them."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
from conftest import FIXTURES
from truth_compare import analyze_logs, cited_lines, duplicates_with_their_actions, truth_of

from dupfind.correlate import build_actions

DOUBLE = FIXTURES / "real" / "huey_redis_two_schedulers_double_enqueue"
CONTROL = FIXTURES / "real" / "huey_redis_one_scheduler_control"


def test_each_reminder_sent_twice_cites_both_consumers_enqueueing_lines():
    for finding, action in duplicates_with_their_actions(DOUBLE):
        runs = action["runs"]
        assert cited_lines(finding) == {(r["enqueue_line"]["file"], r["enqueue_line"]["line"]) for r in runs}
        assert (finding.cause, finding.confidence) == ("double_publish", "certain")


def test_the_two_schedulers_are_one_finding_and_one_scheduler_none():
    truth = truth_of(DOUBLE)
    (overlap,) = [f for f in analyze_logs(DOUBLE / "logs").findings if f.rule == "DF108"]
    assert sorted(overlap.workers) == sorted(truth["counters"]["enqueueing_periodic_task_lines"])
    assert overlap.figures["doubled_sends"] == truth["counters"]["occurrences_enqueued_twice"]
    assert overlap.figures["actions_repeated"] == truth["counters"]["duplicated_actions"]
    control = analyze_logs(CONTROL / "logs")
    assert not [f for f in control.findings if f.rule in ("DF101", "DF108")]
    assert control.summary["actions"] == truth_of(CONTROL)["counters"]["actions"]


def test_a_job_id_that_carries_several_actions_keys_links_none_of_them():
    """A batch's message (one id, two idempotency keys) links neither action to the other; a
    job id with one key each still links its records."""
    at = datetime(2026, 12, 7, tzinfo=UTC)
    table = pl.DataFrame({
        "ts": [at] * 5,
        "job_id": ["batch-1", "batch-1", "batch-1", "job-2", "job-2"],
        "idempotency_key": [None, "reminder:a", "reminder:b", "reminder:c", None],
    })
    linked, actions, warnings = build_actions(table, ("job_id", "idempotency_key"))
    ids = linked["action_id"].to_list()
    assert ids[0] is None and ids[1] != ids[2] and ids[3] == ids[4]
    assert actions.height == 3
    (warning,) = warnings
    assert warning.batch and warning.jobs == 1 and "batch" in warning.text()

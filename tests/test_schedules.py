"""Scheduled sends two schedulers made at once (dupfind.schedules, DF108): which sends pair up, and
what a duplicate's cause says when the entries do not name the action."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from conftest import FIXTURES
from truth_compare import analyze_logs, cited_lines, duplicates_with_their_actions, truth_of

from dupfind.schedules import HALF_PERIOD_CAP_S, SINGLE_SEND_WINDOW_S, doubled_sends, scheduler_pairs

T0 = datetime(2026, 12, 7, 1, 58, 30, tzinfo=UTC)
NAIVE = FIXTURES / "real" / "celery_redis_beat_overlap_double_schedule"


def _sends(*series: tuple[str, str, list[float]]) -> pl.DataFrame:
    """Sends of (publisher, entry, offsets in seconds from T0)."""
    rows = [
        (publisher, entry, T0 + timedelta(seconds=offset))
        for publisher, entry, offsets in series for offset in offsets
    ]
    frame = pl.DataFrame(
        {"publisher": [r[0] for r in rows], "entry": [r[1] for r in rows], "ts": [r[2] for r in rows]},
        schema={"publisher": pl.String, "entry": pl.String, "ts": pl.Datetime("us", "UTC")},
    )
    return frame.with_row_index("rid").with_columns(
        pl.col("rid").cast(pl.Int64), job_type=pl.lit("notify.send_reminder"), source=pl.col("publisher"),
        line=pl.col("rid").cast(pl.UInt32) + 1,
    ).sort("ts", "rid")


def _pairs(*series) -> pl.DataFrame:
    return scheduler_pairs(doubled_sends(_sends(*series)))


def test_two_schedulers_in_step_pair_each_tick_they_both_sent():
    pairs = _pairs(("beat-v1", "r-1", [0, 5, 10, 15, 20]), ("beat-v2", "r-1", [10.02, 15.01, 20.03, 25, 30]))
    assert pairs.height == 3
    assert pairs["publisher_a"].unique().to_list() == ["beat-v1"]
    assert (pairs["ts_b"] - pairs["ts_a"]).dt.total_milliseconds().to_list() == [20, 10, 30]


def test_schedulers_out_of_step_pair_within_half_the_period():
    pairs = _pairs(("beat-v1", "r-1", [0, 5, 10, 15, 20]), ("beat-v2", "r-1", [7.4, 12.4, 17.4]))
    assert pairs.height == 3
    assert ((pairs["ts_b"] - pairs["ts_a"]).dt.total_milliseconds().abs() <= 2600).all()


def test_a_handover_sends_nothing_twice():
    assert _pairs(("beat-v1", "r-1", [0, 5, 10]), ("beat-v2", "r-1", [15, 20, 25])).is_empty()
    # the new scheduler's first send a little early (it started late in a period) is still a period's own
    assert _pairs(("beat-v1", "r-1", [0, 5, 10]), ("beat-v2", "r-1", [12.6, 17.6])).is_empty()


def test_one_scheduler_sending_twice_or_two_schedulers_with_other_entries_stay_quiet():
    assert _pairs(("beat-v1", "r-1", [0, 0.5, 5, 10])).is_empty()
    assert _pairs(("beat-v1", "r-1", [0, 5, 10]), ("beat-v2", "r-2", [0, 5, 10])).is_empty()


def test_entries_sent_once_each_pair_only_within_the_single_send_window():
    assert _pairs(("beat-v1", "nightly", [0]), ("beat-v2", "nightly", [SINGLE_SEND_WINDOW_S - 0.5])).height == 1
    assert _pairs(("beat-v1", "nightly", [0]), ("beat-v2", "nightly", [SINGLE_SEND_WINDOW_S + 1])).is_empty()


def test_a_long_period_pairs_within_its_cap_only():
    hourly = [0, 3600, 7200]
    assert _pairs(("beat-v1", "hourly", hourly), ("beat-v2", "hourly", [7200.2])).height == 1
    assert _pairs(("beat-v1", "hourly", hourly), ("beat-v2", "hourly", [7200 + HALF_PERIOD_CAP_S + 60])).is_empty()


def test_three_schedulers_pair_each_with_its_nearest_other():
    pairs = _pairs(("a", "r-1", [0, 5]), ("b", "r-1", [0.01, 5.01]), ("c", "r-1", [0.02, 5.02]))
    assert set(zip(pairs["publisher_a"], pairs["publisher_b"])) <= {("a", "b"), ("b", "c"), ("a", "c")}
    assert set(pairs["rid_a"].to_list()) | set(pairs["rid_b"].to_list()) == set(range(6))


def test_entries_that_do_not_name_the_action_leave_the_cause_likely_and_say_so(tmp_path: Path):
    logs = tmp_path / "logs"
    shutil.copytree(NAIVE / "logs", logs)
    for beat in logs.glob("celery-beat-*.log"):
        beat.write_text(beat.read_text().replace("Sending due task reminder-ord_", "Sending due task slot-"))
    report = analyze_logs(logs)
    duplicates = [f for f in report.findings if f.rule == "DF101"]
    counters = truth_of(NAIVE)["counters"]
    assert len(duplicates) == counters["duplicated_actions"]
    for finding in duplicates:
        assert (finding.cause, finding.confidence) == ("double_publish", "likely")
        assert "do not say which entry" in finding.cause_detail
        assert [e.source.rsplit("/", 1)[-1].startswith("celery-beat-") for e in finding.evidence if e.kind == "publish"] == [True, True]


def test_the_schedulers_logs_alone_still_show_the_overlap(tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for beat in (NAIVE / "logs").glob("celery-beat-*.log"):
        shutil.copy(beat, logs / beat.name)
    report = analyze_logs(logs)
    (overlap,) = [f for f in report.findings if f.rule == "DF108"]
    assert overlap.severity == "medium"
    assert overlap.figures["actions_run_twice"] == 0
    assert "not in these logs" in overlap.summary
    assert report.verdict != "harmful_duplicates"


def _replica_logs(folder: Path, scheduler_lines: bool) -> None:
    """Two replicas each running one in-process job for order ord_1 20 ms apart: no message, no
    receive; with or without APScheduler's `Running job` line before each run."""
    running = ('Running job "send_reminders (trigger: interval[0:00:05], next run at: 2026-12-07 05:00:05 UTC)" '
               '(scheduled at 2026-12-07 05:00:00+00:00)')
    for n, (replica, at) in enumerate([("app-1", 0), ("app-2", 20)]):
        def ts(ms: int, at: int = at) -> str:
            return f"2026-12-07T05:00:00.{at + ms:03d}Z"
        ids = {"worker_id": replica, "pid": 100 + n, "order_id": "ord_1", "idempotency_key": "reminder:ord_1:20261207T050000Z"}
        rows = [{"ts": ts(1), "logger": "apscheduler.executors.default", "worker_id": replica, "message": running}] if scheduler_lines else []
        rows += [
            {"ts": ts(2), "event": "job_started", **ids},
            {"ts": ts(3), "event": "provider_request", "side_effect": "email", **ids},
            {"ts": ts(300), "event": "provider_response", "side_effect": "email", "status_code": 200, **ids},
            {"ts": ts(400), "event": "db_update", "status": "sent", **ids},
            {"ts": ts(401), "event": "job_finished", **ids},
        ]
        (folder / f"{replica}.ndjson").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_runs_that_name_no_message_are_at_most_a_possible_lease_expiry(tmp_path: Path):
    """Without the schedulers' lines, two runs that name no message and log no receive may be a
    queue's whose ids the logs leave out, or no queue's: a lease expiry only possible, said so."""
    _replica_logs(tmp_path, scheduler_lines=False)
    report = analyze_logs(tmp_path)
    (duplicate,) = [f for f in report.findings if f.rule == "DF101"]
    assert (duplicate.cause, duplicate.confidence) == ("lease_expired", "possible")
    assert "if no queue delivered them" in duplicate.cause_detail


def test_two_replicas_schedulers_are_the_cause_of_their_runs(tmp_path: Path):
    _replica_logs(tmp_path, scheduler_lines=True)
    report = analyze_logs(tmp_path)
    (duplicate,) = [f for f in report.findings if f.rule == "DF101"]
    assert (duplicate.cause, duplicate.confidence) == ("double_publish", "certain")
    assert "app-1 sent send_reminders" in duplicate.cause_detail and "no queue between" in duplicate.cause_detail
    (overlap,) = [f for f in report.findings if f.rule == "DF108"]
    assert sorted(overlap.workers) == ["app-1", "app-2"] and overlap.figures["actions_repeated"] == 1


APSCHEDULER = FIXTURES / "real" / "apscheduler_replicas_double_run"


def test_each_reminder_two_replicas_sent_cites_both_running_job_lines():
    """The recording (APScheduler 3.11 in two replicas): each duplicate's cause is the two
    replicas' schedulers, and the two `Running job` lines it cites are its occurrence's."""
    for finding, action in duplicates_with_their_actions(APSCHEDULER):
        runs = action["runs"]
        assert cited_lines(finding) == {(r["running_job_line"]["file"], r["running_job_line"]["line"]) for r in runs}
        assert "no queue between" in finding.cause_detail

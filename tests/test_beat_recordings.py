"""The recorded overlap of two `celery beat` schedulers (fixtures/real/celery_redis_beat_overlap_*):
beat's `Sending due task` lines are publishes of a schedule entry, the two beats' sends of one
entry for one due time are DF108's, and a reminder both beats published and both runs sent is a
double publish shown by those two lines (beat names no task id: they are told by entry and time)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES
from truth_compare import analyze_logs, cited_lines, duplicates_with_their_actions, truth_of

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings

NAIVE = FIXTURES / "real" / "celery_redis_beat_overlap_double_schedule"
CONTROL = FIXTURES / "real" / "celery_redis_beat_overlap_guarded_control"
OFFSET = FIXTURES / "real" / "celery_redis_beat_offset_double_schedule"  # v2's ticks 2.4 s after v1's
HANDOVER = FIXTURES / "real" / "celery_redis_beat_handover_control"  # v1 gone before v2 started
CONFIG = load_config(cwd=Path("/"))


def _counters(folder: Path) -> dict:
    return truth_of(folder)["counters"]


def test_beats_sending_due_task_lines_are_publishes():
    table = as_strings(ingest([str(NAIVE / "logs")], CONFIG).text_table())
    beats = table.filter(pl.col("source").str.contains("celery-beat-"))
    published = beats.filter(pl.col("kind") == "publish")
    assert published.height == sum(_counters(NAIVE)["sending_due_task_lines"].values())
    assert set(published["job_type"].to_list()) == {"notify.send_reminder"}
    entries = {e["name"] for e in truth_of(NAIVE)["params"]["beat"]["entries"]}
    assert set(published["object_name"].to_list()) == entries


def test_both_beats_publishes_sent_twice_are_double_publishes_not_lease_expiries():
    report = analyze_logs(NAIVE / "logs")
    duplicates = [f for f in report.findings if f.rule == "DF101"]
    assert len(duplicates) == _counters(NAIVE)["duplicated_actions"]
    assert {(f.cause, f.confidence) for f in duplicates} == {("double_publish", "certain")}
    assert not [f for f in report.findings if f.rule == "DF103"]  # no message came back


def _beat_lines(action: dict) -> set[tuple[str, int]]:
    return {(p["beat_log_line"]["file"], p["beat_log_line"]["line"]) for p in action["beat_publishes"]}


@pytest.mark.parametrize("folder", [NAIVE, OFFSET], ids=["in_step", "offset"])
def test_each_reminder_sent_twice_cites_both_beats_lines_that_published_it(folder: Path):
    for finding, action in duplicates_with_their_actions(folder):
        assert len(action["beat_publishes"]) == 2
        assert cited_lines(finding) == _beat_lines(action), finding.cause_detail
        assert action["schedule_entry"] in finding.cause_detail


@pytest.mark.parametrize("folder", [NAIVE, OFFSET], ids=["in_step", "offset"])
def test_the_two_beats_overlap_is_one_finding_that_counts_what_truth_counts(folder: Path):
    truth = truth_of(folder)
    report = analyze_logs(folder / "logs")
    (overlap,) = [f for f in report.findings if f.rule == "DF108"]
    counters = truth["counters"]
    assert sorted(overlap.workers) == sorted(b["instance"] for b in truth["beats"])
    assert overlap.figures["doubled_sends"] == counters["ticks_by_both_beats"] * counters["schedule_entries"]
    assert overlap.figures["actions_run_twice"] == counters["double_published_actions"]
    assert overlap.figures["actions_repeated"] == counters["double_published_sent_twice"] == counters["duplicated_actions"]
    # the overlap's lines: the second beat's start and the first one's stop signal (deploy.ndjson)
    notes = {(Path(e.source).name, e.line): e.note for e in overlap.evidence}
    assert "scheduler celery-beat-v2 started" in notes.values()
    assert "scheduler celery-beat-v1 stop signal" in notes.values()
    doubled = {line for a in truth["actions"] if a["published_by_both_beats"] for line in _beat_lines(a)}
    assert {k for k, note in notes.items() if note == "sent by both schedulers"} <= doubled


def test_the_claim_first_task_keeps_both_beats_publishes_harmless():
    report = analyze_logs(CONTROL / "logs")
    assert report.verdict == "no_harmful_duplicates"
    assert len([f for f in report.findings if f.rule == "DF106"]) == _counters(CONTROL)["double_published_actions"]
    assert not [f for f in report.findings if f.rule == "DF103"]
    # Where the task received first began its work last, the claim stopped the earlier one.
    concurrent = [f for f in report.findings if f.rule == "DF102"]
    assert concurrent and {f.severity for f in concurrent} == {"low"}
    (overlap,) = [f for f in report.findings if f.rule == "DF108"]
    assert overlap.severity == "low" and not overlap.harmful
    assert overlap.figures["actions_run_twice"] == _counters(CONTROL)["double_published_actions"]
    assert overlap.figures["actions_repeated"] == 0


def test_a_status_check_that_stopped_late_repeats_is_not_credited_alone():
    """The naive task's status read stopped the reminders whose second task started after the
    first wrote `sent`; it let the concurrent ones through: DF106 says so, the claim's does not."""
    report = analyze_logs(NAIVE / "logs")
    stopped = [f for f in report.findings if f.rule == "DF106"]
    assert len(stopped) == _counters(NAIVE)["noop_already_sent"]
    for finding in stopped:
        assert finding.figures["repeated_same_job_type"] == _counters(NAIVE)["duplicated_actions"]
        assert "does not stop every repeat" in finding.summary
    control = analyze_logs(CONTROL / "logs")
    assert not [f for f in control.findings if f.rule == "DF106" and "repeated_same_job_type" in f.figures]


def test_a_beat_replaced_after_it_stopped_sends_nothing_twice():
    truth = truth_of(HANDOVER)
    report = analyze_logs(HANDOVER / "logs")
    assert len(truth["beats"]) == 2 and truth["counters"]["double_published_actions"] == 0
    assert not [f for f in report.findings if f.rule in ("DF101", "DF105", "DF108")]

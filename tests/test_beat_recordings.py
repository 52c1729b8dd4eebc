"""The recorded overlap of two `celery beat` schedulers (fixtures/real/celery_redis_beat_overlap_*):
beat's `Sending due task` lines are publishes, and the reminders both beats published and both
runs sent are double publishes, told by the two runs' different task ids (beat names none)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from conftest import FIXTURES

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.schema import as_strings

NAIVE = FIXTURES / "real" / "celery_redis_beat_overlap_double_schedule"
CONTROL = FIXTURES / "real" / "celery_redis_beat_overlap_guarded_control"
CONFIG = load_config(cwd=Path("/"))


def _counters(folder: Path) -> dict:
    return json.loads((folder / "truth.json").read_text())["counters"]


def test_beats_sending_due_task_lines_are_publishes():
    table = as_strings(ingest([str(NAIVE / "logs")], CONFIG).text_table())
    beats = table.filter(pl.col("source").str.contains("celery-beat-"))
    published = beats.filter(pl.col("kind") == "publish")
    assert published.height == sum(_counters(NAIVE)["sending_due_task_lines"].values())
    assert set(published["job_type"].to_list()) == {"notify.send_reminder"}


def test_both_beats_publishes_sent_twice_are_double_publishes_not_lease_expiries():
    report = analyze(ingest([str(NAIVE / "logs")], CONFIG), CONFIG, load_rules(CONFIG))
    duplicates = [f for f in report.findings if f.rule == "DF101"]
    assert len(duplicates) == _counters(NAIVE)["duplicated_actions"]
    assert {(f.cause, f.confidence) for f in duplicates} == {("double_publish", "likely")}
    assert not [f for f in report.findings if f.rule == "DF103"]  # no message came back


def test_the_claim_first_task_keeps_both_beats_publishes_harmless():
    report = analyze(ingest([str(CONTROL / "logs")], CONFIG), CONFIG, load_rules(CONFIG))
    assert report.verdict == "no_harmful_duplicates"
    assert len([f for f in report.findings if f.rule == "DF106"]) == _counters(CONTROL)["double_published_actions"]
    assert not [f for f in report.findings if f.rule == "DF103"]

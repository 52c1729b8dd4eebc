"""The recorded application locks (fixtures/real/celery_redis_lock_*): an atomic lock that denies
the second comer is a guard that worked; a GET-then-SET lock both take is the cause, and the
double publish that brought the second message is said with it. Two Celery nodes of one host
(`worker1@rec`, `worker2@rec`) read one clock: their overlaps are certain, not within a skew."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
from conftest import FIXTURES
from truth_compare import analyze_logs, truth_of

from dupfind.analysis import other_hosts

CONTROL = FIXTURES / "real" / "celery_redis_lock_atomic_control"
RACE = FIXTURES / "real" / "celery_redis_lock_get_then_set_race"


def _counters(folder: Path) -> dict:
    return truth_of(folder)["counters"]


def test_an_atomic_lock_that_denies_the_second_comer_is_a_guard_that_worked():
    report = analyze_logs(CONTROL / "logs")
    counters = _counters(CONTROL)
    assert report.verdict == "no_harmful_duplicates"
    guards = [f for f in report.findings if f.rule == "DF106"]
    assert len(guards) == counters["double_published_denied"]
    for finding in guards:
        cited = [ev for ev in finding.evidence if ev.note == "guard"]
        assert cited and all(ev.kind == "lock_denied" for ev in cited), finding.summary
    concurrent = [f for f in report.findings if f.rule == "DF102"]
    assert concurrent and {f.severity for f in concurrent} == {"low"}
    assert all("stopped by a guard" in f.summary for f in concurrent)
    assert not [f for f in report.findings if f.rule in ("DF104", "DF301", "DF302", "DF303")]


def test_a_lock_taken_after_its_denial_is_no_guard(tmp_path):
    """A blocking lock logs its denial, then takes the lock: that run was not stopped. The first
    denied run of the control rewritten so: its guard is gone, the others stay."""
    logs = tmp_path / "logs"
    shutil.copytree(CONTROL / "logs", logs)
    path = logs / "app-worker2.ndjson"
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"event":"lock_denied"' in line)
    denied = json.loads(lines[at])
    ts = denied["ts"][:-2] + "9Z"  # 8 us later, within the same run
    taken = {**denied, "ts": ts, "level": "info", "event": "lock_acquired", "msg": "lock acquired after waiting"}
    lines.insert(at + 1, json.dumps(taken, separators=(",", ":")) + "\n")
    path.write_text("".join(lines))
    report = analyze_logs(logs)
    guards = [f for f in report.findings if f.rule == "DF106"]
    assert len(guards) == _counters(CONTROL)["double_published_denied"] - 1
    assert denied["job_id"] not in {job for f in guards for job in f.ids.get("job_id", [])}


def test_a_get_then_set_lock_both_took_is_the_cause_with_the_double_publish_said():
    report = analyze_logs(RACE / "logs")
    counters = _counters(RACE)
    duplicates = [f for f in report.findings if f.rule == "DF101"]
    assert len(duplicates) == counters["duplicated_actions"] == counters["lock_races"]
    for finding in duplicates:
        assert (finding.cause, finding.confidence) == ("lock_overlap", "certain")
        assert "published 2 times" in finding.cause_detail, finding.cause_detail
    holders = [f for f in report.findings if f.rule == "DF301"]
    assert len(holders) == counters["lock_races"]
    assert {f.confidence for f in holders} == {"certain"}  # one host's clock: no skew to allow for


def test_two_nodes_of_one_host_read_one_clock():
    frame = pl.DataFrame({
        "a": ["worker1@rec", "celery@pod-a", "w1", "worker1@rec", "w1"],
        "b": ["worker2@rec", "celery@pod-b", "w2", "rec", "w1"],
    })
    assert frame.select(other_hosts("a", "b")).to_series().to_list() == [False, True, True, False, False]

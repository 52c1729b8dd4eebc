"""Delayed::Job's worker lines in Ruby's Logger (preset ruby-logger), read from the recordings
fixtures/real/rails_delayed_job_* (Rails 6.1 ActiveJob on Delayed::Job 4.1.9, workers SIGKILLed by a
rollout after their job's e-mail, the stale-locked rows run again after max_run_time) and from lines
of a Delayed::Job without ActiveJob, in the shapes its worker writes them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES
from truth_compare import analyze_logs

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings

HARMFUL = FIXTURES / "real" / "rails_delayed_job_sigkill_stale_lock"
CONTROL = FIXTURES / "real" / "rails_delayed_job_sigkill_stale_lock_guarded_control"
CONFIG = load_config(cwd=Path("/"))


def _records(path: Path) -> pl.DataFrame:
    result = ingest([str(path)], CONFIG)
    return as_strings(result.texts.decoded(result.table) if result.texts is not None else result.table)


def _truth(folder: Path) -> dict:
    return json.loads((folder / "truth.json").read_text())


@pytest.mark.parametrize("folder", [HARMFUL, CONTROL], ids=lambda p: p.name)
def test_each_attempts_lines_are_its_lifecycle_under_activejobs_job_id(folder: Path):
    """RUNNING (the row locked: a receive), ActiveJob's Performing, the e-mail, COMPLETED (the row
    deleted: the ack), as the recording's truth places them; the worker's start and `Exiting...`."""
    records = _records(folder / "logs")
    at = {(Path(s).name, n): row for s, n, row in zip(records["source"], records["line"], records.iter_rows(named=True))}
    checked = 0
    for action in _truth(folder)["actions"]:
        for run in action["runs"]:
            for key, kind in (("running_line", "receive"), ("performing_line", "start"),
                              ("delivered_line", "side_effect"), ("completed_line", "ack")):
                where = run[key]
                if where is None:
                    continue
                row = at[(where["file"], where["line"])]
                assert (row["kind"], row["job_id"]) == (kind, run["job_id"]), (where, row["kind"], row["job_id"])
                checked += 1
            if run["running_line"] is not None:
                row = at[(run["running_line"]["file"], run["running_line"]["line"])]
                assert (row["job_type"], row["queue"], row["process_id"]) == ("OrderConfirmationJob", "default",
                                                                               str(run["execution"].split("/")[1]))
    assert checked >= 3 * 20
    counters = _truth(folder)["counters"]
    kinds = records.filter(pl.col("format") == "ruby-logger")["kind"].value_counts()
    count = dict(kinds.iter_rows())
    assert count["worker_start"] == counters["starting_job_worker_lines"]
    assert count["stop_signal"] == counters["exiting_lines"]
    assert count["receive"] == counters["running_lines"] and count["ack"] == counters["completed_lines"]


def test_a_worker_killed_after_its_email_is_the_cause_and_its_exiting_line_the_evidence():
    report = analyze_logs(HARMFUL / "logs")
    truth = _truth(HARMFUL)
    kills = {k["job_id"]: k for k in truth["kills"]}
    duplicated = {f.ids["job_id"][0]: f for f in report.findings if f.rule == "DF101" and f.harmful}
    assert set(duplicated) == {a["ids"]["job_id"][0] for a in truth["actions"] if a["duplicated"]} == set(kills)
    for job_id, finding in duplicated.items():
        kill = kills[job_id]
        exiting = kill["exiting_line"]
        # No log holds the SIGKILL: the worker went silent after its stop signal.
        assert (finding.cause, finding.confidence) == ("worker_killed", "likely"), finding.cause_detail
        assert finding.cause_detail.startswith(f"{kill['process']} went silent after its stop signal")
        # on the new release's worker, once the dead worker's lock was older than max_run_time
        # (15 s): from its stop signal, the last line, to the rerun's RUNNING
        assert f"later on {kill['rerun_process']}" in finding.cause_detail
        back = datetime.fromisoformat(kill["rerun_running_line"]["ts"]) - datetime.fromisoformat(exiting["ts"])
        assert finding.figures["requeued_after_s"] == pytest.approx(back.total_seconds(), abs=0.001)
        assert kill["rerun_lock_age_s"] >= 15.0
        assert any(ev.source.endswith(exiting["file"]) and ev.line == exiting["line"] and ev.kind == "stop_signal"
                   for ev in finding.evidence)
    # Each killed worker held one job in flight, its e-mail sent; its grace (3 s) cut it short.
    cut = {f.ids["worker_id"][0]: f for f in report.findings if f.rule == "DF203"}
    assert set(cut) == {k["process"] for k in truth["kills"]}
    assert all(f.figures["in_flight"] == 1 and f.figures["side_effect_done"] == 1 for f in cut.values())
    assert len([f for f in report.findings if f.rule == "DF204"]) == len(truth["kills"])


def test_the_guarded_reruns_are_guards_that_worked():
    report = analyze_logs(CONTROL / "logs")
    truth = _truth(CONTROL)
    assert report.verdict == "no_harmful_duplicates"
    guards = {f.ids["job_id"][0] for f in report.findings if f.rule == "DF106"}
    assert guards == {k["job_id"] for k in truth["kills"]}
    assert report.summary["actions"] == len(truth["actions"])


LINES = """\
I, [2026-12-07T10:00:00.101234 #4242]  INFO -- : 2026-12-07T10:00:00+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Starting job worker
I, [2026-12-07T10:00:05.200100 #4242]  INFO -- : 2026-12-07T10:00:05+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Job Notifier#deliver_receipt (id=812) (queue=mailers) RUNNING
E, [2026-12-07T10:00:07.210456 #4242] ERROR -- : 2026-12-07T10:00:07+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Job Notifier#deliver_receipt (id=812) (queue=mailers) FAILED (0 prior attempts) with Net::ReadTimeout: Net::ReadTimeout with #<TCPSocket:(closed)>
I, [2026-12-07T10:00:12.300777 #4242]  INFO -- : 2026-12-07T10:00:12+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Job Notifier#deliver_receipt (id=812) (queue=mailers) RUNNING
I, [2026-12-07T10:00:13.112000 #4242]  INFO -- : 2026-12-07T10:00:13+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Job Notifier#deliver_receipt (id=812) (queue=mailers) COMPLETED after 0.8112
I, [2026-12-07T10:00:14.000001 #4242]  INFO -- : 2026-12-07T10:00:14+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Job ImportJob (id=813) RUNNING
E, [2026-12-07T10:00:14.500002 #4242] ERROR -- : 2026-12-07T10:00:14+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Job ImportJob (id=813) FAILED permanently because of 25 consecutive failures
I, [2026-12-07T10:00:20.000000 #4242]  INFO -- : 2026-12-07T10:00:20+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] 2 jobs processed at 0.3170 j/s, 1 failed
I, [2026-12-07T10:00:21.000000 #4242]  INFO -- : 2026-12-07T10:00:21+0000: [Worker(delayed_job.0 host:web-1 pid:4242)] Exiting...
"""


def test_a_delayed_job_without_activejob_is_named_by_its_row(tmp_path: Path):
    """Without ActiveJob the job's name is its payload's (`Notifier#deliver_receipt`) and the row's id
    the job's: its two attempts are one job, FAILED a failure, FAILED permanently its last."""
    log = tmp_path / "delayed_job.log"
    log.write_text(LINES)
    records = _records(log).sort("line")
    assert records.height == LINES.count("\n")
    got = [(r["kind"], r["job_id"], r["job_type"]) for r in records.iter_rows(named=True)]
    assert got == [
        ("worker_start", None, None),
        ("receive", "812", "Notifier#deliver_receipt"),
        ("fail", "812", "Notifier#deliver_receipt"),
        ("receive", "812", "Notifier#deliver_receipt"),
        ("ack", "812", "Notifier#deliver_receipt"),
        ("receive", "813", "ImportJob"),
        ("fail", "813", "ImportJob"),
        ("other", None, None),
        ("stop_signal", None, None),
    ]
    failed = records.row(2, named=True)
    assert failed["error"].startswith("Net::ReadTimeout: Net::ReadTimeout") and failed["queue"] is None
    assert records.row(1, named=True)["queue"] == "mailers" and records["process_id"].unique().to_list() == ["4242"]
    assert records.row(6, named=True)["name"] == "retries_exceeded"

"""A queue framework's own log, with nothing from the application: executions, but no proven harm."""

from __future__ import annotations

import json

from dupfind.analyze import analyze
from dupfind.ingest import ingest

from conftest import FIXTURES
from truth_compare import CONFIG, RULES

RECORDING = FIXTURES / "real" / "celery_redis_visibility_timeout"


def test_celery_worker_logs_alone_report_possible_harm_and_what_would_settle_it():
    logs = sorted(str(p) for p in (RECORDING / "logs").glob("celery-worker*.log"))
    assert len(logs) == 2
    report = analyze(ingest(logs, CONFIG), CONFIG, RULES)
    truth = json.loads((RECORDING / "truth.json").read_text())

    # Celery's received / succeeded lines become executions on the nodes that logged them.
    assert report.summary["executions"] >= len(truth["actions"])
    assert set(report.context.executions["worker_id"].to_list()) == {"worker1@rec", "worker2@rec"}

    # No side effect is logged, so nothing is a certain duplicate: the verdict says so and names the fix.
    assert report.verdict == "insufficient_evidence"
    assert not report.harmful
    assert "log each provider request" in report.verdict_reason
    possible = [f for f in report.findings if f.rule == "DF101"]
    assert possible and all(f.confidence == "possible" and not f.harmful for f in possible)
    assert all("no side-effect records were logged" in f.summary for f in possible)

    # Every action the sink saw twice is among the possible repeats.
    flagged = {job for f in possible for job in f.ids.get("job_id", [])}
    duplicated = {a["ids"]["job_id"][0] for a in truth["actions"] if a["duplicated"]}
    assert duplicated and duplicated <= flagged


def test_framework_and_application_logs_together_count_each_run_once():
    """Celery's lines and the application's lines of one worker describe the same runs."""
    logs = str(RECORDING / "logs")
    both = analyze(ingest([logs], CONFIG), CONFIG, RULES)
    app_only = [str(p) for p in (RECORDING / "logs").iterdir() if not p.name.startswith("celery-")]
    without = analyze(ingest(app_only, CONFIG), CONFIG, RULES)
    assert both.summary["executions"] == without.summary["executions"]
    assert sorted(f.fingerprint for f in both.harmful) == sorted(f.fingerprint for f in without.harmful)


def test_colour_codes_in_framework_logs_never_reach_the_terminal(cli):
    logs = FIXTURES / "formats" / "sidekiq" / "logs"
    assert b"\x1b[" in (logs / "sidekiq-7.log").read_bytes()
    for args in (("formats", str(logs)), ("analyze", str(logs)), ("analyze", "--format", "json", str(logs))):
        result = cli(*args, env={"COLUMNS": "200"})
        assert result.returncode == 0, result.stderr
        assert b"\x1b" not in result.stdout and b"\x1b" not in result.stderr

"""`dupfind stats`: counters agree with the simulator's answer key, durations with its true run times,
the timeline adds up, the advisor's counterfactual holds, and the command line behaves."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import orjson
import polars as pl
import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.queue_stats import StatsReport, bucket_size, build_stats
from dupfind.rules_registry import load_rules
from dupfind.synth import PRESETS, write_scenario

from conftest import FIXTURES

CONFIG = load_config(cwd=Path("/"))
SYNTH = sorted(p for p in (FIXTURES / "synth").iterdir() if (p / "truth.json").is_file())
VT = FIXTURES / "synth" / "visibility-timeout"


def _stats(logs: Path, timeouts: dict[str, float] | None = None) -> StatsReport:
    return build_stats(analyze(ingest([str(logs)], CONFIG), CONFIG, load_rules(CONFIG), timeouts=timeouts))


def _totals(rows: list[dict]) -> Counter:
    totals: Counter = Counter()
    for row in rows:
        totals.update({k: v for k, v in row.items() if isinstance(v, int) and not isinstance(v, bool)})
    return totals


def _truth_counts(truth: dict) -> dict[str, int]:
    executions = [e for a in truth["actions"] for e in a["executions"]]
    because = Counter(e["received_because"] for e in executions)
    failed = Counter(e["outcome"] for e in executions)
    c = truth["counters"]
    return {
        "published": c["publishes"],
        "received": c["executions"],
        "retried": c["retries"],
        "redelivered": because["lease_expired"] + because["worker_killed"],
        "dead_lettered": c["dead_lettered"],
        "duplicate_side_effects": c["extra_side_effects"],
        "failed": failed["provider_error"] + failed["provider_timeout"] + failed["db_update_failed"],
    }


@pytest.mark.parametrize("folder", SYNTH, ids=[p.name for p in SYNTH])
def test_counters_equal_the_answer_key(folder: Path):
    truth = orjson.loads((folder / "truth.json").read_bytes())
    report = _stats(folder / "logs")
    totals = _totals(report.queues)
    for name, expected in _truth_counts(truth).items():
        assert totals[name] == expected, (name, totals[name], expected)
    # Per deployment the same executions are counted once each.
    per_deploy = _totals(report.deployments)
    for name in ("received", "started", "finished", "failed", "retried", "redelivered", "duplicate_side_effects"):
        assert per_deploy[name] == totals[name], name


REAL = sorted(p for p in (FIXTURES / "real").iterdir() if (p / "truth.json").is_file())


@pytest.mark.parametrize("folder", REAL, ids=[p.name for p in REAL])
def test_real_recordings_count_each_run_once(folder: Path):
    # Celery's own lines and the app's lines tell the same runs: receives and redeliveries count once.
    # Sidekiq logs no receive: a job's start is its delivery.
    truth = orjson.loads((folder / "truth.json").read_bytes())
    counters = truth["counters"]
    report = _stats(folder / "logs")
    totals = _totals(report.queues)
    if not truth["software"].get("broker"):
        # No queue (a scheduler in each replica runs the job in its own process): nothing received,
        # nothing delivered again.
        assert totals.get("received", 0) == 0 and totals.get("redelivered", 0) == 0
        return
    # A node killed on RabbitMQ (Dramatiq) held messages its consumer had taken (`Pushing message
    # ... onto work queue`) and no thread had begun: each a delivery, and no run.
    held = counters.get("prefetched_unstarted_at_kill", 0) if truth.get("node_kills") else 0
    # Tasks that each send several actions' side effects (Huey's periodic task for every unpaid
    # order): the queue carries, and its consumers receive and start, the tasks.
    runs = counters.get("tasks", counters["executions"])
    assert totals["received"] == runs + held
    assert totals["started"] == runs
    assert sum(b["received"] for b in report.timeline["buckets"]) == runs + held
    handed_back = {  # the framework handed its jobs back: asked for, not a lease that ran out
        "worker_kills": ("retried", "job_rejected"),  # Celery's reject with requeue of a killed child's task
        "shutdowns": ("failed", "pushed_back_jobs"),  # Sidekiq's `fail` of the jobs it pushes back
        "job_timeouts": ("retried", "retries_enqueued"),  # RQ's retry of a job its timeout ended
        "horse_kills": ("retried", "retries_enqueued"),  # RQ's retry of a job whose work-horse was killed
    }
    if truth.get("node_kills"):
        # A whole node killed on RabbitMQ (Dramatiq): the broker took back what its connection held.
        # The runs the kill cut and the messages prefetched there came again, redeliveries all.
        assert totals["redelivered"] == counters["redeliveries"]
        return
    asked = [counted for key, counted in handed_back.items() if truth.get(key)]
    if counters.get("retrying_lines"):  # ActiveJob's retry_on (Rails): the job asked for its retries
        asked.append(("retried", "retrying_lines"))
    if asked:
        assert totals["redelivered"] == 0
        for column, counter in asked:
            assert totals[column] == counters[counter], (column, counter)
        return
    assert totals["redelivered"] == counters["redeliveries"]
    for finding in (f for f in report.findings if f.rule == "DF401"):
        assert finding.figures["redeliveries"] == counters["redeliveries"]


def test_dead_letters_and_retries_counted(tmp_path: Path):
    params = replace(
        PRESETS["db-update-fails"].params, provider_error_rate=0.5, max_attempts=2, backoff_base_s=0.5, jobs=40
    )
    truth = write_scenario("db-update-fails", tmp_path, seed=3, params=params)
    assert truth["counters"]["dead_lettered"] > 0
    totals = _totals(_stats(tmp_path / "logs").queues)
    for name, expected in _truth_counts(truth).items():
        assert totals[name] == expected, name


def test_lost_is_what_analyze_calls_lost():
    report = _stats(FIXTURES / "scenarios" / "lost-actions" / "logs")
    lost = [f for f in report.analysis.findings if f.rule == "DF107"]
    assert len(lost) == 2 and _totals(report.queues)["lost"] == 2


def test_durations_match_the_true_run_times():
    truth = orjson.loads((VT / "truth.json").read_bytes())
    true_runs = pl.Series(
        [
            (
                pl.Series([e["end"]]).str.to_datetime() - pl.Series([e["start"]]).str.to_datetime()
            ).dt.total_microseconds()[0]
            / 1e6
            for a in truth["actions"]
            for e in a["executions"]
            if e["outcome"] in ("acked", "provider_error")
        ]
    )
    report = _stats(VT / "logs")
    [row] = [r for r in report.timeouts if r["queue"] == "notifications"]
    measured = row["durations"]
    assert measured["n"] == true_runs.len()
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)):
        assert abs(measured[name] - true_runs.quantile(q, "linear")) < 0.5, (
            name
        )  # log clocks are skewed by up to 150 ms
    assert abs(measured["max"] - true_runs.max()) < 0.5
    by_type = {r["job_type"]: r["duration_s"]["n"] for r in report.queues}
    assert sum(by_type.values()) == measured["n"] and len(by_type) == 3


def test_timeline_adds_up_and_marks_the_deploy():
    folder = FIXTURES / "synth" / "deploy-overlap"
    truth = orjson.loads((folder / "truth.json").read_bytes())
    report = _stats(folder / "logs")
    buckets = report.timeline["buckets"]
    totals = _totals(report.queues)
    assert sum(b["published"] for b in buckets) == totals["published"]
    assert sum(b["received"] for b in buckets) == totals["received"]
    assert sum(b["redelivered"] for b in buckets) == totals["redelivered"] > 0
    size = report.timeline["bucket_s"]
    assert len(buckets) <= 31 and all(b["start"] < n["start"] for b, n in zip(buckets, buckets[1:]))
    for deployment in truth["deployments"]:
        started = deployment["started"][:19]
        marked = [b for b in buckets if f"deploy start {deployment['deployment_id']}" in b["deploys"]]
        assert len(marked) == 1
        assert marked[0]["start"][:19] <= started < _plus(marked[0]["start"], size + 1)


def _plus(iso: str, seconds: int) -> str:
    from datetime import datetime, timedelta

    return (datetime.fromisoformat(iso.replace("Z", "+00:00")) + timedelta(seconds=seconds)).strftime(
        "%Y-%m-%dT%H:%M:%S"
    )


def test_bucket_size_is_adaptive_and_bounded():
    from dupfind.errors import DupfindError

    assert bucket_size(150) == 5 and bucket_size(3600) == 120 and bucket_size(86400 * 3) == 10800
    assert bucket_size(3600, 60) == 60
    with pytest.raises(DupfindError):
        bucket_size(86400, 1)


def test_advisor_counterfactual_on_the_logged_durations():
    """The recommended timeout covers p99; every redelivery whose interrupted run finished within it
    is avoided. Checked against the simulator: the interrupted runs' true durations."""
    truth = orjson.loads((VT / "truth.json").read_bytes())
    [advice] = [t for t in _stats(VT / "logs").timeouts if t["queue"] == "notifications"]
    assert advice["timeout_s"] == 30.0 and advice["timeout_source"] == "logged"
    recommended = advice["recommended_s"]
    assert recommended >= advice["durations"]["p99"] and recommended <= 1.5 * advice["durations"]["p99"] + 30
    interrupted = []
    for action in truth["actions"]:
        runs = action["executions"]
        for earlier, later in zip(runs, runs[1:]):
            if later["received_because"] == "lease_expired":
                finished = earlier["outcome"] not in ("killed",)
                took = (
                    pl.Series([earlier["end"]]).str.to_datetime() - pl.Series([earlier["start"]]).str.to_datetime()
                ).dt.total_seconds()[0]
                interrupted.append(finished and took < recommended)
    assert advice["redeliveries"] == len(interrupted) > 0
    assert advice["avoided"] == sum(interrupted)
    assert advice["failover_delay_s"] == recommended - 30.0
    assert any("failover" in sentence for sentence in advice["advice"])


def test_heartbeat_means_no_longer_timeout_advice_and_no_df401(tmp_path_factory):
    base = replace(PRESETS["visibility-timeout"].params, jobs=30)
    for heartbeat in (False, True):
        folder = tmp_path_factory.mktemp(f"hb-{heartbeat}")
        write_scenario("visibility-timeout", folder, seed=4, params=replace(base, heartbeat=heartbeat))
        report = _stats(folder / "logs")
        [advice] = [t for t in report.timeouts if t["queue"] == "notifications"]
        assert advice["durations"]["p95"] >= 30.0  # the same slow jobs either way
        df401 = [f for f in report.findings if f.rule == "DF401"]
        if heartbeat:
            assert advice["lease_extensions"] > 0 and advice["recommended_s"] is None
            assert "extend the lease" in advice["advice"][0] and "not the fix" in advice["advice"][0]
            assert not df401
        else:
            assert advice["lease_extensions"] == 0 and advice["recommended_s"] >= 90
            assert len(df401) == 1 and df401[0].figures["timeout_s"] == 30.0


def test_ack_deadline_extensions_read_as_a_heartbeat():
    logs = FIXTURES / "scenarios" / "ack-deadline-extended" / "logs"
    extensions = sum(p.read_text().count("event=modify_ack_deadline") for p in logs.iterdir())
    [advice] = _stats(logs).timeouts
    assert advice["queue"] == "video-transcode" and (advice["timeout_s"], advice["timeout_source"]) == (60.0, "logged")
    assert advice["durations"]["p95"] > 60.0 and advice["lease_extensions"] == extensions > 0
    assert advice["recommended_s"] is None and "not the fix" in advice["advice"][0]


@pytest.mark.parametrize(
    "folder",
    [VT, FIXTURES / "real" / "celery_redis_visibility_timeout", FIXTURES / "real" / "sqs_moto_guarded_control"],
    ids=lambda p: p.name,
)
def test_df401_fires_where_p95_reaches_the_timeout(folder: Path):
    report = _stats(folder / "logs")
    [finding] = [f for f in report.findings if f.rule == "DF401"]
    figures = finding.figures
    assert figures["duration_p95_s"] >= figures["timeout_s"] and figures["share_at_or_above_timeout"] >= 0.05
    assert finding.evidence and any(e.note == "timeout stated here" for e in finding.evidence)
    assert not finding.harmful


@pytest.mark.parametrize(
    "name", ["baseline", "deploy-overlap", "lock-atomic-control", "double-publish", "db-update-fails"]
)
def test_df401_quiet_where_runs_fit_the_timeout(name: str):
    report = _stats(FIXTURES / "synth" / name / "logs")
    assert not [f for f in report.findings if f.rule == "DF401"]


def test_df401_uses_the_inferred_timeout_when_none_is_stated():
    read = ingest([str(VT / "logs")], CONFIG)
    table = read.table.with_columns(visibility_timeout_s=pl.lit(None, dtype=pl.Float64))
    from dupfind.ingest import IngestResult

    result = IngestResult(table, [], table.clear().select([]), texts=read.texts)
    [finding] = [f for f in analyze(result, CONFIG, load_rules(CONFIG)).findings if f.rule == "DF401"]
    assert finding.figures["timeout_source"] == "inferred" and finding.confidence == "likely"
    assert abs(finding.figures["timeout_s"] - 30.0) <= 1.0


# --- command line -----------------------------------------------------------------------------


def test_json_document(cli):
    proc = cli("stats", str(VT / "logs"), "--format", "json", "--timeout", "notifications=45", "--bucket", "1m")
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "dupfind.stats/1"
    assert {"inputs", "summary", "queues", "deployments", "timeline", "timeouts", "findings"} <= set(doc)
    assert doc["timeline"]["bucket_s"] == 60
    [timeout] = doc["timeouts"]
    assert timeout["timeout_s"] == 45.0 and timeout["timeout_source"] == "configured" and timeout["logged_s"] == 30.0
    assert abs(timeout["inferred"]["estimate_s"] - 30.0) <= 1.0
    row = doc["queues"][0]
    assert set(row["duration_s"]) == {"n", "p50", "p90", "p95", "p99", "max"}
    assert {"queue_wait_s", "oldest_message_age_s", "redelivered", "dead_lettered", "lost"} <= set(row)
    assert {f["rule"] for f in doc["findings"]} == {"DF401"}
    [finding] = doc["findings"]
    assert {"job_id", "event_id", "idempotency_key"} <= set(finding["ids"]) and finding["ids"]["queue"] == [
        "notifications"
    ]
    assert finding["ids"]["job_id"], "the longest executions' jobs are named"


def test_table_report(cli):
    proc = cli("stats", str(FIXTURES / "synth" / "lock-release-no-owner" / "logs"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    for heading in (
        "Per queue and job type",
        "Processing duration",
        "Queue wait",
        "Per deployment",
        "Receives vs publishes",
        "Visibility timeout",
        "lock findings",
    ):
        assert heading in out, heading
    assert "DF302" in out and "DF301" in out and "█" in out


def test_table_cuts_labels_not_numbers():
    """At 100 columns, a queue of long job-type names with five-digit counts: rich narrowed the
    count columns and wrote `92…` for 9214; labels now give way first."""
    from io import StringIO

    from rich.console import Console

    from dupfind.render.stats_report import COUNT_COLUMNS, render_stats_table

    report = _stats(VT / "logs")
    counts = [c for c, _ in COUNT_COLUMNS if c in report.queues[0]]
    logged = {  # a 1M-line export's counts: published, received, started, finished, failed, ...
        "send_delivery_sms": (9214, 9714, 9713, 9214, 330, 330, 170, 0, 0, 0),
        "send_order_confirmation": (55482, 58305, 58304, 55482, 1751, 1751, 1072, 0, 0, 0),
        "send_push_notification": (27475, 28890, 28890, 27475, 885, 885, 530, 0, 0, 0),
    }
    rows = [{**report.queues[0], "queue": "notifications", "job_type": name, **dict(zip(counts, values))}
            for name, values in logged.items()]
    console = Console(file=StringIO(), width=100, color_system=None, highlight=False, soft_wrap=False)
    render_stats_table(replace(report, queues=rows), console)
    section = console.file.getvalue().split("Per queue and job type")[1].split("Processing duration")[0]
    cells = [line.split() for line in section.splitlines() if "notifications" in line or "notificatio…" in line]
    assert [[int(v) for v in cells_of_row[2:]] for cells_of_row in cells] == [[row[c] for c in counts] for row in rows]


def test_terminal_deployment_tables_show_the_most_telling_first():
    """--max-rows N: the N deployments with the most duplicated side effects (then redeliveries)
    in their own order, both per-deployment tables, and a line saying how many are left out."""
    from io import StringIO

    from rich.console import Console

    from dupfind.render.stats_report import render_stats_table

    report = _stats(VT / "logs")
    template = report.deployments[0]
    dups = [0, 7, 1, 7, 0, 3]
    rows = [{**template, "deployment": f"v{i}.0", "duplicate_side_effects": d, "redelivered": 10 - i}
            for i, d in enumerate(dups)]

    def drawn(max_rows: int) -> str:
        console = Console(file=StringIO(), width=120, color_system=None, highlight=False, soft_wrap=False)
        render_stats_table(replace(report, deployments=rows), console, max_rows)
        return console.file.getvalue()

    out = drawn(3)
    shown = [line.split()[0] for line in out.split("Per deployment")[1].splitlines() if line.startswith(" v")]
    assert shown == ["v1.0", "v3.0", "v5.0"] * 2  # 7, 7, 3 duplicates; counts table, then durations
    assert "3 of 6" in out and "… 3 more deployments" in out
    everything = drawn(0)
    assert [line.split()[0] for line in everything.split("Per deployment")[1].splitlines()
            if line.startswith(" v")] == [r["deployment"] for r in rows] * 2
    assert "more deployments" not in everything


def test_max_rows_below_zero_is_one_clear_error(cli):
    proc = cli("stats", str(VT / "logs"), "--max-rows", "-1")
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().strip().count("\n") == 0 and "--max-rows" in proc.stderr.decode()


def test_untrusted_names_are_neutralised(cli, tmp_path: Path):
    log = tmp_path / "w.ndjson"
    lines = []
    for i in range(6):
        base = {
            "queue": "q\x1b[31mred[/bold]",
            "job_type": "x[bold]y[/bold]\x1b]0;pwn\x07",
            "worker_id": "w1",
            "job_id": f"j{i}",
            "deployment_id": "v1\x1b[2J",
        }
        lines.append({**base, "ts": f"2026-01-01T00:00:{10 * i:02d}Z", "event": "job_received"})
        lines.append({**base, "ts": f"2026-01-01T00:00:{10 * i + 1:02d}Z", "event": "job_finished"})
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = cli("stats", str(log)).stdout
    assert b"\x1b" not in out and b"\x07" not in out
    assert b"\\x1b" in out and b"x[bold]y[/bold]" in out


def test_errors_are_one_line(cli):
    for args in (
        ["stats", "/no/such/dir"],
        ["stats", str(VT / "logs"), "--bucket", "soon"],
        ["stats", str(VT / "logs"), "--bucket", "0.2s"],
        ["stats", str(VT / "logs"), "--timeout", "q=-3"],
        ["stats", str(VT / "logs"), "--timeout", "q=nan"],
        ["stats", str(VT / "logs"), "--skew", "-1"],
    ):
        proc = cli(*args)
        assert proc.returncode == 2, args
        assert b"Traceback" not in proc.stderr and proc.stderr.strip().count(b"\n") == 0, proc.stderr
        assert proc.stdout == b""


def test_logs_without_jobs_give_empty_sections(cli, tmp_path: Path):
    log = tmp_path / "app.log"
    log.write_text("2026-01-01T00:00:00Z service started\n2026-01-01T00:00:05Z health check ok\n")
    proc = cli("stats", str(log), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["queues"] == [] and doc["deployments"] == [] and doc["timeouts"] == [] and doc["findings"] == []
    table = cli("stats", str(log))
    assert table.returncode == 0 and b"No queue-timeout or lock findings" in table.stdout

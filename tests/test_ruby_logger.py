"""Ruby's Logger lines (Rails' production log) and ActiveJob's and ActionMailer's lines in them, read
from the Rails recordings (fixtures/real/rails_activejob_*): one Sidekiq process's log holds
Sidekiq's own lines and the application's, each run told by both under two ids."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.schema import as_strings

HARMFUL = FIXTURES / "real" / "rails_activejob_sidekiq_smtp_timeout_retry" / "logs"
CONTROL = FIXTURES / "real" / "rails_activejob_sidekiq_retry_control" / "logs"
CONFIG = load_config(cwd=Path("/"))


def _records(path: Path) -> pl.DataFrame:
    result = ingest([str(path)], CONFIG)
    return as_strings(result.texts.decoded(result.table) if result.texts is not None else result.table).sort("source", "line")


def _line(records: pl.DataFrame, file: str, line: int) -> dict:
    return records.filter(pl.col("source").str.ends_with(file) & (pl.col("line") == line)).row(0, named=True)


def test_activejobs_lines_are_a_jobs_lifecycle_under_its_job_id():
    records = _records(HARMFUL)
    job = "37381ffc-576b-4d69-9db5-824c9b348cfb"  # ord_5101's job: its first attempt's answer timed out
    expected = {  # (file, line): kind, as the recording's truth.json tells the attempt
        ("producer.log", 2): "publish",
        ("sidekiq-1.log", 7): "start",
        ("sidekiq-1.log", 33): "side_effect",
        ("sidekiq-1.log", 34): "fail",
        ("sidekiq-1.log", 125): "publish",  # retry_on's `Enqueued ... at <time>`
        ("sidekiq-1.log", 126): "retry",  # `Retrying ... in 2 seconds`: no tag, the id of the line before
        ("sidekiq-2.log", 252): "start",
        ("sidekiq-2.log", 257): "side_effect",
        ("sidekiq-2.log", 259): "finish",
    }
    for (file, line), kind in expected.items():
        row = _line(records, file, line)
        assert (row["kind"], row["job_id"]) == (kind, job), (file, line, row["kind"], row["job_id"])
    mail = _line(records, "sidekiq-1.log", 33)
    assert mail["action"] == "email" and mail["provider_message_id"] == "e2430c24-6e23-45a4-ab83-880d4aeb2af8@shop.example"
    failed = _line(records, "sidekiq-1.log", 34)
    assert failed["error"].startswith("Net::ReadTimeout") and failed["job_type"] == "OrderConfirmationJob"
    assert failed["worker_id"] == "sidekiq-1" and failed["process_id"] == "25651"


@pytest.mark.parametrize(("logs", "duplicated"), [(HARMFUL, 4), (CONTROL, 0)])
def test_sidekiqs_own_lines_of_those_runs_count_once(logs, duplicated):
    """Sidekiq's `start` / `done` of each jid tell the runs ActiveJob tells under its job id: left out
    of the runs (echoes), so that each attempt is one execution; the delivery refused before any data
    (greylisted: Net::SMTPServerBusy 451 after ActionMailer's `Delivered mail`) is no side effect done."""
    report = analyze(ingest([str(logs)], CONFIG), CONFIG, load_rules(CONFIG))
    correlation = report.context.correlation
    table = as_strings(correlation.table_with(*correlation.apart_names))
    sidekiq = table.filter((pl.col("format") == "sidekiq-text") & pl.col("kind").is_in(["start", "finish"]))
    assert sidekiq.height == 48 and sidekiq["echo"].all()
    assert correlation.executions.height == 24
    harmful = {f.action_id for f in report.findings if f.rule == "DF101" and f.harmful}
    assert len(harmful) == duplicated
    # The jids stay actions of their own (a trace by jid finds Sidekiq's lines) but are no jobs of
    # the summary's count: one action an order, as the recording's truth tells them.
    truth = json.loads((logs.parent / "truth.json").read_text())
    jids = correlation.actions.filter(pl.col("identity").str.contains("^job_id=[0-9a-f]{24}$"))
    assert jids.height == 24 and jids["told_again"].all()
    assert report.summary["actions"] == len(truth["actions"]) == 20


def test_a_web_requests_lines_are_no_jobs_and_its_enqueue_carries_the_request_id(tmp_path: Path):
    """Rails' request log in a web process (production's `log_tags = [:request_id]`): `Started POST`
    and `Completed 201` are no job's start and finish; the request's `Enqueued` is the job's publish."""
    request, job = "5f2c9a1e-3b7d-4c21-9e8a-0d6f4b2c1a77", "0b2a0c4e-1d2f-4a5b-8c9d-0e1f2a3b4c5d"
    lines = [
        f'I, [2026-12-07T09:00:00.100000 #7]  INFO -- : [{request}] Started POST "/orders" for 10.0.0.7 at 2026-12-07 09:00:00 +0000',
        f"I, [2026-12-07T09:00:00.101000 #7]  INFO -- : [{request}] Processing by OrdersController#create as JSON",
        (f"I, [2026-12-07T09:00:00.140000 #7]  INFO -- : [{request}] [ActiveJob] Enqueued OrderConfirmationJob (Job ID: {job})"
         ' to Sidekiq(default) with arguments: "ord_1"'),
        f"I, [2026-12-07T09:00:00.142000 #7]  INFO -- : [{request}] Completed 201 Created in 41ms (Views: 0.4ms | Allocations: 8121)",
    ]
    (tmp_path / "web-1.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = _records(tmp_path / "web-1.log")
    assert records["kind"].to_list() == ["other", "other", "publish", "other"]
    assert records["request_id"].to_list() == [request] * 4 and records["job_id"].to_list()[2] == job
    assert set(records["format"].to_list()) == {"ruby-logger"} and set(records["worker_id"].to_list()) == {"web-1"}

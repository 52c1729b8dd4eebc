"""A library's own lines inside any log (vocabulary.library_lines): APScheduler's `Running job`,
read in JSON and logfmt alike; a user's line of its own from dupfind.toml; bad entries refused."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.errors import DupfindError
from dupfind.ingest import ingest
from dupfind.schema import as_strings

RUNNING = 'Running job "send_reminders (trigger: interval[0:00:05], next run at: 2026-12-07 05:00:05 UTC)" (scheduled at 2026-12-07 05:00:00+00:00)'
DONE = 'Job "send_reminders (trigger: interval[0:00:05], next run at: 2026-12-07 05:00:05 UTC)" executed successfully'


def _table(folder: Path, config=None):
    config = config or load_config(cwd=Path("/"))
    return as_strings(ingest([str(folder)], config).text_table())


def test_apscheduler_running_job_in_json_and_logfmt_is_a_send_of_its_entry(tmp_path: Path):
    (tmp_path / "app-1.ndjson").write_text("\n".join(json.dumps(r) for r in [
        {"ts": "2026-12-07T05:00:00.001Z", "level": "INFO", "logger": "apscheduler.executors.default",
         "worker_id": "app-1", "message": RUNNING},
        {"ts": "2026-12-07T05:00:00.400Z", "level": "INFO", "logger": "apscheduler.executors.default",
         "worker_id": "app-1", "message": DONE},
    ]) + "\n")
    (tmp_path / "app-2.log").write_text(
        f'ts=2026-12-07T05:00:00.020Z level=info logger=apscheduler.executors.default worker_id=app-2 msg={json.dumps(RUNNING)}\n'
    )
    table = _table(tmp_path).sort("ts")
    sends = table.filter(pl.col("kind") == "publish")
    assert sends["worker_id"].to_list() == ["app-1", "app-2"]
    assert set(sends["object_name"].to_list()) == {"send_reminders"}
    assert set(sends["name"].to_list()) == {"scheduled_run"}
    assert sends["message"].to_list() == [RUNNING, RUNNING]  # the text kept as written
    done = table.filter(pl.col("message") == DONE)
    assert done["kind"].to_list() != ["publish"] and done["object_name"].to_list() == [None]


def test_a_line_that_only_looks_like_it_is_left_alone(tmp_path: Path):
    (tmp_path / "app.ndjson").write_text(json.dumps(
        {"ts": "2026-12-07T05:00:00Z", "worker_id": "w", "message": 'Running job "nightly" by hand'}) + "\n")
    (row,) = _table(tmp_path).iter_rows(named=True)
    assert row["kind"] != "publish" and row["object_name"] is None


def test_a_users_library_line_from_dupfind_toml(tmp_path: Path):
    (tmp_path / "dupfind.toml").write_text(
        "[[vocabulary.library_lines]]\n"
        "contains = 'cron fired'\n"
        "match = '^cron fired: (?P<object_name>[\\w-]+)$'\n"
        "event = 'scheduled_run'\n"
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.ndjson").write_text(json.dumps({"ts": "2026-12-07T05:00:00Z", "worker_id": "w", "message": "cron fired: cleanup"}) + "\n")
    config = load_config(cwd=tmp_path)
    (row,) = _table(logs, config).iter_rows(named=True)
    assert (row["kind"], row["object_name"]) == ("publish", "cleanup")
    assert config.digest() != load_config(cwd=Path("/")).digest()


@pytest.mark.parametrize("entry, says", [
    ("contains = 'x'\nmatch = '(?P<nope>x)'\nevent = 'e'", "not a canonical text column"),
    ("contains = 'x'\nmatch = '('\nevent = 'e'", "invalid regular expression"),
    ("match = 'x'\nevent = 'e'", "non-empty contains and event"),
    ("contains = 'x'\nmatch = 'x'\nevent = 'e'\nkind = 'publish'", "unknown key"),
])
def test_a_bad_library_line_is_one_clear_error(tmp_path: Path, entry: str, says: str):
    (tmp_path / "dupfind.toml").write_text("[[vocabulary.library_lines]]\n" + entry + "\n")
    with pytest.raises(DupfindError, match=says):
        load_config(cwd=tmp_path)

"""Actions are the linked ids of records: their identities, and values too shared to link."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl

from dupfind.config import load_config
from dupfind.correlate import GlueWarning, build_actions
from dupfind.ingest import ingest

CONFIG = load_config(cwd=Path("/"))  # link keys: job_id, event_id, idempotency_key, notification_id, delivery_id


def _read(tmp_path: Path, records: list[dict]):
    path = tmp_path / "worker.log"
    lines = [
        {"ts": f"2026-07-21T10:{i // 60:02d}:{i % 60:02d}.000Z", "level": "info", "worker": "w-1", **r}
        for i, r in enumerate(records)
    ]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return ingest([str(path)], CONFIG)


def _actions(tmp_path: Path, records: list[dict], max_jobs: int = 25):
    read = _read(tmp_path, records)
    linked, actions, warnings = build_actions(read.table, CONFIG.link_keys, max_jobs, texts=read.texts)
    per_record = linked.join(actions, on="action_id", how="left").sort("rid")["identity"].to_list()
    return per_record, actions, warnings


def test_ids_on_records_together_make_one_action_named_by_its_sorted_ids(tmp_path) -> None:
    per_record, actions, warnings = _actions(tmp_path, [
        {"event": "job_received", "job_id": "j-1", "event_id": "evt-1"},
        {"event": "email_sent", "event_id": "evt-1", "delivery_id": "dlv-9"},
        {"event": "job_done", "job_id": "j-1", "notification_id": "ntf-3"},
        {"event": "job_received", "job_id": "j-2"},
        {"event": "heartbeat"},
    ])
    one = "delivery_id=dlv-9|event_id=evt-1|job_id=j-1|notification_id=ntf-3"
    assert per_record == [one, one, one, "job_id=j-2", None]
    assert sorted(actions["identity"].to_list()) == [one, "job_id=j-2"]
    assert actions.schema["identity"] == pl.String and warnings == []


def test_a_value_shared_by_too_many_jobs_links_nothing_and_is_named(tmp_path) -> None:
    # One delivery id (the last link key) and one event id stamped on 30 jobs by mistake, and an
    # event id two jobs share (under the limit: it links them).
    records = [{"event": "job_received", "job_id": f"j-{n:02d}", "delivery_id": "dlv-shared"} for n in range(30)]
    records += [{"event": "job_done", "job_id": f"j-{n:02d}", "event_id": "evt-shared"} for n in range(30)]
    records += [{"event": "job_done", "job_id": "j-00", "event_id": "evt-pair"},
                {"event": "job_done", "job_id": "j-01", "event_id": "evt-pair"}]
    per_record, actions, warnings = _actions(tmp_path, records)
    assert sorted(warnings, key=lambda w: w.key) == [
        GlueWarning("delivery_id", "dlv-shared", 30), GlueWarning("event_id", "evt-shared", 30),
    ]
    assert actions.height == 29  # j-00 and j-01 linked by evt-pair, every other job alone
    assert "event_id=evt-pair|job_id=j-00|job_id=j-01" in actions["identity"].to_list()
    assert not any("shared" in identity for identity in actions["identity"].to_list())
    assert per_record[2] == "job_id=j-02"
    # With a limit above 30 they are links like any other: one action.
    _, actions, warnings = _actions(tmp_path, records, max_jobs=40)
    assert warnings == [] and actions.height == 1

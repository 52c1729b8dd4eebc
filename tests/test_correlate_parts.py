"""Executions built over ranges of actions (bounded memory) equal those built in one pass."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.correlate import build_actions, build_executions
from dupfind.ingest import ingest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))
# Prefork workers (process assignment), Celery's own log beside the app's (echo records), a lock
# handover and a deploy overlap: every branch of execution building.
CASES = [
    FIXTURES / "real" / "celery_redis_visibility_timeout",
    FIXTURES / "scenarios" / "prefork-same-message" / "logs",
    FIXTURES / "scenarios" / "lock-blocking-handover" / "logs",
    FIXTURES / "synth" / "deploy-overlap" / "logs",
]


@pytest.mark.parametrize("logs", CASES, ids=lambda p: p.parent.name if p.name == "logs" else p.name)
@pytest.mark.parametrize("part_rows", [1, 37, 500])
def test_parts_give_the_same_executions_as_one_pass(logs: Path, part_rows: int) -> None:
    read = ingest([str(logs)], CONFIG)
    linked, _, _ = build_actions(read.table, CONFIG.link_keys, texts=read.texts)
    whole_table, whole = build_executions(linked, part_rows=10**12)
    parted_table, parted = build_executions(linked, part_rows=part_rows)
    ranges = linked.filter(pl.col("action_id").is_not_null())["action_id"].n_unique()
    assert whole.height >= 2 and ranges >= 2  # several actions: parts of one row really split them
    assert parted.equals(whole)
    assert parted_table.select("exec_id", "echo").equals(whole_table.select("exec_id", "echo"))


def test_no_records_in_runs_gives_no_executions() -> None:
    read = ingest([str(FIXTURES / "synth" / "baseline" / "logs")], CONFIG)
    linked, _, _ = build_actions(read.table, CONFIG.link_keys, texts=read.texts)
    producers_only = linked.with_columns(worker_id=pl.lit(None, dtype=linked.schema["worker_id"]))
    result, executions = build_executions(producers_only, part_rows=5)
    assert executions.height == 0
    assert result["exec_id"].null_count() == result.height and not result["echo"].any()


@pytest.mark.parametrize("logs", CASES, ids=lambda p: p.parent.name if p.name == "logs" else p.name)
@pytest.mark.parametrize("part_rows", [37, 10**12])
def test_job_ids_decoded_after_grouping_are_the_sorted_ids(logs: Path, part_rows: int) -> None:
    """Executions are built over job id codes and their lists decoded: the same lists as building
    them over the ids as text (codes sort as their texts do)."""
    read = ingest([str(logs)], CONFIG)
    linked, _, _ = build_actions(read.table, CONFIG.link_keys, texts=read.texts)
    _, from_codes = build_executions(linked, part_rows=part_rows, texts=read.texts)
    _, from_text = build_executions(read.texts.decoded(linked, "job_id"), part_rows=part_rows)
    assert from_codes["job_ids"].dtype == pl.List(pl.String)
    assert from_codes["job_ids"].list.len().sum() > 0
    assert from_codes.equals(from_text)

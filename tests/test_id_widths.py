"""Action, execution and line numbers are 4-byte integers everywhere they are held and joined."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dupfind import schema
from dupfind.analysis import AnalysisContext
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.pipeline import correlate_inputs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))


@pytest.fixture(scope="module")
def context() -> AnalysisContext:
    read = ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], CONFIG)
    return AnalysisContext(correlate_inputs(read.table, CONFIG, texts=read.texts), CONFIG)


def test_table_holds_ids_and_lines_in_four_bytes(context) -> None:
    table = context.correlation.table
    assert schema.ID_TYPE == pl.Int32
    assert table.schema["action_id"] == table.schema["exec_id"] == pl.Int32
    assert table.schema["line"] == pl.UInt32
    for column in ("action_id", "exec_id", "line"):
        assert table[column].estimated_size() <= table.height * 4 + table.height // 8 + 64
    # Ids number the actions and executions from 0, each once.
    assert table["action_id"].drop_nulls().unique().sort().to_list() == list(range(context.correlation.actions.height))
    executions = context.correlation.executions
    assert executions["exec_id"].sort().to_list() == list(range(executions.height))


def test_frames_derived_from_the_table_keep_the_id_type(context) -> None:
    derived = {
        "actions": context.correlation.actions,
        "executions": context.correlation.executions,
        "side_effects": context.side_effects,
        "execution_durations": context.execution_durations,
        "effect_counts": context.effect_counts,
        "redelivery_gaps": context.redelivery_gaps,
    }
    seen = 0
    for name, frame in derived.items():
        for column in ("action_id", "exec_id", "prev_exec_id"):
            if column in frame.columns:
                assert frame.schema[column] == schema.ID_TYPE, (name, column)
                seen += 1
    assert seen >= 8
    # Side effects join the executions on their ids without a cast.
    joined = context.side_effects.join(context.correlation.executions.select("exec_id", "identity"), on="exec_id")
    assert joined.height == context.side_effects["exec_id"].drop_nulls().len() > 0

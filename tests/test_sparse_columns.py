"""Columns with a value on few rows wait for assembly as (row, value) pairs and assemble unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dupfind.assembly import KEY_COLUMNS, LabelPool, assemble_held, held_for_assembly
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import canonical_schema
from dupfind.textcodes import coded_columns

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))
T0 = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)


def _batch(rows: int, offset: int, schema: dict) -> pl.DataFrame:
    """A normalised batch: every row a job's record, a timeout on its first and last rows only, an
    error on one row in fifty, a provider on a fifth of them, an attempt on every row."""
    data = {
        "ts": [T0 + timedelta(milliseconds=(i * 37 + offset) % 5000) for i in range(rows)],
        "kind": ["start"] * rows,
        "source": [f"worker-{offset}.log"] * rows,
        "line": list(range(1, rows + 1)),
        "format": ["ndjson"] * rows,
        "job_id": [f"job-{offset}-{i}" for i in range(rows)],
        "request_id": [f"req-{offset}-{i}" if i % 5 == 0 else None for i in range(rows)],
        "provider": ["sendgrid" if i % 5 == 0 else None for i in range(rows)],
        "error": [f"upstream timeout on job-{offset}-{i}" if i % 50 == 7 else None for i in range(rows)],
        "visibility_timeout_s": [30.0 if i in (0, rows - 1) else None for i in range(rows)],
        "attempt": [1 + i % 3 for i in range(rows)],
    }
    return pl.DataFrame(data).with_columns(pl.col(c).cast(schema[c]) for c in data)


def test_columns_with_few_values_are_held_as_pairs_and_dense_ones_as_columns() -> None:
    schema = canonical_schema()
    batch = _batch(400, 0, schema)
    held = held_for_assembly(batch, coded_columns(), LabelPool())
    assert set(held.sparse) == {"visibility_timeout_s", "error", "request_id", "provider"}
    assert not set(held.sparse) & set(KEY_COLUMNS)
    assert {"job_id", "attempt", "ts", "line"} <= set(held.frame.columns)
    pairs = held.sparse["visibility_timeout_s"]
    assert pairs["at"].to_list() == [0, 399] and pairs["visibility_timeout_s"].to_list() == [30.0, 30.0]
    assert held.height == 400 and held.frame.height == 400
    dense = batch.select(list(held.sparse)).estimated_size()
    assert sum(p.estimated_size() for p in held.sparse.values()) < dense / 2


@pytest.mark.parametrize("threads", [1, 2])
def test_sparse_and_dense_batches_assemble_into_the_same_table(monkeypatch, threads) -> None:
    """Batches whose sparse columns sit at their first and last rows, one batch without them, a
    time order that interleaves the batches: as the concatenation sorted by time, file and line."""
    monkeypatch.setattr("dupfind.assembly.ASSEMBLE_THREADS", threads)
    schema = canonical_schema()
    coded = coded_columns()
    batches = [_batch(n, i, schema) for i, n in enumerate((120, 61, 250))]
    batches.append(_batch(80, 3, schema).drop("visibility_timeout_s", "error"))

    def assembled(share: float) -> pl.DataFrame:
        monkeypatch.setattr("dupfind.assembly.SPARSE_SHARE", share)
        labels = LabelPool()
        held = [held_for_assembly(b, coded, labels) for b in batches]
        assert bool(any(h.sparse for h in held)) == (share > 0)
        table, outside, texts = assemble_held(held, schema, None, None, coded, labels)
        assert outside == 0
        return texts.decoded(table).with_columns(pl.col(pl.Categorical).cast(pl.String))

    sparse, dense = assembled(0.6), assembled(0.0)
    assert sparse.equals(dense)
    expected = pl.concat(batches, how="diagonal_relaxed").sort("ts", "source", "line", maintain_order=True)
    for column in ("visibility_timeout_s", "error", "request_id", "provider", "job_id", "attempt"):
        assert sparse[column].cast(expected[column].dtype).to_list() == expected[column].to_list(), column


@pytest.mark.parametrize("scenario", ["synth/deploy-overlap", "scenarios/benign-retries", "scenarios/deploy-grace-too-short"])
def test_reads_of_real_logs_are_the_same_with_and_without_sparse_holding(monkeypatch, scenario) -> None:
    import dupfind.assembly

    logs = str(FIXTURES / scenario / "logs")
    held_sparse = dupfind.assembly._held_sparse
    sparse_columns: set[str] = set()

    def spy(frame, texts):
        held = held_sparse(frame, texts)
        sparse_columns.update(held.sparse)
        return held

    def text(read) -> pl.DataFrame:
        return read.text_table().with_columns(pl.col(pl.Categorical).cast(pl.String))

    monkeypatch.setattr("dupfind.assembly._held_sparse", spy)
    sparse = text(ingest([logs], CONFIG))
    assert sparse_columns  # these logs have columns with a value on few rows
    monkeypatch.setattr("dupfind.assembly.SPARSE_SHARE", 0.0)
    sparse_columns.clear()
    dense = text(ingest([logs], CONFIG))
    assert not sparse_columns
    assert sparse.equals(dense)

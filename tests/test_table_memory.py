"""The assembled table keeps text as Categorical codes, and polars' allocator returns memory early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import LABEL_COLUMNS, canonical_schema
from dupfind.textcodes import CODE_TYPE, coded_columns

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))


def test_text_columns_are_codes_or_categorical_and_rows_stay_small() -> None:
    read = ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], CONFIG)
    table = read.table
    text = [c for c, t in canonical_schema(CONFIG.business_keys).items() if t == pl.String]
    coded = coded_columns(CONFIG.business_keys)
    assert text and all(table.schema[c] == CODE_TYPE for c in coded)
    assert all(isinstance(table.schema[c], pl.Categorical) for c in text if c not in coded)
    # The same rows held as strings take more than twice the bytes (16-byte views plus text).
    as_text = read.text_table().with_columns(pl.col(c).cast(pl.String) for c in text)
    assert (table.estimated_size() + read.texts.values.estimated_size()) * 2 < as_text.estimated_size()
    assert table.estimated_size() / table.height < 200


def _allocator_setting(env: dict[str, str]) -> str:
    code = "import dupfind, os; print(os.environ['_RJEM_MALLOC_CONF'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_freed_pages_are_returned_early_unless_the_user_chose() -> None:
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    settings = dict(item.split(":") for item in _allocator_setting(env).split(","))
    # Freed pages go back after 120 ms, at once for allocations of 256 KiB and more.
    assert settings == {"dirty_decay_ms": "120", "muzzy_decay_ms": "0", "oversize_threshold": str(256 << 10)}
    assert _allocator_setting({**env, "_RJEM_MALLOC_CONF": "dirty_decay_ms:5000"}) == "dirty_decay_ms:5000"


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_assembled_table_is_the_blocks_sorted(monkeypatch, threads) -> None:
    """Blocks that lack some columns, with equal times across files, assemble (columns gathered on
    threads) into what one concatenation sorted by time, file and line gives."""
    from datetime import UTC, datetime, timedelta

    from dupfind.assembly import LabelPool, assemble_held, held_for_assembly
    from dupfind.schema import canonical_schema

    monkeypatch.setattr("dupfind.assembly.ASSEMBLE_THREADS", threads)
    schema = canonical_schema()
    t0 = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    blocks = []
    for b in range(5):
        n = 50 + b
        block = {"ts": [t0 + timedelta(seconds=(i * 7 + b) % 23) for i in range(n)], "kind": ["start"] * n,
                 # First seen in the reverse of their sorted order: the file's rank is not its code.
                 "source": [("w-c.log", "w-b.log", "w-a.log")[(b + i) % 3] for i in range(n)], "line": list(range(n, 0, -1)),
                 "format": ["ndjson"] * n}
        if b % 2:
            block["job_id"] = [f"j{b}-{i}" if i % 4 else None for i in range(n)]
        if b != 3:
            block["attempt"] = [i % 3 for i in range(n)]
        blocks.append(pl.DataFrame(block).with_columns(pl.col(c).cast(schema[c]) for c in block))
    expected = pl.concat(blocks, how="diagonal_relaxed").sort("ts", "source", "line", maintain_order=True)
    coded = coded_columns()
    labels = LabelPool()
    table, outside, texts = assemble_held([held_for_assembly(b, coded, labels) for b in blocks], schema, None, None, coded, labels)
    assert outside == 0 and table.columns == list(schema)
    table = texts.decoded(table)
    for column in ("ts", "kind", "line", "job_id", "attempt", "format"):
        assert table[column].cast(expected[column].dtype).to_list() == expected[column].to_list(), column
    assert table["source"].cast(pl.String).to_list() == expected["source"].to_list()
    assert table["message"].null_count() == table.height


def test_label_columns_share_one_pool_of_two_byte_codes() -> None:
    table = ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], CONFIG).table
    labels = {table.schema[c] for c in LABEL_COLUMNS}
    assert len(labels) == 1  # one pool: labels compare and join with each other
    (label,) = labels
    assert label.categories.physical() == pl.UInt16 and not label.categories.is_global()
    for column in ("message", "job_id", "event_id"):  # as many texts as actions or lines: codes of their own
        assert table.schema[column] == CODE_TYPE
    assert table["worker_id"].to_physical().dtype == pl.UInt16
    # Each label column costs 2 bytes a row of codes (plus validity), not 4.
    assert table["kind"].to_physical().estimated_size() <= table.height * 2 + table.height // 8 + 64


def test_labels_too_many_for_two_byte_codes_stay_in_the_global_pool(monkeypatch) -> None:
    logs = str(FIXTURES / "synth" / "deploy-overlap" / "logs")
    narrow = ingest([logs], CONFIG).table
    monkeypatch.setattr("dupfind.assembly.LABEL_TEXTS_MAX", 10)
    wide = ingest([logs], CONFIG).table
    assert all(wide.schema[c] == pl.Categorical() for c in LABEL_COLUMNS)
    assert narrow.with_columns(pl.col(LABEL_COLUMNS).cast(pl.String)).equals(
        wide.with_columns(pl.col(LABEL_COLUMNS).cast(pl.String))
    )


def test_free_text_errors_do_not_take_the_labels_out_of_their_pool(tmp_path, monkeypatch) -> None:
    lines = [
        f'{{"ts":"2026-07-21T10:00:{i % 60:02d}Z","event":"job_failed","worker":"w-{i % 3}","job_id":"j-{i}",'
        f'"error":"upstream refused job j-{i} (attempt {i})"}}'
        for i in range(120)
    ]
    (tmp_path / "worker.log").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr("dupfind.assembly.LABEL_TEXTS_MAX", 60)  # fewer than the 120 error texts
    table = ingest([str(tmp_path)], CONFIG).table
    assert table["error"].n_unique() == 120 and table.schema["error"] == pl.Categorical()
    assert table["worker_id"].to_physical().dtype == pl.UInt16 and table["worker_id"].n_unique() == 3


@pytest.mark.parametrize("scenario", ["synth/deploy-overlap", "scenarios/k8s-sigterm-keep-polling", "scenarios/lock-get-then-set-race"])
def test_reports_are_the_same_with_labels_in_either_pool(monkeypatch, scenario) -> None:
    from typer.testing import CliRunner

    from dupfind.cli import app

    logs = FIXTURES / scenario / "logs"
    runner = CliRunner()
    args = ["--no-cache", str(logs)]

    def outputs() -> list[tuple[int, str]]:
        return [(r.exit_code, r.stdout) for r in (
            runner.invoke(app, [command, *args, "--format", "json"]) for command in ("analyze", "timeline", "stats")
        )]

    narrow = outputs()
    monkeypatch.setattr("dupfind.assembly.LABEL_TEXTS_MAX", 0)
    wide = outputs()
    assert all(code == 0 and text.startswith("{") for code, text in narrow)
    assert narrow == wide


@pytest.mark.parametrize("room", [10_000, 30, 12, 0])
def test_labels_held_in_the_reads_pool_assemble_there_while_they_fit(monkeypatch, room) -> None:
    """Batches held with their labels in the read's pool assemble with every label in it while the
    table's label texts fit, and every label in polars' global pool otherwise, also when the pool
    fills up part way (the batches before in it, those after not); the values are the same."""
    from datetime import UTC, datetime, timedelta

    from dupfind.assembly import LabelPool, assemble_held, held_for_assembly

    monkeypatch.setattr("dupfind.assembly.LABEL_TEXTS_MAX", room)
    schema = canonical_schema()
    t0 = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    blocks = []
    for b in range(4):
        n = 40
        block = {"ts": [t0 + timedelta(seconds=i * 3 + b) for i in range(n)], "kind": ["start", "commit"] * (n // 2),
                 "source": [f"w{b}.log"] * n, "line": list(range(1, n + 1)), "format": ["ndjson"] * n,
                 "worker_id": [f"w-{b}-{i % (2 + 3 * b)}" for i in range(n)], "queue": [None if b == 1 else "q"] * n}
        blocks.append(pl.DataFrame(block).with_columns(pl.col(c).cast(schema[c]) for c in block))
    expected = pl.concat(blocks, how="diagonal_relaxed").sort("ts", "source", "line", maintain_order=True)
    coded = coded_columns()
    labels = LabelPool()
    held = [held_for_assembly(b, coded, labels) for b in blocks]
    # The batches' labels are 6, 11, 19 then 30 texts; the 4 paths join at assembly (34).
    assert labels.full == (room < 30)
    table, _, _ = assemble_held(held, schema, None, None, coded, labels)
    assert table.columns == list(schema)
    global_pool = room < 34
    assert {table.schema[c] for c in LABEL_COLUMNS} == ({pl.Categorical()} if global_pool else {labels.dtype})
    for column in ("kind", "source", "format", "worker_id", "queue"):
        assert table[column].cast(pl.String).to_list() == expected[column].to_list(), column
    assert table["status"].null_count() == table.height


def test_a_label_pool_given_more_texts_than_its_codes_hold_is_full() -> None:
    from dupfind.assembly import LabelPool

    labels = LabelPool()
    few = labels.held(pl.Series(["w-1", "w-2", None]))
    assert not labels.full and few.dtype == labels.dtype and labels.size == 2
    many = pl.Series([f"w-{i}" for i in range(70_000)])  # more than 65,536 2-byte codes
    held = labels.held(many)
    assert labels.full and held.dtype == pl.Categorical() and held.cast(pl.String).equals(many)
    assert labels.stored() == pl.Categorical()

"""The assembled table keeps text as Categorical codes, and polars' allocator returns memory early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import canonical_schema

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))


def test_text_columns_are_categorical_and_rows_stay_small() -> None:
    table = ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], CONFIG).table
    text = [c for c, t in canonical_schema(CONFIG.business_keys).items() if t == pl.String]
    assert text and all(table.schema[c] == pl.Categorical for c in text)
    # The same rows held as strings take more than twice the bytes (16-byte views plus text).
    as_text = table.with_columns(pl.col(c).cast(pl.String) for c in text)
    assert table.estimated_size() * 2 < as_text.estimated_size()
    assert table.estimated_size() / table.height < 200


def _allocator_setting(env: dict[str, str]) -> str:
    code = "import dupfind, os; print(os.environ['_RJEM_MALLOC_CONF'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_freed_pages_are_returned_early_unless_the_user_chose() -> None:
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    assert _allocator_setting(env) == "dirty_decay_ms:250,muzzy_decay_ms:0"
    assert _allocator_setting({**env, "_RJEM_MALLOC_CONF": "dirty_decay_ms:5000"}) == "dirty_decay_ms:5000"

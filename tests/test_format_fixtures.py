"""Every folder under fixtures/formats/ is a case: its logs must yield the expected rows and counts."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.schema import as_strings
from dupfind.timefmt import iso_us

from conftest import FIXTURES

CASES = sorted(p for p in (FIXTURES / "formats").iterdir() if (p / "expected.json").is_file())


def _load_config(case: Path, expected: dict):
    options = expected.get("options", {})
    config_file = case / options["config"] if "config" in options else None
    return load_config(config_file, assume_tz=options.get("assume_tz"), cwd=case)


def _load(case: Path):
    expected = json.loads((case / "expected.json").read_text())
    return expected, ingest([str(case / "logs")], _load_config(case, expected))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_file_accounting(case: Path):
    expected, result = _load(case)
    by_name = {Path(f.path).name: f for f in result.files}
    assert set(by_name) == set(expected["files"])
    for name, want in expected["files"].items():
        report = by_name[name]
        # Nothing disappears: every line is parsed, blank or rejected with a reason.
        assert report.lines == report.parsed + report.blank + report.rejected_total, name
        for key in ("format", "lines", "records", "blank"):
            if key in want:
                assert getattr(report, key) == want[key], (name, key)
        if "rejected" in want:
            assert dict(report.rejected) == want["rejected"], name
        if "naive_timestamps" in want:
            assert report.naive_ts == want["naive_timestamps"], name
    for name, examples in expected.get("rejected_examples", {}).items():
        assert by_name[name].examples == examples


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_canonical_rows(case: Path):
    expected, result = _load(case)
    table = as_strings(result.text_table()).with_columns(pl.col("source").map_elements(lambda s: Path(s).name, return_dtype=pl.String))
    # Some folders hold one query's results in several export shapes (CloudWatch's API JSON, the
    # console's CSV and JSON): read together, the later shapes' records are copies of the first's
    # and counted once (dupfind.copies). Each shape's rows are checked as it reads alone.
    copied = {Path(entry[0]).name for entry in result.copies if entry[0] != entry[1]}
    for name in sorted(copied):
        alone = ingest([str(case / "logs" / name)], _load_config(case, expected))
        table = pl.concat([table.filter(pl.col("source") != name), as_strings(alone.text_table()).with_columns(source=pl.lit(name))])
    for want in expected.get("rows", []):
        match = table.filter((pl.col("source") == want["source"]) & (pl.col("line") == want["line"]))
        assert match.height == 1, f"no single row for {want['source']}:{want['line']}"
        row = match.row(0, named=True)
        for column, value in want.items():
            got = row[column]
            if column == "ts":
                got = iso_us(got)
            assert got == value, f"{want['source']}:{want['line']} {column}: {got!r} != {value!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_field_mapping_and_unmapped_events(case: Path):
    expected, result = _load(case)
    by_name = {Path(f.path).name: f for f in result.files}
    for name, fields in expected.get("fields", {}).items():
        for column, paths in fields.items():
            assert by_name[name].fields.get(column) == paths, (name, column)
    for name, events in expected.get("unmapped_events", {}).items():
        assert by_name[name].unmapped_events == events

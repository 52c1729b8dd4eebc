"""A log written or exported on Windows (CRLF line ends: `aws` and `gcloud` there, a Windows
service's file) reads as the same log with LF line ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES
from test_export_shapes import _records

from dupfind.config import load_config
from dupfind.ingest import ingest

_COMPRESSED = (b"\x1f\x8b", b"PK\x03\x04", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd")


def _lf_logs() -> list[Path]:
    """The format fixtures' files of lines with LF ends (not compressed, no CR of their own)."""
    found = []
    for log in sorted((FIXTURES / "formats").glob("*/logs/*")):
        data = log.read_bytes() if log.is_file() else b""
        if data and not data.startswith(_COMPRESSED) and b"\r" not in data:
            found.append(log)
    return found


LF_LOGS = _lf_logs()


@pytest.mark.parametrize("log", LF_LOGS, ids=[f"{p.parts[-3]}/{p.name}" for p in LF_LOGS])
def test_a_log_with_crlf_line_ends_reads_as_with_lf(tmp_path, log):
    """Before 2026-12-07 `aws logs ... --output text` with CRLF was 0 records (341 lines rejected),
    `gcloud logging read` text (its YAML not known), and zap's console lines lost their fields."""
    (tmp_path / log.name).write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    config = load_config(cwd=Path("/"))
    crlf, lf = ingest([str(tmp_path)], config).files[0], ingest([str(log)], config).files[0]
    assert (crlf.format, crlf.records, crlf.lines, dict(crlf.rejected)) == (lf.format, lf.records, lf.lines, dict(lf.rejected))
    assert _records(tmp_path) == _records(log)

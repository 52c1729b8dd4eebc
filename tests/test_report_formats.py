"""Every output format of every reporting command against one shared PII scenario: --output equal to
stdout, and redaction of personal data in each while the correlation ids stay intact (that every
analyze renderer carries every finding is tests/test_renderers.py)."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.redact import Redactor
from dupfind.render.registry import FORMATS_RENDERERS, RENDERERS, TRACE_RENDERERS, RenderOptions, render
from dupfind.rules_registry import load_rules
from dupfind.trace import trace_ids

from conftest import FIXTURES

PII_LOGS = FIXTURES / "scenarios" / "pii-order-confirmation" / "logs"
# Personal data and secrets the PII scenario's messages and errors hold.
PII = [
    "maria.gonzalez@example.com", "j.smith@example.org", "+1 (415) 555-0134", "+44 20 7946 0958",
    "4111 1111 1111 1111", "203.0.113.57", "198.51.100.23", "2001:db8:85a3::8a2e:370:7334",
    "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9", "SG.ngeVfQFYQlKU0ufo8x5d1A", "sk_live_51HxYzAbCdEfGhIjKlMnOpQr",
]
# Correlation ids of the duplicated action, several of which look like card or phone numbers.
IDS = ["4514710497465075", "1791234567890123456", "7c9e6679-7425-40de-944b-e07fc1f90ae7",
       "order:4514710497465075:confirmation", "celery@ip-10-0-3-17.eu-west-1.compute.internal"]


@pytest.fixture(scope="module")
def report():
    config = load_config(cwd=Path("/"))
    return analyze(ingest([str(PII_LOGS)], config), config, load_rules(config))


def _render(renderers, fmt, obj, redactor=None, width=160) -> str:
    out = io.BytesIO()
    render(renderers, fmt, obj, out, RenderOptions(width=width, worst=5, redactor=redactor, paths=[str(PII_LOGS)]))
    return out.getvalue().decode()


@pytest.mark.parametrize("renderers,fmt", [
    *((RENDERERS, f) for f in RENDERERS), *((TRACE_RENDERERS, f) for f in TRACE_RENDERERS),
])
def test_redaction_masks_personal_data_and_keeps_ids_in_every_format(report, renderers, fmt):
    subject = report if renderers is RENDERERS else trace_ids(report.context, ["4514710497465075"])
    plain = _render(renderers, fmt, subject)
    leaked = [value for value in PII if value in plain]
    assert leaked, "the unredacted output shows no personal data, so this test would prove nothing"
    redactor = Redactor.for_table(report.context.table, texts=report.context.texts)
    masked = _render(renderers, fmt, subject, redactor)
    assert [value for value in PII if value in masked] == []
    assert "[redacted " in masked
    for value in IDS:
        assert (value in masked) == (value in plain), value
    assert "4514710497465075" in masked
    assert redactor.summary().startswith("masked ")


def test_formats_renderers_share_the_interface():
    config = load_config(cwd=Path("/"))
    result = ingest([str(PII_LOGS)], config)
    doc = orjson.loads(_render(FORMATS_RENDERERS, "json", result))
    assert len(doc["files"]) == 4
    assert "email-worker-a.log" in _render(FORMATS_RENDERERS, "table", result)


@pytest.mark.parametrize("command,fmt", [
    ("analyze", "json"), ("analyze", "ndjson"), ("analyze", "markdown"), ("analyze", "table"),
    ("trace", "json"), ("trace", "markdown"), ("trace", "table"), ("formats", "json"), ("formats", "table"),
    ("timeline", "json"), ("timeline", "table"), ("stats", "json"), ("stats", "table"),
])
def test_output_file_holds_what_stdout_shows(cli, tmp_path, command, fmt):
    args = [command, *(["4514710497465075"] if command == "trace" else []), str(PII_LOGS), "--format", fmt]
    env = {"COLUMNS": "120"}  # the width --output uses, so that tables match too
    to_stdout = cli(*args, env=env)
    target = tmp_path / f"report.{fmt}"
    to_file = cli(*args, "--output", str(target), env=env)
    assert to_stdout.returncode == 0 and to_file.returncode == 0, to_file.stderr
    assert to_file.stdout == b""
    assert target.read_bytes() == to_stdout.stdout
    assert f"report written to {target}" in to_file.stderr.decode()
    dash = cli(*args, "-o", "-", env=env, cwd=tmp_path)  # `-o -`: stdout, as other tools read it
    assert (dash.returncode, dash.stdout, dash.stderr) == (0, to_stdout.stdout, to_stdout.stderr)
    assert not (tmp_path / "-").exists()


def test_markdown_is_redacted_by_default_and_json_is_not(cli):
    ticket = cli("analyze", str(PII_LOGS), "--format", "markdown")
    assert ticket.returncode == 0
    text = ticket.stdout.decode()
    assert not [v for v in PII if v in text]
    assert "masked " in ticket.stderr.decode()
    assert "personal data and secrets in log values are masked" in text
    raw = cli("analyze", str(PII_LOGS), "--format", "markdown", "--no-redact").stdout.decode()
    assert [v for v in PII if v in raw]
    doc = cli("analyze", str(PII_LOGS), "--format", "json").stdout.decode()
    assert [v for v in PII if v in doc]
    redacted = cli("analyze", str(PII_LOGS), "--format", "json", "--redact")
    assert not [v for v in PII if v in redacted.stdout.decode()]
    assert orjson.loads(redacted.stdout)["findings"][0]["ids"]["order_id"] == ["4514710497465075"]


def test_output_to_an_unwritable_place_is_one_line(cli, tmp_path):
    proc = cli("analyze", str(PII_LOGS), "--output", str(tmp_path / "missing" / "x.json"), "--format", "json")
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("dupfind: error: cannot write ") and proc.stderr.count(b"\n") == 1

"""Every analyze renderer, one shared report: each must carry every finding and escape log text."""

from __future__ import annotations

import io
import re
import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.render.registry import RENDERERS, RenderOptions
from dupfind.rules_registry import load_rules

from conftest import FIXTURES

EVIL = '\u001b]0;pwned\u0007\u001b[2J[bold red]boom[/] <script>alert(1)</script> | `x` [link](http://evil)'


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("evil")
    source = (FIXTURES / "scenarios" / "writeup-visibility-timeout" / "logs" / "incident-notes.log").read_text()
    # Same incident, with hostile text in the worker names and a message.
    evil_worker = "notifier-b" + json.dumps(EVIL)[1:-1].replace(" ", "_").replace("=", ":")
    text = source.replace("worker=notifier-b", f'worker="{evil_worker}"')
    (folder / "notes.log").write_text(text)
    config = load_config(cwd=Path("/"))
    return analyze(ingest([str(folder)], config), config, load_rules(config))


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_renderer_carries_every_finding(report, name):
    out = io.BytesIO()
    RENDERERS[name](report, out, RenderOptions(worst=50))
    text = out.getvalue().decode()
    assert report.findings
    for finding in report.findings:
        if name in ("json", "ndjson"):
            assert finding.fingerprint in text
        else:
            assert finding.rule in text
    assert "\x1b" not in text and "\x07" not in text


def test_table_does_not_interpret_markup(report):
    out = io.BytesIO()
    RENDERERS["table"](report, out, RenderOptions(worst=5, width=200))
    text = out.getvalue().decode()
    assert "notifier-b" in text


def test_markdown_parses_and_log_text_cannot_inject(report):
    out = io.BytesIO()
    RENDERERS["markdown"](report, out, RenderOptions())
    text = out.getvalue().decode()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    types = {t.type for t in tokens}
    assert "table_open" in types and "heading_open" in types
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<script>" not in html
    assert 'href="http://evil"' not in html
    # Every table row has the same number of cells as its header (a `|` in log text is escaped).
    for table in html.split("<table>")[1:]:
        body = table.split("</table>")[0]
        header_cells = len(re.findall(r"<th[ >]", body.split("</tr>")[0]))
        for row in body.split("</tr>")[1:-1]:
            assert len(re.findall(r"<td[ >]", row)) == header_cells

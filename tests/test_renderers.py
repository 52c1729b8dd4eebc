"""Every analyze renderer, one shared report: each must carry every finding and escape log text."""

from __future__ import annotations

import io
import re
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from markdown_it import MarkdownIt

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.redact import Redactor
from dupfind.render.machine import JSONText, indented_json, write_json, write_json_items
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


def test_cached_terminal_report_decodes_its_worst_incidents_only(tmp_path, monkeypatch):
    """A warm terminal report decodes the findings it shows whole (their evidence too) and counts
    the others from the stored index, and prints what a run without the cache prints."""
    import shutil

    from typer.testing import CliRunner

    import dupfind.background
    import dupfind.result_cache
    from dupfind.cli import app

    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "synth" / "deploy-overlap" / "logs", logs)
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    assert runner.invoke(app, ["analyze", str(logs), "--format", "json"], catch_exceptions=False).exit_code == 0
    dupfind.background.wait()
    cold = runner.invoke(app, ["analyze", str(logs), "--no-cache", "--worst", "3"], catch_exceptions=False)
    decoded = []
    finding_of_line = dupfind.result_cache._finding_of_line

    def counting(line: bytes, evidence: bool):
        decoded.append(evidence)
        return finding_of_line(line, evidence)

    monkeypatch.setattr(dupfind.result_cache, "_finding_of_line", counting)
    warm = runner.invoke(app, ["analyze", str(logs), "--worst", "3"], catch_exceptions=False)
    dupfind.background.wait()
    assert warm.exit_code == cold.exit_code and warm.stdout == cold.stdout
    assert "Worst incidents (3 of" in warm.stdout
    assert decoded == [True, True, True]


def test_evidence_holds_each_distinct_text_once():
    """A 5M-line report holds a quarter of a million evidence records: each distinct path,
    worker, kind and name is one object among them (a new text per record took 592 bytes a
    record instead of 174), and an evidence record has no per-instance dict."""
    config = load_config(cwd=Path("/"))
    found = analyze(ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], config), config, load_rules(config))
    evidence = [e for f in found.findings for e in f.evidence]
    assert len(evidence) > 50
    for field in ("source", "worker", "kind", "name"):
        objects: dict[str, set[int]] = {}
        for e in evidence:
            value = getattr(e, field)
            if value is not None:
                objects.setdefault(value, set()).add(id(value))
        assert any(len(ids) == 1 for ids in objects.values())
        assert all(len(ids) == 1 for ids in objects.values()), field
    assert not hasattr(evidence[0], "__dict__")


# -- the JSON document written a finding at a time --------------------------------------------

_json_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | _json_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_json_text, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(head=st.dictionaries(_json_text.filter(lambda k: k != "items"), _json_values, max_size=4),
       items=st.lists(_json_values, max_size=5))
def test_items_written_one_at_a_time_make_the_document_write_json_makes(head, items):
    whole, streamed = io.BytesIO(), io.BytesIO()
    write_json({**head, "items": items}, whole)
    write_json_items({**head, "items": []}, "items", iter(items), streamed)
    assert streamed.getvalue() == whole.getvalue()


@settings(max_examples=200, deadline=None)
@given(value=_json_values, depth=st.integers(0, 4), items=st.lists(_json_values, max_size=3))
def test_a_value_given_as_json_text_is_written_as_the_value_itself(value, depth, items):
    """A part rendered once (a report's file entries, stored with its inputs) and given again as
    JSON text makes the same bytes as the value, at any depth of the document; redaction walks
    the value it holds."""
    def placed(v):
        doc = v
        for level in range(depth):
            doc = {"before": level, "part": doc, "after": [level]} if depth - level > 1 else {"part": doc}
        return doc
    whole, given = io.BytesIO(), io.BytesIO()
    write_json(placed(value), whole)
    write_json(placed(JSONText(indented_json(value, depth))), given)
    assert given.getvalue() == whole.getvalue()
    head = {"part": JSONText(indented_json(value, 1)), "items": []}
    streamed = io.BytesIO()
    write_json_items(head, "items", iter(items), streamed)
    whole = io.BytesIO()
    write_json({"part": value, "items": items}, whole)
    assert streamed.getvalue() == whole.getvalue()
    redactor = Redactor()
    assert redactor.tree({"part": JSONText(indented_json(value, 1))}) == redactor.tree({"part": value})


def test_a_json_text_is_redacted_as_the_value_it_holds():
    text = JSONText(indented_json([{"path": "/logs/jane.doe@example.com.log", "lines": 3}], 2))
    [entry] = Redactor().tree({"inputs": {"files": text}})["inputs"]["files"]
    assert "jane.doe@example.com" not in entry["path"] and entry["lines"] == 3


def test_items_are_written_only_as_the_last_key_of_the_document():
    with pytest.raises(ValueError):
        write_json_items({"items": [], "after": 1}, "items", [], io.BytesIO())
    with pytest.raises(ValueError):
        write_json_items({"items": [1]}, "items", [2], io.BytesIO())


@pytest.fixture(scope="module")
def pii_report():
    config = load_config(cwd=Path("/"))
    logs = FIXTURES / "scenarios" / "pii-order-confirmation" / "logs"
    return analyze(ingest([str(logs)], config), config, load_rules(config))


@pytest.mark.parametrize("redacted", [False, True])
def test_json_report_is_the_whole_document(pii_report, redacted):
    """The renderer writes findings one at a time; the bytes are those of the whole document
    dumped at once (redacted alike, with the same note of what was masked)."""
    report = pii_report

    def options() -> RenderOptions:
        return RenderOptions(redactor=Redactor() if redacted else None)

    streamed_options, whole_options = options(), options()
    streamed = io.BytesIO()
    RENDERERS["json"](report, streamed, streamed_options)
    doc = report.to_dict()
    whole = io.BytesIO()
    write_json(whole_options.redactor.tree(doc) if redacted else doc, whole)
    assert streamed.getvalue() == whole.getvalue()
    assert len(json.loads(streamed.getvalue())["findings"]) == len(report.findings) > 0
    if redacted:
        assert streamed_options.redactor.summary() is not None  # e-mail addresses were masked
        assert streamed_options.redactor.summary() == whole_options.redactor.summary()


def test_json_report_without_findings_is_the_whole_document(report):
    import dataclasses

    quiet = dataclasses.replace(report, findings=[])
    streamed, whole = io.BytesIO(), io.BytesIO()
    RENDERERS["json"](quiet, streamed, RenderOptions())
    write_json(quiet.to_dict(), whole)
    assert streamed.getvalue() == whole.getvalue()
    assert json.loads(streamed.getvalue())["findings"] == []


def test_terminal_deploy_windows_show_the_most_telling_first():
    """--max-rows N: the terminal report's N deploy windows with the most duplicates (then cut-short
    executions) in time order, and a line saying how many are left out; 0 shows every one."""
    import dataclasses

    config = load_config(cwd=Path("/"))
    overlap = analyze(ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], config), config, load_rules(config))
    template = overlap.summary["deploys"]["windows"][0]
    dups = [0, 7, 1, 7, 0, 3]
    windows = [{**template, "deploy": f"v{i}.0", "previous": f"v{i - 1}.0" if i else None, "duplicates": d,
                "interrupted": 10 - i, "start": f"2026-07-21T1{i}:00:00.000Z", "end": f"2026-07-21T1{i}:05:00.000Z"}
               for i, d in enumerate(dups)]
    report = dataclasses.replace(overlap, summary={**overlap.summary, "deploys": {**overlap.summary["deploys"],
                                                                               "windows": windows}})

    def drawn(max_rows: int) -> str:
        out = io.BytesIO()
        RENDERERS["table"](report, out, RenderOptions(width=160, max_rows=max_rows))
        section = out.getvalue().decode().split("Deploy windows")[1].split("Remediation checklist")[0]
        return section

    three = drawn(3)
    assert re.findall(r"^ ?(v\d\.0) ", three, re.MULTILINE) == ["v1.0", "v3.0", "v5.0"]  # 7, 7, 3 duplicates
    assert "3 of 5 with the most duplicates" in three and "… 2 more deploy windows" in three
    every = drawn(0)  # v0.0 replaces nothing and has no duplicate: not a window of the report
    assert re.findall(r"^ ?(v\d\.0) ", every, re.MULTILINE) == [w["deploy"] for w in windows[1:]]
    assert "more deploy windows" not in every


def test_terminal_incident_lists_its_evidence_below_its_facts():
    """Each worst incident's panel: its facts, then its evidence records across the panel's width
    (each record's time and file:line on the line it starts), or `evidence -` when it has none."""
    import dataclasses

    config = load_config(cwd=Path("/"))
    overlap = analyze(ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], config), config, load_rules(config))
    worst = next(f for f in overlap.findings if f.severity != "info")
    assert worst.evidence

    def drawn(report) -> list[str]:
        out = io.BytesIO()
        RENDERERS["table"](report, out, RenderOptions(width=160, worst=1))
        text = out.getvalue().decode()
        return text.split("Worst incidents")[1].split("╰")[0].splitlines()

    lines = drawn(overlap)
    start = next(i for i, line in enumerate(lines) if line.startswith("│ evidence"))
    assert any(line.startswith(("│ figures", "│ ids")) for line in lines[:start])
    records = [line for line in lines[start + 1:] if re.match(r"│\s+\d\d:\d\d:\d\d\.\d{3} ", line)]
    assert len(records) == min(len(worst.evidence), 10)
    for line, ev in zip(records, worst.evidence):
        assert ev.ts.strftime("%H:%M:%S.%f")[:-3] in line and f"{Path(ev.source).name}:{ev.line}" in line

    bare = dataclasses.replace(worst, evidence=[])
    lines = drawn(dataclasses.replace(overlap, findings=[bare if f is worst else f for f in overlap.findings]))
    assert any(line.startswith("│ evidence -") for line in lines)

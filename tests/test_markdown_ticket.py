"""`analyze --format markdown` is a ticket body: complete, true to the analysis, and inert on GitHub/GitLab."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES
from markdown_check import assert_renders_safely, github

SYNTH = FIXTURES / "synth"
SECTIONS = ["Impact", "Root cause", "Worst incident", "Remediation checklist", "Findings by rule", "How to reproduce"]
CITATION = re.compile(r"`([^`]+):(\d+)`")


def _ticket(cli, *args: str) -> str:
    proc = cli("analyze", *args, "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def _raw_line(source: str, line: int) -> str:
    return Path(source).read_text(encoding="utf-8").splitlines()[line - 1]


@pytest.mark.parametrize("preset", ["deploy-overlap", "visibility-timeout", "db-update-fails", "double-publish"])
def test_ticket_matches_the_analysis_and_the_answer_key(cli, preset):
    logs = str(SYNTH / preset / "logs")
    truth = json.loads((SYNTH / preset / "truth.json").read_text())
    analysis = orjson.loads(cli("analyze", logs, "--format", "json").stdout)
    ticket = _ticket(cli, logs)
    rendered = assert_renders_safely(ticket)

    title = ticket.splitlines()[0]
    assert title.startswith("# Duplicated side effects: ") and "\n" not in title
    assert [h for level, h in rendered.headings if level == 2] == SECTIONS
    duplicated = [a for a in truth["actions"] if a["duplicated"]]
    cause = truth["counters"]["duplicates_by_primary_cause"]
    main_cause = max(cause, key=cause.get)
    assert main_cause in analysis["root_causes"] and analysis["findings"][0]["cause"] == main_cause
    assert analysis["findings"][0]["cause_title"] in title

    # Impact: each duplicated side-effect type with its count, and the affected orders.
    by_type: dict[str, int] = {}
    for action in duplicated:
        by_type[action["side_effect"]] = by_type.get(action["side_effect"], 0) + 1
    impact = ticket.split("## Impact")[1].split("## Root cause")[0]
    for effect, count in by_type.items():
        assert f"{effect}: {count} action(s)" in impact
    orders = sorted({a["order_id"] for a in duplicated})
    assert f"Affected order\\_id: {len(orders)} (" in impact
    for order in orders[:10]:
        assert f"`{order}`" in impact

    # Root cause evidence and the worst incident's trace cite real lines.
    cited = CITATION.findall(ticket.split("## Remediation checklist")[0])
    assert len(cited) >= 5
    for source, line in cited:
        assert Path(source).is_file(), source
        _raw_line(source, int(line))
    evidence = rendered.tables[0]
    assert evidence[0] == ["time (UTC)", "where", "worker", "kind", "event", "what it shows"]
    for row in evidence[1:]:
        source, line = row[1].rsplit(":", 1)
        assert row[4] in _raw_line(source, int(line))
    trace_table = next(t for t in rendered.tables if t[0][-1] == "what happened")
    assert any("second provider request for the same idempotency key" in row[-1] for row in trace_table[1:])

    # Remediation: exactly the steps of the rules that fired above info.
    steps = {(f["rule"], step) for f in analysis["findings"] if f["severity"] != "info" for step in f["remediation"]}
    checklist = [line for line in ticket.splitlines() if line.startswith("- [ ] ")]
    assert len(checklist) == len(steps)
    text = "".join(github("\n".join(checklist)).text_outside_code)
    for rule, step in steps:
        assert f"{step} ({rule})" in text


def test_reproduce_commands_run_and_reproduce_the_ticket(cli):
    logs = str(SYNTH / "status-after-side-effect" / "logs")
    ticket = _ticket(cli, logs)
    block = ticket.split("```sh\n")[1].split("```")[0].strip().splitlines()
    analyze_cmd, trace_cmd = (shlex.split(line) for line in block)
    assert analyze_cmd[:2] == ["dupfind", "analyze"] and trace_cmd[:3] == ["dupfind", "trace", "--finding"]
    again = cli(*analyze_cmd[1:])
    assert again.returncode == 0 and again.stdout.decode() == ticket
    traced = cli(*trace_cmd[1:], "--format", "json")
    assert traced.returncode == 0, traced.stderr
    assert orjson.loads(traced.stdout)["traces"][0]["finding"]["fingerprint"] == trace_cmd[3]


def test_ticket_without_duplicates_says_so(cli):
    ticket = _ticket(cli, str(SYNTH / "visibility-timeout-control" / "logs"))
    assert_renders_safely(ticket)
    assert ticket.startswith("# No duplicated side effects found\n")
    assert "- Duplicated side effects: none" in ticket


def _hostile_logs(folder: Path) -> dict[str, str]:
    """A real lease-expiry duplicate whose log values try to inject Markdown, HTML, links and mentions."""
    hostile = {
        "message": "[click me](https://evil.example/phish) <img src=x onerror=alert(1)> "
                   "![t](http://evil.example/t.png) #1234 @oncall-team !42 ~bug www.evil.example ~~gone~~ $x^2$ "
                   "&lt;b&gt; **bold** `tick` <!-- c -->",
        "error": "a | b | c\n| --- | --- |\n<script>alert(1)</script>",
        "worker_a": "w1|<b>evil</b>|@admin",
        "worker_b": "w2 `x` [y](javascript:alert(1))",
        "provider": "sendgrid<script>x</script>",
    }
    folder.mkdir()
    lines_a, lines_b = [], []

    def rec(ts, event, worker, attempt, **fields):
        return json.dumps({"ts": f"2026-05-02T08:00:{ts}Z", "event": event, "job_id": "job-77",
                           "idempotency_key": "k-77", "worker": worker, "attempt": attempt, "queue": "mail", **fields})

    lines_a += [
        rec("00.000", "job_received", hostile["worker_a"], 1, visibility_timeout_s=30, message=hostile["message"]),
        rec("00.100", "provider_request", hostile["worker_a"], 1, side_effect="email", provider=hostile["provider"]),
        rec("45.000", "provider_response", hostile["worker_a"], 1, side_effect="email", status=202,
            error=hostile["error"]),
        rec("45.100", "status_updated", hostile["worker_a"], 1, status="sent"),
        rec("45.200", "job_acked", hostile["worker_a"], 1),
    ]
    lines_b += [
        rec("30.200", "job_received", hostile["worker_b"], 2, message=hostile["message"]),
        rec("30.400", "provider_request", hostile["worker_b"], 2, side_effect="email", provider=hostile["provider"]),
        rec("31.000", "provider_response", hostile["worker_b"], 2, side_effect="email", status=202),
        rec("31.100", "status_updated", hostile["worker_b"], 2, status="sent"),
        rec("31.200", "job_acked", hostile["worker_b"], 2),
    ]
    (folder / "a.log").write_text("\n".join(lines_a) + "\n")
    (folder / "b.log").write_text("\n".join(lines_b) + "\n")
    return hostile


@pytest.mark.parametrize("command", ["analyze", "trace"])
def test_log_text_cannot_inject_markdown(cli, tmp_path, command):
    hostile = _hostile_logs(tmp_path / "logs")
    args = ["job-77"] if command == "trace" else []
    proc = cli(command, *args, str(tmp_path / "logs"), "--format", "markdown", "--no-redact")
    assert proc.returncode == 0, proc.stderr
    ticket = proc.stdout.decode()
    rendered = assert_renders_safely(ticket)
    shown = "".join(rendered.text_outside_code) + "".join(c for t in rendered.tables for r in t for c in r)
    # The hostile text is there, literally, as text (with control characters shown as escapes).
    visible = shown.replace("\u2060", "")
    assert hostile["message"].split(" <img")[0] in visible
    assert hostile["worker_a"] in visible
    assert "a | b | c\\n| --- | --- |\\n<script>alert(1)</script>" in shown.replace("\u2060", "")

"""`analyze --baseline`: only findings whose fingerprints an earlier JSON run did not have."""

from __future__ import annotations

import orjson
import pytest

from conftest import FIXTURES

LOGS = str(FIXTURES / "synth" / "visibility-timeout" / "logs")


def _json(cli, *args):
    proc = cli("analyze", LOGS, "--format", "json", *args)
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_a_later_run_reports_only_what_is_new(cli, tmp_path):
    """During an incident: the first run saw the logs up to 10:01; the second sees all of them."""
    early = cli("analyze", LOGS, "--format", "json", "--until", "2026-07-21T10:01:00Z")
    assert early.returncode == 0, early.stderr
    baseline = tmp_path / "early.json"
    baseline.write_bytes(early.stdout)
    known = {f["fingerprint"] for f in orjson.loads(early.stdout)["findings"]}
    full_findings = _json(cli)["findings"]
    full = {f["fingerprint"] for f in full_findings}
    harmful_known = {f["fingerprint"] for f in full_findings if f["harmful"]} & known
    later = _json(cli, "--baseline", str(baseline))
    new = {f["fingerprint"] for f in later["findings"]}
    assert known and new, "the split must leave findings on both sides"
    assert new == full - known
    assert later["baseline"] == {
        "files": [str(baseline)], "known_fingerprints": len(known), "left_out": len(full & known),
        "left_out_harmful": len(harmful_known), "new": len(new),
    }
    harmful_new = {f["ids"]["job_id"][0] for f in later["findings"] if f["harmful"]}
    assert later["summary"]["duplicated_actions"] == len(harmful_new)


def test_nothing_new_exits_zero_even_with_fail_on(cli, tmp_path):
    baseline = tmp_path / "all.json"
    baseline.write_bytes(cli("analyze", LOGS, "--format", "json").stdout)
    assert cli("analyze", LOGS, "--fail-on", "high").returncode == 1
    proc = cli("analyze", LOGS, "--baseline", str(baseline), "--fail-on", "high", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = orjson.loads(proc.stdout)
    assert doc["findings"] == [] and doc["verdict"] == "no_harmful_duplicates"
    assert "no new side effect was executed more than once" in doc["verdict_reason"]
    assert "already in the baseline left out" in doc["verdict_reason"]
    ticket = cli("analyze", LOGS, "--baseline", str(baseline), "--format", "markdown").stdout.decode()
    assert ticket.startswith("# No new duplicated side effects since the baseline\n")


def test_ndjson_baselines_and_several_files_are_accepted(cli, tmp_path):
    lines = cli("analyze", LOGS, "--format", "ndjson").stdout.splitlines()
    first, second = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    first.write_bytes(b"\n".join(lines[:5]) + b"\n")
    second.write_bytes(b"\n".join(lines[5:10]) + b"\n")
    doc = _json(cli, "--baseline", str(first), "--baseline", str(second))
    left = {orjson.loads(line)["fingerprint"] for line in lines[10:]}
    assert {f["fingerprint"] for f in doc["findings"]} == left


@pytest.mark.parametrize("content,message", [
    (None, "cannot read the baseline"),
    (b"", "is empty"),
    (b"not json at all\n", "is not JSON"),
    (b'{"schema": "1.0", "verdict": "x"}', "holds no findings"),
    (b'{"findings": {"a": 1}}', "is not a list"),
    (b'{"findings": [{"rule": "DF101"}]}', "finding 1 of the baseline"),
    (b'{"findings": [{"fingerprint": "../../etc/passwd"}]}', "has no valid fingerprint"),
])
def test_invalid_baseline_is_one_line_exit_2(cli, tmp_path, content, message):
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_bytes(content)
    proc = cli("analyze", LOGS, "--baseline", str(path))
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert proc.stdout == b""

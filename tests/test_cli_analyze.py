"""`dupfind analyze` from the command line: formats, exit codes, fingerprints, error paths."""

from __future__ import annotations

import shutil

import orjson
import pytest

from conftest import FIXTURES

WRITEUP = FIXTURES / "scenarios" / "writeup-visibility-timeout" / "logs"
BENIGN = FIXTURES / "scenarios" / "benign-retries" / "logs"
DEPLOY = FIXTURES / "synth" / "deploy-overlap" / "logs"

FINDING_KEYS = {
    "fingerprint", "rule", "name", "severity", "harmful", "cause", "confidence", "ids", "workers",
    "deployments", "first_ts", "last_ts", "figures", "evidence",
}


@pytest.fixture(scope="module")
def deploy_json(tmp_path_factory):
    from conftest import run_cli

    proc = run_cli("analyze", str(DEPLOY), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def test_json_contract(deploy_json):
    doc = deploy_json
    assert doc["schema"] == "1.0"
    assert doc["verdict"] == "harmful_duplicates"
    assert {"files", "totals"} <= set(doc["inputs"])
    assert doc["inputs"]["totals"]["lines"] == sum(f["lines"] for f in doc["inputs"]["files"])
    assert doc["findings"]
    for finding in doc["findings"]:
        assert FINDING_KEYS <= set(finding)
        for key in ("job_id", "event_id", "idempotency_key"):
            assert key in finding["ids"]
        for ev in finding["evidence"]:
            assert {"ts", "source", "line", "worker", "kind", "name"} <= set(ev)
    harmful = [f for f in doc["findings"] if f["harmful"]]
    assert harmful and all(f["rule"] == "DF101" and f["cause"] and f["confidence"] for f in harmful)
    assert all(f["cause"] == "worker_killed" for f in harmful)
    assert doc["summary"]["duplicated_actions"] == len({tuple(f["ids"]["job_id"]) for f in harmful})


def test_ndjson_lines_are_the_same_findings(deploy_json):
    from conftest import run_cli

    proc = run_cli("analyze", str(DEPLOY), "--format", "ndjson")
    assert proc.returncode == 0
    lines = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert lines == deploy_json["findings"]


def test_fingerprints_are_stable_across_runs_and_input_order(tmp_path, deploy_json):
    from conftest import run_cli

    # Same logs, files renamed and listed in another order: same fingerprints.
    shuffled = tmp_path / "logs"
    shuffled.mkdir()
    for index, path in enumerate(sorted(DEPLOY.iterdir(), reverse=True)):
        shutil.copy(path, shuffled / f"{index:02d}-{path.name}")
    proc = run_cli("analyze", str(shuffled), "--format", "json")
    again = orjson.loads(proc.stdout)
    assert sorted(f["fingerprint"] for f in again["findings"]) == sorted(f["fingerprint"] for f in deploy_json["findings"])


def test_fail_on_threshold_sets_exit_code(cli):
    assert cli("analyze", str(WRITEUP), "--fail-on", "critical", "--format", "json").returncode == 1
    assert cli("analyze", str(WRITEUP), "--format", "json").returncode == 0
    # The benign system: a guarded lease expiry (low) and a guard hit (info), nothing at medium.
    benign = cli("analyze", str(BENIGN), "--fail-on", "medium", "--format", "json")
    assert benign.returncode == 0, [f["rule"] for f in orjson.loads(benign.stdout)["findings"]]
    assert cli("analyze", str(BENIGN), "--fail-on", "low", "--format", "json").returncode == 1


def test_disable_rule(cli):
    proc = cli("analyze", str(WRITEUP), "--disable", "DF103", "--disable", "ordering.side-effect-before-status", "--format", "json")
    rules = {f["rule"] for f in orjson.loads(proc.stdout)["findings"]}
    assert rules == {"DF101"}
    bad = cli("analyze", str(WRITEUP), "--disable", "DF999")
    assert bad.returncode == 2 and b"DF999" in bad.stderr and b"Traceback" not in bad.stderr


def test_config_overrides_rule_parameters_and_severity(cli, tmp_path):
    cfg = tmp_path / "dupfind.toml"
    cfg.write_text('[rules.DF101]\nseverity = "high"\n[rules]\ndisable = ["DF104"]\n')
    doc = orjson.loads(cli("analyze", str(WRITEUP), "--config", str(cfg), "--format", "json").stdout)
    assert {f["rule"] for f in doc["findings"]} == {"DF101", "DF103"}
    assert next(f for f in doc["findings"] if f["rule"] == "DF101")["severity"] == "high"
    cfg.write_text("[rules.DF101]\nbogus = 1\n")
    proc = cli("analyze", str(WRITEUP), "--config", str(cfg))
    assert proc.returncode == 2 and b"DF101.bogus" in proc.stderr


def test_markdown_and_table_and_output_file(cli, tmp_path):
    target = tmp_path / "ticket.md"
    proc = cli("analyze", str(WRITEUP), "--format", "markdown", "--output", str(target))
    assert proc.returncode == 0 and proc.stdout == b""
    text = target.read_text()
    assert text.startswith("# Duplicated side effects")
    assert "lease" in text and "incident-notes.log:" in text
    table = cli("analyze", str(WRITEUP))
    out = table.stdout.decode()
    assert "HARMFUL DUPLICATES FOUND" in out and "DF101" in out and "Remediation checklist" in out


def test_insufficient_evidence_when_no_side_effects_are_logged(cli, tmp_path):
    log = tmp_path / "worker.log"
    log.write_text("\n".join([
        "2026-07-21T10:00:00.000Z worker=a job_id=j1 event=job_received attempt=1",
        "2026-07-21T10:00:00.100Z worker=a job_id=j1 event=job_finished attempt=1",
        "2026-07-21T10:00:31.000Z worker=b job_id=j1 event=job_received attempt=2",
        "2026-07-21T10:00:31.100Z worker=b job_id=j1 event=job_finished attempt=2",
    ]) + "\n")
    doc = orjson.loads(cli("analyze", str(log), "--format", "json").stdout)
    assert doc["verdict"] == "insufficient_evidence"
    [finding] = [f for f in doc["findings"] if f["rule"] == "DF101"]
    assert not finding["harmful"] and finding["confidence"] == "possible"


def test_errors_are_one_line(cli, tmp_path):
    for args in (["analyze", "/no/such"], ["analyze", str(WRITEUP), "--skew", "-1"], ["analyze", str(WRITEUP), "--timeout", "q=abc"]):
        proc = cli(*args)
        assert proc.returncode == 2, args
        assert b"Traceback" not in proc.stderr and proc.stderr.count(b"\n") <= 3, proc.stderr


def test_stdout_is_clean_machine_output(cli):
    proc = cli("analyze", str(WRITEUP), "--format", "json")
    orjson.loads(proc.stdout)  # nothing but the document
    assert proc.stderr == b""


def test_max_rows_below_zero_is_one_clear_error(cli):
    proc = cli("analyze", str(DEPLOY), "--max-rows", "-1")
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().strip() == "dupfind: error: --max-rows must be 0 (every deploy window) or more."

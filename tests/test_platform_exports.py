"""One scenario, read as plain NDJSON and wrapped in each platform's export: the same findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from dupfind.analyze import analyze
from dupfind.ingest import ingest

import orjson

from conftest import FIXTURES
from platform_wrap import PLATFORMS, read_scenario, write_export
from truth_compare import CONFIG, RULES

SCENARIOS = ("visibility-timeout", "deploy-drain-control")


def _findings(path: Path):
    report = analyze(ingest([str(path)], CONFIG), CONFIG, RULES)
    findings = [
        (f.fingerprint, f.rule, f.severity, f.harmful, f.cause, tuple(f.workers), tuple(f.attempts))
        for f in report.findings
    ]
    return report, sorted(findings)


@pytest.fixture(scope="module", params=SCENARIOS)
def scenario(request):
    logs = FIXTURES / "synth" / request.param / "logs"
    report, findings = _findings(logs)
    return request.param, read_scenario(logs), report, findings


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_same_findings_in_every_export(scenario, platform: str, tmp_path: Path):
    name, files, plain, plain_findings = scenario
    write_export(files, platform, tmp_path)
    wrapped, wrapped_findings = _findings(tmp_path)
    totals = wrapped.inputs.totals()
    assert totals["rejected_total"] == 0 and totals["records"] == plain.inputs.totals()["records"], totals
    assert wrapped.verdict == plain.verdict
    assert wrapped_findings == plain_findings
    assert plain_findings, f"{name} must produce findings for the comparison to mean something"


def test_formats_names_the_export_and_where_each_column_came_from(cli):
    result = cli("formats", "--format", "json", str(FIXTURES / "formats" / "gcp-logging" / "logs"))
    assert result.returncode == 0, result.stderr
    files = {Path(f["path"]).name: f for f in orjson.loads(result.stdout)["files"]}
    sink = files["stdout-sink-20261129.json"]
    assert files["gcloud-read.json"]["format"] == "gcp-logging (json-document [])"
    assert sink["format"] == "gcp-logging"
    assert sink["fields"]["worker_id"] == ["envelope.resource.labels.pod_name"]
    assert sink["fields"]["ts"] == ["(envelope time)"]


def test_a_user_preset_in_rules_dir_reads_a_new_export_shape(cli, tmp_path):
    """Presets are data: a folder given with --rules adds a shape without code."""
    (tmp_path / "rules" / "presets").mkdir(parents=True)
    (tmp_path / "rules" / "presets" / "acme-audit.toml").write_text(
        'name = "acme-audit"\nkind = "json"\ninner = ["payload"]\n'
        '[detect]\nall = ["acme_ts", "payload", "node"]\n'
        '[fields]\nts = ["acme_ts"]\nworker_id = ["node"]\n'
    )
    log = tmp_path / "audit.jsonl"
    lines = [
        {"acme_ts": "2026-11-29T07:16:09.727Z", "node": "w-1", "payload": '{"event":"job_received","job_id":"J-1"}'},
        {"acme_ts": "2026-11-29T07:16:10.001Z", "node": "w-1", "payload": "job_id=J-1 event=job_acked"},
    ]
    log.write_text("".join(orjson.dumps(line).decode() + "\n" for line in lines))
    proc = cli("formats", "--format", "json", "--rules", str(tmp_path / "rules"), str(log))
    assert proc.returncode == 0, proc.stderr
    entry = orjson.loads(proc.stdout)["files"][0]
    assert entry["format"] == "acme-audit" and entry["records"] == 2 and entry["rejected"] == {}
    assert entry["fields"]["worker_id"] == ["envelope.node"]
    assert entry["fields"]["ts"] == ["(envelope time)"]
    assert entry["unmapped_events"] == {}


@pytest.mark.parametrize("text, words", [
    ('name = "Bad Name"\n', "name must be"),
    ('name = "x"\nkind = "xml"\n', "kind must be"),
    ('name = "x"\nkind = "text"\nline = "(unclosed"\n', "invalid regular expression"),
    ('name = "x"\n[detect]\nall = ["a"]\n[fields]\nwho = ["a"]\n', "'who' is not a canonical column"),
    ('name = "x"\n[detect\n', "not valid TOML"),
    ('name = "x"\ninner = ["a"]\ninner_lines_at = ["b"]\n[detect]\nall = ["a"]\n', "inner_lines_at needs inner_lines"),
    ('name = "x"\nkind = "text"\nline = "^(?P<inner>.*)$"\ninner_envelope = "celery"\n', "inner_envelope must name a JSON envelope"),
    ('name = "x"\nkind = "text"\nline = "^(?P<a>\\\\S+) (?P<inner>.*)$"\n[joined]\nwho = ["a", "b"]\n', "joined names 'b'"),
    ('name = "x"\nkind = "text"\nline = "^(?P<inner>.*)$"\njoined = ["a"]\n', "joined must be a table"),
    ('name = "x"\nkind = "text"\nline = "^(?P<msg>.*)$"\npairs = ["fields"]\n', "pairs names 'fields'"),
    ('name = "x"\nkind = "text"\nline = "^(?P<inner>.*)$"\nmultiline = { start = "^E" }\n', "multiline must be a table of two"),
    ('name = "x"\nkind = "text"\nline = "^(?P<inner>.*)$"\nmultiline = { start = "^E", end = "(" }\n', "multiline.end has an invalid"),
    ('name = "x"\nkind = "text"\nline = "^(?P<m>.*)$"\ncontinuation_fields = { who = "(?P<value>.)" }\n', "continuation_fields.who is not a canonical"),
    ('name = "x"\nkind = "text"\nline = "^(?P<m>.*)$"\ncontinuation_fields = { queue = "q=(.+)" }\n', "must hold a group named value"),
    ('name = "x"\nkind = "text"\nline = "^(?P<m>.*)$"\ncontinuation_fields = { queue = "(?P<value>" }\n', "continuation_fields.queue has an invalid"),
    ('name = "x"\nkind = "text"\nline = "^(?P<m>.*)$"\ncontinuation_fields = ["a"]\n', "continuation_fields must be a table"),
])
def test_a_bad_preset_is_a_one_line_error_naming_its_file(cli, tmp_path, text: str, words: str):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "broken.toml").write_text(text)
    proc = cli("formats", "--rules", str(tmp_path), str(FIXTURES / "formats" / "loki" / "logs"))
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2 and "\n" not in err and "Traceback" not in err
    assert "broken.toml" in err and words in err

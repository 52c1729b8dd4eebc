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

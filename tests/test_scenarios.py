"""Hand-written scenarios (fixtures/scenarios/<name>/) and the real-broker recordings that carry an
expected.json beside their truth (fixtures/real/<name>/): each states the findings it must and must
not produce."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules

from conftest import FIXTURES

CASES = [
    p for folder in ("scenarios", "real")
    for p in sorted((FIXTURES / folder).iterdir()) if (p / "expected.json").is_file()
]


def _case_id(case: Path) -> str:
    """The folder name plus the rules it exercises, so `pytest -k DF103` selects a rule's cases."""
    expected = json.loads((case / "expected.json").read_text())
    fire = sorted({w["rule"] for w in expected.get("must_fire", [])})
    quiet = sorted(set(expected.get("must_not_fire", [])))
    return f"{case.name}[fires:{'+'.join(fire) or 'none'}][quiet:{'+'.join(quiet) or 'none'}]"


def _run(case: Path):
    expected = json.loads((case / "expected.json").read_text())
    config = load_config(cwd=Path("/"))
    options = expected.get("options", {})
    result = ingest([str(case / "logs")], config)
    rejected: collections.Counter = collections.Counter()
    for report in result.files:
        rejected.update(report.rejected)
    report = analyze(
        result, config, load_rules(config),
        skew_s=options.get("skew", 0.5), max_jobs_per_value=options.get("max_jobs_per_value", 25),
    )
    return expected, report, dict(rejected)


def _matches(finding, want: dict) -> bool:
    for key, value in want.get("ids", {}).items():
        if value not in finding.ids.get(key, []):
            return False
    return True


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_scenario(case: Path):
    expected, report, rejected = _run(case)
    assert report.verdict == expected["verdict"], report.verdict_reason
    for want in expected.get("must_fire", []):
        found = [f for f in report.findings if f.rule == want["rule"] and _matches(f, want)]
        assert len(found) == want.get("count", 1), f"{want['rule']}: {[f.summary for f in found]}"
        for finding in found:
            for key in ("harmful", "cause", "confidence", "severity"):
                if key in want:
                    assert getattr(finding, key) == want[key], (want["rule"], key, getattr(finding, key))
            for key, value in want.get("figures", {}).items():
                assert finding.figures.get(key) == value, (want["rule"], key, finding.figures)
            assert finding.evidence, "a finding without evidence"
            for ev in finding.evidence:
                assert Path(ev.source).is_file() and ev.line >= 1
    for code in expected.get("must_not_fire", []):
        assert not [f for f in report.findings if f.rule == code], f"{code} fired: {[f.summary for f in report.findings if f.rule == code]}"
    if "harmful_actions" in expected:
        assert len({f.action_id for f in report.harmful}) == expected["harmful_actions"]
    if "rejected" in expected:  # every line parsed, blank or rejected: which were rejected, and why
        assert rejected == expected["rejected"]
    for text in expected.get("warnings_contain", []):
        assert any(text in w for w in report.warnings), report.warnings

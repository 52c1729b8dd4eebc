"""`analyze --baseline`: report only the findings whose fingerprints an earlier JSON run did not have."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import orjson

from dupfind.analyze import AnalysisReport, with_findings
from dupfind.errors import DupfindError

_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
_HOW = "give the output of `dupfind analyze --format json` (or ndjson)"


def _documents(path: Path) -> list:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DupfindError(f"cannot read the baseline {path}: {exc.strerror or exc}.") from None
    if not data.strip():
        raise DupfindError(f"the baseline {path} is empty: {_HOW}.")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return [orjson.loads(line) for line in data.splitlines() if line.strip()]
        except orjson.JSONDecodeError:
            raise DupfindError(f"the baseline {path} is not JSON: {_HOW}.") from None
    if isinstance(doc, dict) and "findings" in doc:
        if not isinstance(doc["findings"], list):
            raise DupfindError(f"the baseline {path} has a 'findings' entry that is not a list: {_HOW}.")
        return doc["findings"]
    if isinstance(doc, dict) and "fingerprint" in doc:
        return [doc]
    if isinstance(doc, list):
        return doc
    raise DupfindError(f"the baseline {path} holds no findings: {_HOW}.")


def load_fingerprints(path: Path) -> set[str]:
    """The fingerprints of every finding in an earlier `analyze --format json|ndjson` output."""
    fingerprints = set()
    for n, finding in enumerate(_documents(path), start=1):
        value = finding.get("fingerprint") if isinstance(finding, dict) else None
        if not isinstance(value, str) or not _FINGERPRINT.fullmatch(value):
            raise DupfindError(f"finding {n} of the baseline {path} has no valid fingerprint: {_HOW}.")
        fingerprints.add(value)
    return fingerprints


def apply_baseline(report: AnalysisReport, paths: list[Path]) -> AnalysisReport:
    """Leave out the findings known from the baseline files; say how many."""
    known: set[str] = set()
    for path in paths:
        known |= load_fingerprints(path)
    new = [f for f in report.findings if f.fingerprint not in known]
    left_out = [f for f in report.findings if f.fingerprint in known]
    result = with_findings(report, new)
    result.baseline = {
        "files": [str(p) for p in paths], "known_fingerprints": len(known), "left_out": len(left_out),
        "left_out_harmful": sum(1 for f in left_out if f.harmful), "new": len(new),
    }
    if left_out:
        reason = result.verdict_reason.rstrip(".")
        if result.verdict == "no_harmful_duplicates" and any(f.harmful for f in left_out):
            reason = "no new side effect was executed more than once"
        reason += f" ({len(left_out)} finding(s) already in the baseline left out)."
        result = replace(result, verdict_reason=reason)
    return result

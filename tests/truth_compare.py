"""Compare an analysis with an answer key (truth.json from synth or a real-broker recording)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dupfind.analyze import AnalysisReport, analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules

LINK = ("job_id", "event_id", "idempotency_key")
CONFIG = load_config(cwd=Path("/"))
RULES = load_rules(CONFIG)


def _unsettled(action: dict) -> bool:
    """An execution sent the provider request and ended before logging an answer, and the provider
    in fact did nothing (an error the worker never lived to log): from the logs the request is
    uncertain, so a second send is a likely duplicate, not a certain one."""
    return any(
        e["provider_request"] and not e["side_effect"] and e["outcome"] in ("killed", "provider_timeout")
        for e in action["executions"]
    )


def _keys(ids: dict) -> frozenset[str]:
    return frozenset(f"{k}={v}" for k in LINK for v in ids.get(k, []))


@dataclass
class Comparison:
    """Which truth actions dupfind flagged as harmful duplicates, and where it disagreed."""

    report: AnalysisReport
    truth: dict
    missed: list[dict] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)
    wrong_cause: list[tuple[dict, str]] = field(default_factory=list)
    flagged: int = 0
    unsettled: int = 0  # likely duplicates the logs cannot settle (see _unsettled), not false alarms

    def describe(self) -> str:
        parts = []
        for action in self.missed[:5]:
            parts.append(f"missed {action['ids'].get('job_id')} causes={action.get('causes')}")
        parts += [f"false alarm: {s}" for s in self.false_alarms[:5]]
        for action, cause in self.wrong_cause[:5]:
            parts.append(f"cause for {action['ids'].get('job_id')}: got {cause}, truth {action.get('causes')}")
        return "; ".join(parts)


def truth_of(folder: Path) -> dict:
    """A recording's or simulation's truth.json."""
    return orjson.loads((folder / "truth.json").read_bytes())


def analyze_logs(logs: Path) -> AnalysisReport:
    """The analysis of a folder of logs with the default configuration and rules."""
    return analyze(ingest([str(logs)], CONFIG), CONFIG, RULES)


def duplicates_with_their_actions(folder: Path) -> list[tuple[Any, dict]]:
    """A recording's DF101 findings, each with the duplicated action of truth.json its
    idempotency key names (a finding whose key names no duplicated action fails)."""
    by_key = {a["ids"]["idempotency_key"][0]: a for a in truth_of(folder)["actions"] if a["duplicated"]}
    duplicates = [f for f in analyze_logs(folder / "logs").findings if f.rule == "DF101"]
    assert {f.ids["idempotency_key"][0] for f in duplicates} == set(by_key)
    return [(f, by_key[f.ids["idempotency_key"][0]]) for f in duplicates]


def cited_lines(finding: Any, kind: str = "publish") -> set[tuple[str, int]]:
    """The records of one kind a finding cites, as (file name, line)."""
    return {(Path(e.source).name, e.line) for e in finding.evidence if e.kind == kind}


def analyze_folder(folder: Path) -> tuple[AnalysisReport, dict]:
    return analyze_logs(folder / "logs"), truth_of(folder)


def compare(folder: Path, primary_cause: bool = True) -> Comparison:
    report, truth = analyze_folder(folder)
    comparison = Comparison(report, truth)
    actions = truth["actions"]
    # An id of one action only: a batch's message id (one task for several actions) names none.
    owners: dict = {}
    for position, action in enumerate(actions):
        for key in _keys(action["ids"]):
            owners.setdefault(key, set()).add(position)
    index = {key: next(iter(found)) for key, found in owners.items() if len(found) == 1}
    hit: set[int] = set()
    for finding in report.findings:
        if finding.rule != "DF101" or not finding.harmful:
            continue
        comparison.flagged += 1
        positions = {index[k] for k in _keys(finding.ids) if k in index}
        duplicated = [p for p in positions if actions[p]["duplicated"]]
        if not duplicated:
            if finding.figures.get("duplicate_confidence") == "likely" and any(_unsettled(actions[p]) for p in positions):
                comparison.unsettled += 1  # the logs cannot tell; "likely" is the honest answer
                continue
            comparison.false_alarms.append(f"{finding.summary} {finding.ids.get('job_id')}")
            continue
        action = actions[duplicated[0]]
        hit.add(duplicated[0])
        causes = action.get("causes") or []
        expected_ok = finding.cause == causes[0] if primary_cause else finding.cause in causes
        if causes and not expected_ok:
            comparison.wrong_cause.append((action, finding.cause))
    comparison.missed = [a for p, a in enumerate(actions) if a["duplicated"] and p not in hit]
    return comparison

"""Markdown ticket body of `dupfind analyze`: paste it into the incident ticket as is."""

from __future__ import annotations

import re
import shlex
from collections import Counter

from dupfind.analyze import AnalysisReport
from dupfind.findings import CAUSE_TITLES, Finding
from dupfind.render.safe import safe_str

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md(value: object, limit: int | None = 200) -> str:
    """Inline text from logs: control characters escaped, Markdown/HTML specials backslashed."""
    return _MD_SPECIAL.sub(r"\\\1", safe_str(value, limit))


def code(value: object, limit: int | None = 120) -> str:
    """An inline code span that a backtick in the value cannot break."""
    text = safe_str(value, limit).replace("`", "'")
    return f"`{text}`" if text else "` `"


def _evidence_block(finding: Finding, limit: int = 12) -> list[str]:
    rows = ["| time (UTC) | where | worker | kind | event | note |", "| --- | --- | --- | --- | --- | --- |"]
    for ev in finding.evidence[:limit]:
        rows.append(
            f"| {ev.ts.strftime('%H:%M:%S.%f')[:-3]} | {code(f'{ev.source}:{ev.line}')} | {md(ev.worker or '-', 60)} "
            f"| {ev.kind} | {md(ev.name or '', 60)} | {md(ev.note or '', 80)} |"
        )
    return rows


def _title(report: AnalysisReport) -> str:
    if report.verdict == "harmful_duplicates":
        by_effect = report.summary["duplicates_by_side_effect"]
        effects = ", ".join(f"{n} {e}" for e, n in by_effect.items())
        causes = report.root_causes()
        cause = CAUSE_TITLES.get(next(iter(causes)), "unknown") if causes else "unknown"
        return f"Duplicated side effects: {effects} ({report.summary['duplicated_actions']} actions), main cause: {cause}"
    if report.verdict == "insufficient_evidence":
        return "Possible duplicated side effects: the logs cannot settle it"
    return "No duplicated side effects found"


def render_markdown(report: AnalysisReport, command: list[str] | None = None) -> str:
    s = report.summary
    totals = report.inputs.totals()
    lines = [f"# {md(_title(report), None)}", ""]
    lines += [f"**Verdict:** `{report.verdict}`: {md(report.verdict_reason, None)}", ""]
    lines += ["## Impact", ""]
    lines += [
        f"- Time span: {s['first_ts']} to {s['last_ts']} (UTC)",
        f"- Actions: {s['actions']:,}; executions: {s['executions']:,}; side-effect requests: {s['side_effect_requests']:,}",
        f"- Actions with a duplicated side effect: **{s['duplicated_actions']}** "
        f"({s['duplicated_side_effects']} extra side effects)",
    ]
    for effect, n in s["duplicates_by_side_effect"].items():
        lines.append(f"  - {md(effect)}: {n} action(s)")
    entities = Counter()
    for f in report.harmful:
        for key in ("order_id", "user_id", "notification_id"):
            entities[key] += len(f.ids.get(key, []))
    if any(entities.values()):
        lines.append("- Affected entities: " + ", ".join(f"{n} {k}" for k, n in entities.items() if n))
    lines.append(f"- Inputs: {totals['files']} file(s), {totals['records']:,} records, {totals['rejected_total']:,} rejected lines")
    lines.append("")

    causes = report.root_causes()
    if causes:
        lines += ["## Root cause", "", "| cause | duplicated actions |", "| --- | --- |"]
        for cause, n in causes.items():
            lines.append(f"| {CAUSE_TITLES.get(cause, cause)} | {n} |")
        lines.append("")
    worst = next((f for f in report.findings if f.harmful), None) or next(
        (f for f in report.findings if f.severity != "info"), None
    )
    if worst is not None:
        lines += [f"## Worst incident: {worst.rule} {md(worst.name)}", ""]
        lines.append(f"- What: {md(worst.summary, None)}")
        if worst.cause:
            detail = f": {md(worst.cause_detail, None)}" if worst.cause_detail else ""
            lines.append(f"- Cause: **{CAUSE_TITLES.get(worst.cause, worst.cause)}** ({worst.confidence}){detail}")
        ids = "; ".join(f"{k}: {', '.join(code(v) for v in vals[:4])}" for k, vals in worst.ids.items() if vals)
        lines.append(f"- Ids: {ids}")
        lines.append(f"- Workers: {', '.join(code(w) for w in worst.workers) or '-'}")
        if worst.deployments:
            lines.append(f"- Deployments: {', '.join(code(d) for d in worst.deployments)}")
        lines.append(f"- Fingerprint: `{worst.fingerprint}`")
        lines += ["", "Evidence:", ""] + _evidence_block(worst) + [""]

    counts = Counter(f.rule for f in report.findings)
    if counts:
        lines += ["## Findings by rule", "", "| rule | name | findings | harmful |", "| --- | --- | --- | --- |"]
        harmful = Counter(f.rule for f in report.harmful)
        for rule in report.rules:
            if counts.get(rule.code):
                lines.append(f"| {rule.code} | {rule.name} | {counts[rule.code]} | {harmful.get(rule.code, 0)} |")
        lines.append("")

    fired = [r for r in report.fired_rules() if any(f.rule == r.code and f.severity != "info" for f in report.findings)]
    if fired:
        lines += ["## Remediation checklist", ""]
        for rule in fired:
            for step in rule.remediation:
                lines.append(f"- [ ] {md(step, None)} ({rule.code})")
        lines.append("")

    lines += ["## How to reproduce", ""]
    shown = " ".join(shlex.quote(a) for a in (command or ["dupfind", "analyze", "LOGS..."]))
    lines += ["```sh", shown.replace("```", "'''"), "```"]
    if worst is not None:
        lines += ["", f"Trace the worst incident: `dupfind trace {safe_str(next(iter(v for v in worst.ids.values() if v), ['?'])[0]).replace('`', chr(39))} LOGS...`"]
    if report.warnings:
        lines += ["", "## Warnings", ""] + [f"- {md(w, None)}" for w in report.warnings]
    return "\n".join(lines) + "\n"

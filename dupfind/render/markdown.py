"""Markdown ticket body of `dupfind analyze`: paste it into the incident ticket as is."""

from __future__ import annotations

import dataclasses
import shlex
from collections import Counter
from typing import TYPE_CHECKING, Any

from dupfind import __version__
from dupfind.findings import CAUSE_TITLES, Finding
from dupfind.render.md_text import code, md, table
from dupfind.render.safe import safe_str

if TYPE_CHECKING:
    from dupfind.analyze import AnalysisReport

ENTITY_KEYS = ("order_id", "user_id", "notification_id", "delivery_id", "tenant_id")
ENTITIES_LISTED = 10
EXCERPT_ROWS = 8
TRACE_ROWS = 40


def _title(report: AnalysisReport) -> str:
    s = report.summary
    if report.verdict == "harmful_duplicates":
        effects = ", ".join(f"{n} {e}" for e, n in s["duplicates_by_side_effect"].items())
        causes = report.root_causes()
        cause = CAUSE_TITLES.get(next(iter(causes)), "unknown") if causes else "unknown"
        actions = s["duplicated_actions"]
        return f"Duplicated side effects: {effects} ({actions} action{'s' if actions != 1 else ''}); main cause: {cause}"
    if report.verdict == "insufficient_evidence":
        return "Possible duplicated side effects: the logs cannot settle it"
    if report.baseline is not None:
        return "No new duplicated side effects since the baseline"
    return "No duplicated side effects found"


def _worst(report: AnalysisReport) -> Finding | None:
    return next((f for f in report.findings if f.harmful), None) or next(
        (f for f in report.findings if f.severity != "info"), None
    )


def _impact(report: AnalysisReport) -> list[str]:
    from dupfind.render.trace_view import clock

    s = report.summary
    totals = report.inputs.totals()
    lines = ["## Impact", ""]
    harmful = report.harmful
    if harmful:
        by_type = ", ".join(f"{md(e)}: {n} action(s)" for e, n in s["duplicates_by_side_effect"].items())
        lines.append(f"- Duplicated side effects: **{s['duplicated_side_effects']} extra** over "
                     f"**{s['duplicated_actions']} action(s)** ({by_type})")
        business = (*ENTITY_KEYS, *(report.context.config.business_keys if report.context else ()))
        for key in dict.fromkeys(business):
            values = sorted({v for f in harmful for v in f.ids.get(key, [])})
            if values:
                listed = ", ".join(code(v, 60) for v in values[:ENTITIES_LISTED])
                more = f" and {len(values) - ENTITIES_LISTED} more" if len(values) > ENTITIES_LISTED else ""
                lines.append(f"- Affected {md(key)}: {len(values)} ({listed}{more})")
        first = min(f.first_ts for f in harmful if f.first_ts)
        last = max(f.last_ts for f in harmful if f.last_ts)
        lines.append(f"- Duplicated actions between {first.strftime('%Y-%m-%d')} {clock(first)} and "
                     f"{last.strftime('%Y-%m-%d')} {clock(last)} UTC")
        workers = sorted({w for f in harmful for w in f.workers})
        deployments = sorted({d for f in harmful for d in f.deployments})
        lines.append(f"- Workers involved: {len(workers)}" + (
            f"; deployments: {', '.join(code(d, 40) for d in deployments[:8])}" if deployments else ""))
    else:
        lines.append("- Duplicated side effects: none")
    lines.append(f"- Logs: {totals['files']} file(s), {totals['records']:,} records, "
                 f"{totals['rejected_total']:,} rejected lines, {s['first_ts']} to {s['last_ts']}; "
                 f"{s['actions']:,} actions, {s['executions']:,} executions, "
                 f"{s['side_effect_requests']:,} side-effect requests")
    if report.baseline is not None:
        b = report.baseline
        files = ", ".join(code(p) for p in b["files"])
        lines.append(f"- Baseline: {b['left_out']} finding(s) already known from {files} left out; {b['new']} new")
    return lines + [""]


def _evidence_excerpt(finding: Finding) -> list[str]:
    """The few records that prove the cause: those the attribution annotated, else the first ones."""
    from dupfind.render.trace_view import clock

    rows = [e for e in finding.evidence if e.note] or finding.evidence
    cells = [
        [clock(e.ts), code(f"{e.source}:{e.line}", 160, cell=True), code(e.worker, 60, cell=True), md(e.kind),
         code(e.name, 60, cell=True), md(e.note or "", 120)]
        for e in rows[:EXCERPT_ROWS]
    ]
    return table(["time (UTC)", "where", "worker", "kind", "event", "what it shows"], cells)


def _root_cause(report: AnalysisReport, worst: Finding | None, full: AnalysisReport) -> list[str]:
    """The main cause and the evidence of one finding of it (read from `full`, the report whose
    findings carry their evidence)."""
    causes = report.root_causes()
    if not causes and worst is None:
        return []
    lines = ["## Root cause", ""]
    if causes:
        main = next(iter(causes))
        total = sum(causes.values())
        lines.append(f"**{md(CAUSE_TITLES.get(main, main))}** in {causes[main]} of {total} duplicated action(s).")
        example = next((f for f in report.harmful if (f.cause or "unknown") == main), None)
        if example is not None and example.cause_detail:
            detail = md(example.cause_detail, None)
            lines += ["", f"In {code(example.fingerprint)} ({md(example.confidence)}): {detail}."]
        if len(causes) > 1:
            rows = [[md(CAUSE_TITLES.get(c, c)), str(n)] for c, n in causes.items()]
            lines += [""] + table(["cause", "duplicated actions"], rows)
    else:
        example = worst
        lines.append(md(worst.summary, None))
    if example is not None:
        example = next(iter(full.findings_where(
            lambda rule, fingerprint: (rule, fingerprint) == (example.rule, example.fingerprint))), example)
    if example is not None and example.evidence:
        lines += ["", "Evidence:", ""] + _evidence_excerpt(example)
    return lines + [""]


def _worst_trace(report: AnalysisReport, worst: Finding | None, trace_finding=None) -> list[str]:
    """The worst finding's trace (`report`: the cached analysis that keeps it, when it is one)."""
    from dupfind.render.trace_view import trace_markdown_block
    from dupfind.trace import finding_trace

    if worst is None or worst.action_id is None:
        return []
    if report.context is not None:
        trace = finding_trace(report.context, report, worst)
    elif trace_finding is not None:
        trace = trace_finding(worst)
    else:
        return []
    if trace is None:
        return []
    trace.finding = worst
    lines = ["## Worst incident", ""]
    if worst.cause:
        lines += [f"Cause: **{md(CAUSE_TITLES.get(worst.cause, worst.cause))}** ({md(worst.confidence)})", ""]
    return lines + trace_markdown_block(trace, TRACE_ROWS, heading="###") + [""]


def _findings_by_rule(report: AnalysisReport) -> list[str]:
    counts = Counter(f.rule for f in report.findings)
    if not counts:
        return []
    harmful = Counter(f.rule for f in report.harmful)
    rows = [[r.code, md(r.name), md(r.title, 120), str(counts[r.code]), str(harmful.get(r.code, 0))]
            for r in report.rules if counts.get(r.code)]
    return ["## Findings by rule", ""] + table(["rule", "name", "what", "findings", "harmful"], rows) + [""]


def _remediation(report: AnalysisReport) -> list[str]:
    fired = [r for r in report.fired_rules() if any(f.rule == r.code and f.severity != "info" for f in report.findings)]
    if not fired:
        return []
    lines = ["## Remediation checklist", ""]
    for rule in fired:
        for step in report.steps_of(rule):
            lines.append(f"- [ ] {md(step, None)} ({rule.code})")
    return lines + [""]


def _shell(args: list[str]) -> str:
    return " ".join(shlex.quote(safe_str(a)) for a in args).replace("```", "'''")


def _reproduce(report: AnalysisReport, worst: str | None, command: list[str], paths: list[str]) -> list[str]:
    """The commands that give this ticket again (`worst`: the fingerprint of the finding traced)."""
    inputs = paths or sorted({f.path for f in report.inputs.files}) or ["LOGS..."]
    lines = ["## How to reproduce", "", "```sh", _shell(command or ["dupfind", "analyze", *inputs])]
    if worst is not None:
        lines.append(_shell(["dupfind", "trace", "--finding", worst, *inputs]))
    lines += ["```", ""]
    return lines


def ticket_parts(report: AnalysisReport, redacted: bool = False, trace_finding=None) -> dict[str, Any]:
    """The ticket body but its "How to reproduce" section, which names the command line: the
    lines before it (`head`) and after it (`tail`), and the fingerprint of the worst finding it
    traces (`worst`). Log values are masked as they are drawn (render.safe.redacting): a command
    that follows `analyze` draws the ticket from the parts that analyze drew (MARKDOWN_VALUE)."""
    from dupfind.trace import TRACE_READS

    full = report
    if report.context is not None:  # the worst incident's trace, while the findings are decoded
        report.context.read_ahead(*TRACE_READS)
    # The report shows the evidence of one finding: the others are read without it (a cached
    # report then decodes none of theirs), and that one is read whole by _root_cause.
    report = dataclasses.replace(report, findings=report.findings_without_evidence())
    worst = _worst(report)
    head = [f"# {md(_title(report), None)}", ""]
    head += [f"**Verdict:** `{report.verdict}`: {md(report.verdict_reason, None)}", ""]
    head += _impact(report)
    head += _root_cause(report, worst, full)
    head += _worst_trace(full, worst, trace_finding)
    head += _remediation(report)
    head += _findings_by_rule(report)
    tail = []
    if report.warnings:
        tail += ["## Warnings", ""] + [f"- {md(w, None)}" for w in report.warnings] + [""]
    note = "; personal data and secrets in log values are masked (`--no-redact` keeps them)" if redacted else ""
    tail.append(f"*Written by dupfind {__version__}{note}.*")
    return {"head": head, "tail": tail, "worst": worst.fingerprint if worst is not None else None}


def render_markdown(report: AnalysisReport, command: list[str] | None = None, paths: list[str] | None = None,
                    redacted: bool = False, trace_finding=None, parts: dict[str, Any] | None = None) -> str:
    """The ticket body; `trace_finding` traces the worst finding of a report without a context;
    `parts`: its ticket_parts, drawn before."""
    parts = parts if parts is not None else ticket_parts(report, redacted, trace_finding)
    lines = [*parts["head"], *_reproduce(report, parts["worst"], command or [], paths or []), *parts["tail"]]
    return "\n".join(lines) + "\n"

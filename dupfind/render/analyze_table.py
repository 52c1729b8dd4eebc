"""Terminal report of `dupfind analyze`: verdict, findings by rule, worst incidents, causes, fixes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dupfind.analyze import AnalysisReport
from dupfind.findings import CAUSE_TITLES, Finding
from dupfind.render.ranking import most_telling
from dupfind.render.safe import safe_text

SEVERITY_STYLE = {"critical": "bold red", "high": "red", "medium": "yellow", "low": "cyan", "info": "dim"}
VERDICT_STYLE = {
    "harmful_duplicates": ("HARMFUL DUPLICATES FOUND", "bold white on red"),
    "no_harmful_duplicates": ("NO HARMFUL DUPLICATES", "bold white on green"),
    "insufficient_evidence": ("INSUFFICIENT EVIDENCE", "bold black on yellow"),
}


def _inputs_line(report: AnalysisReport) -> Text:
    totals = report.inputs.totals()
    summary = report.summary
    text = Text()
    text.append(f"{totals['files']} file(s), {totals['records']:,} records")
    if totals["rejected_total"]:
        text.append(f", {totals['rejected_total']:,} lines rejected", style="yellow")
    if summary["first_ts"]:
        text.append(f", {summary['first_ts']} → {summary['last_ts']}")
    text.append(f"\n{summary['actions']:,} actions, {summary['executions']:,} executions on {summary['workers']} workers, "
                f"{summary['side_effect_requests']:,} side-effect requests")
    return text


def _evidence_table(finding: Finding, limit: int = 10) -> Table:
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_header=False)
    table.add_column("ts", no_wrap=True, style="dim")
    table.add_column("kind", no_wrap=True)
    table.add_column("event", overflow="fold", ratio=2)
    table.add_column("worker", overflow="fold", ratio=2)
    table.add_column("where", overflow="fold", style="blue", ratio=2)
    for ev in finding.evidence[:limit]:
        name = safe_text(ev.name or "", limit=48)
        if ev.note:
            name.append(f" ← {ev.note}", style="magenta")
        table.add_row(
            ev.ts.strftime("%H:%M:%S.%f")[:-3], ev.kind, name, safe_text(ev.worker or "-", limit=40),
            safe_text(f"{Path(ev.source).name}:{ev.line}"),
        )
    return table


def _incident(finding: Finding) -> Panel:
    parts = Table.grid(padding=(0, 1))
    parts.add_column(style="bold", no_wrap=True)
    parts.add_column(overflow="fold")
    parts.add_row("what", safe_text(finding.summary))
    if finding.cause:
        cause = Text(f"{CAUSE_TITLES.get(finding.cause, finding.cause)} ({finding.confidence})", style="bold")
        if finding.cause_detail:
            cause.append_text(safe_text(f": {finding.cause_detail}"))
        parts.add_row("cause", cause)
    ids = ", ".join(f"{k}={'/'.join(v[:3])}" for k, v in finding.ids.items() if v)
    parts.add_row("ids", safe_text(ids, limit=300))
    parts.add_row("workers", safe_text(", ".join(finding.workers) or "-"))
    if finding.deployments:
        parts.add_row("deploys", safe_text(", ".join(finding.deployments)))
    figures = ", ".join(f"{k}={v}" for k, v in finding.figures.items() if v is not None)
    if figures:
        parts.add_row("figures", safe_text(figures))
    title = Text(f"{finding.rule} {finding.name} ", style=SEVERITY_STYLE.get(finding.severity, ""))
    title.append(f"[{finding.severity}] {finding.fingerprint}", style="dim")
    # The evidence below the facts, across the panel's width, rather than a table in the facts'
    # grid: its records fold less, and rich measures a table inside a table's cell several times
    # over (five incidents took 0.17 s to draw instead of 0.10-0.12 s).
    evidence = Group(Text("evidence", style="bold"), Padding(_evidence_table(finding), (0, 0, 0, 2))) \
        if finding.evidence else Text("evidence -", style="bold")
    return Panel(Group(parts, evidence), title=title, title_align="left", box=box.ROUNDED)


def _deploy_section(report: AnalysisReport, console: Console, max_rows: int = 0) -> None:
    """Deploy windows and how duplicates concentrate in them (only when a deploy was found);
    `max_rows`: at most that many windows, those with the most duplicates (0: every one)."""
    deploys = report.summary.get("deploys") or {}
    every = [w for w in deploys.get("windows", []) if w["previous"] or w["duplicates"]]
    if not every:
        return
    windows = most_telling(every, max_rows, ("duplicates", "interrupted", "work_after_stop", "overlap_s"))
    title = "Deploy windows" + (f", {len(windows)} of {len(every)} with the most duplicates" if len(windows) < len(every) else "")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name, justify in (("deploy", "left"), ("window (UTC)", "left"), ("overlap", "right"), ("after stop", "right"),
                          ("cut short", "right"), ("duplicates", "right")):
        table.add_column(name, justify=justify, overflow="fold")
    for w in windows:
        span = f"{w['start'][11:19]} → {w['end'][11:19]}"
        label = safe_text(w["deploy"] + (f" (from {w['previous']})" if w["previous"] else ""))
        table.add_row(label, span, f"{w['overlap_s']:.0f} s", str(w["work_after_stop"]), str(w["interrupted"]),
                      str(w["duplicates"]))
    console.print(table)
    if len(windows) < len(every):
        console.print(Text(
            f"  … {len(every) - len(windows)} more deploy windows with fewer duplicates: --max-rows 0 shows every one, "
            "`dupfind timeline` draws each, --format json lists them.", style="dim",
        ))
    concentration = deploys.get("concentration") or {}
    if concentration.get("headline"):
        console.print(safe_text(concentration["headline"], style="bold"))
    dups = concentration.get("duplicates") or {}
    if dups.get("total"):
        rate = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        console.print(Text(
            f"duplicates per minute: {rate(dups['per_minute_inside'])} inside deploy windows "
            f"({dups['inside']} in {dups['inside_minutes']:.1f} min, {deploys['tail_s']:.0f} s redelivery tail included), "
            f"{rate(dups['per_minute_outside'])} outside ({dups['outside']} in {dups['outside_minutes']:.1f} min)"
        ))


def render_table(report: AnalysisReport, console: Console, worst: int = 5, max_rows: int = 0) -> None:
    """The terminal report: `worst` incidents in detail, at most `max_rows` deploy windows (0: all)."""
    # The findings are counted from their index (a cached report decodes none for it); only the
    # worst few are read whole, with their evidence.
    index = report.finding_index()
    console.print(Text("dupfind analyze", style="bold"))
    console.print(_inputs_line(report))
    label, style = VERDICT_STYLE[report.verdict]
    verdict = Text(f" {label} ", style=style)
    verdict.append(f"  {report.verdict_reason}")
    console.print(verdict)
    for warning in report.warnings:
        console.print(safe_text(f"warning: {warning}", style="yellow"))
    if not index:
        console.print(Text("No findings.", style="green"))
        return

    counts = Counter(f.rule for f in index)
    harmful = Counter(f.rule for f in index if f.harmful)
    by_rule = Table(title="Findings by rule", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    by_rule.add_column("rule", no_wrap=True)
    by_rule.add_column("name", overflow="fold")
    by_rule.add_column("severity", no_wrap=True)
    by_rule.add_column("findings", justify="right")
    by_rule.add_column("harmful", justify="right")
    for rule in report.rules:
        if counts.get(rule.code):
            severities = Counter(f.severity for f in index if f.rule == rule.code)
            shown = ", ".join(f"{n} {s}" for s, n in severities.most_common())
            by_rule.add_row(rule.code, rule.name, Text(shown, style=SEVERITY_STYLE.get(rule.severity, "")),
                            str(counts[rule.code]), str(harmful.get(rule.code, 0)))
    console.print(by_rule)

    shown_at_all = [f for f in index if f.severity != "info"]
    worst_briefs = shown_at_all[:worst]
    if worst_briefs:
        console.print(Text(f"Worst incidents ({len(worst_briefs)} of {len(shown_at_all)})", style="bold"))
        wanted = {(f.rule, f.fingerprint) for f in worst_briefs}
        whole = {(f.rule, f.fingerprint): f for f in report.findings_where(lambda rule, fp: (rule, fp) in wanted)}
        for brief in worst_briefs:
            console.print(_incident(whole[brief.rule, brief.fingerprint]))

    causes = report.root_causes()
    if causes:
        table = Table(title="Root causes of the duplicated side effects", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("cause")
        table.add_column("duplicates", justify="right")
        for cause, n in causes.items():
            table.add_row(CAUSE_TITLES.get(cause, cause), str(n))
        console.print(table)

    _deploy_section(report, console, max_rows)

    console.print(Text("Remediation checklist", style="bold"))
    for rule in report.fired_rules():
        if rule.severity == "info" and not any(f.rule == rule.code and f.severity != "info" for f in index):
            continue
        console.print(Text(f"{rule.code} {rule.title}", style="bold"))
        for step in report.steps_of(rule):
            console.print(Text(f"  [ ] {step}"))

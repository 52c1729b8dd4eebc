"""Output of `dupfind stats`: a terminal report (counters, durations, timeline, timeout advice) or JSON."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dupfind.queue_stats import StatsReport
from dupfind.render.analyze_table import SEVERITY_STYLE
from dupfind.render.ranking import most_telling
from dupfind.render.safe import safe_text
from dupfind.schema import TIMEOUT_NAME

BAR_WIDTH = 18
LABEL_WIDTH = 28
KEY_MIN_WIDTH = 12
DISTRIBUTION = ("n", "p50", "p90", "p95", "p99", "max")  # the figures of a duration row
COUNT_COLUMNS = (
    ("published", "pub"),
    ("received", "recv"),
    ("started", "start"),
    ("finished", "done"),
    ("failed", "fail"),
    ("retried", "retry"),
    ("redelivered", "redeliv"),
    ("dead_lettered", "dlq"),
    ("lost", "lost"),
    ("duplicate_side_effects", "dup"),
)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return str(value)


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                 title_style="bold")


def _group_label(row: dict[str, Any], keys: tuple[str, ...]) -> list[Text]:
    return [safe_text(row[k] if row[k] is not None else "-", limit=LABEL_WIDTH) for k in keys]


def _key_columns(table: Table, rows: list[dict[str, Any]], keys: tuple[str, ...]) -> None:
    # Labels give way when the table is wider than the terminal (they wrap, down to KEY_MIN_WIDTH),
    # so that no count or figure is cut.
    for key in keys:
        longest = max([len(str(r[key] or "-")) for r in rows] + [len(key)])
        table.add_column(key.replace("_", " "), min_width=min(longest, KEY_MIN_WIDTH), overflow="fold")


def _number_column(table: Table, label: str, values: list[str]) -> None:
    """A right-aligned column at least as wide as its widest value: rich cuts a number it must narrow."""
    table.add_column(label, justify="right", no_wrap=True, min_width=max([len(label), *map(len, values)]))


def _counts(rows: list[dict[str, Any]], keys: tuple[str, ...], title: str) -> Table:
    columns = [(c, label) for c, label in COUNT_COLUMNS if rows and c in rows[0]]
    table = _table(title)
    _key_columns(table, rows, keys)
    for c, label in columns:
        _number_column(table, label, [_num(row[c]) for row in rows])
    for row in rows:
        cells = [
            Text(_num(row[c]), style="bold red" if c == "duplicate_side_effects" and row[c] else "") for c, _ in columns
        ]
        table.add_row(*_group_label(row, keys), *cells)
    return table


def _distributions(
    rows: list[dict[str, Any]], keys: tuple[str, ...], title: str, field: str, extra: str | None = None
) -> Table:
    table = _table(title)
    _key_columns(table, rows, keys)
    labels = (*DISTRIBUTION, *(("oldest",) if extra else ()))
    cells = [[_num(row[field][k]) for k in DISTRIBUTION] + ([_num(row[extra])] if extra else []) for row in rows]
    for i, label in enumerate(labels):
        _number_column(table, label, [row[i] for row in cells])
    for row, row_cells in zip(rows, cells):
        table.add_row(*_group_label(row, keys), *row_cells)
    return table


def _bar(value: int, peak: int, style: str) -> Text:
    width = 0 if not peak else max(1 if value else 0, round(BAR_WIDTH * value / peak))
    return Text("█" * width + " " * (BAR_WIDTH - width), style=style)


def _timeline(report: StatsReport) -> Table | None:
    buckets = report.timeline["buckets"]
    if not buckets:
        return None
    size = report.timeline["bucket_s"]
    label = f"{size // 60} min" if size % 60 == 0 else f"{size} s"
    table = _table(f"Receives vs publishes per {label} (redeliveries in red, deploys marked)")
    table.add_column("time", no_wrap=True, style="dim")
    table.add_column("published", no_wrap=True)
    table.add_column("received", no_wrap=True)
    table.add_column("redeliv", justify="right", no_wrap=True)
    table.add_column("deploys", overflow="fold")
    peak = max(max(b["published"], b["received"]) for b in buckets)
    for b in buckets:
        published = Text(f"{b['published']:>5} ").append_text(_bar(b["published"], peak, "cyan"))
        received = Text(f"{b['received']:>5} ").append_text(_bar(b["received"], peak, "magenta"))
        redelivered = Text(str(b["redelivered"]) if b["redelivered"] else "", style="bold red")
        deploys = safe_text(", ".join(b["deploys"]), style="bold yellow", limit=60)
        if b["deploys"]:
            deploys = Text("◆ ", style="bold yellow").append_text(deploys)
        table.add_row(b["start"][11:19], published, received, redelivered, deploys)
    return table


def _named(t: dict[str, Any]) -> str:
    """`, max.poll.interval.ms`: the timeout's own name where the logs call it other than a visibility timeout."""
    name = t.get("timeout_name")
    return f", {name}" if name and name != TIMEOUT_NAME else ""


def _timeout_facts(t: dict[str, Any]) -> list[str]:
    facts = [
        f"timeout: {t['timeout_s']:g} s ({t['timeout_source']}{_named(t)})"
        if t["timeout_s"] is not None
        else "timeout: unknown (pass --timeout QUEUE=SECONDS, or log it)"
    ]
    inferred = t["inferred"]
    if inferred:
        facts.append(
            f"inferred from redelivery gaps: {inferred['estimate_s']:.1f} s, "
            f"{inferred['support']} of {inferred['gaps']} "
            f"gaps in the cluster, spread {inferred['spread_s']:.2f} s"
            + ("" if inferred["reliable"] else " (too few to rely on)")
        )
    d = t["durations"]
    if d["n"]:
        text = f"{d['n']} runs: p50 {d['p50']:.1f} s, p95 {d['p95']:.1f} s, p99 {d['p99']:.1f} s, max {d['max']:.1f} s"
        if t["share_over_timeout"] is not None:
            text += f"; {t['share_over_timeout']:.0%} at or above the timeout"
        facts.append(text)
    facts.append(
        f"redeliveries no failure asked for: {t['redeliveries']}; lease extensions logged: {t['lease_extensions']}"
    )
    return facts


def _timeouts(report: StatsReport, console: Console) -> None:
    if not report.timeouts:
        return
    console.print(Text("Visibility timeout", style="bold"))
    for t in report.timeouts:
        label = (t["queue"] or "(no queue named)") + (f" (its {t['service']} consumers)" if t.get("service") else "")
        console.print(Text("  ").append_text(safe_text(label, style="bold")))
        for fact in _timeout_facts(t):
            console.print(safe_text(f"    {fact}"))
        for sentence in t["advice"]:
            console.print(Text("    → ", style="bold").append_text(safe_text(sentence)))


def _findings(report: StatsReport, console: Console, limit: int = 12) -> None:
    findings = report.findings
    if not findings:
        console.print(Text("No queue-timeout or lock findings.", style="green"))
        return
    by_rule: dict[str, Counter] = {}
    for f in findings:
        by_rule.setdefault(f.rule, Counter())[f.severity] += 1
    counts = "; ".join(
        f"{rule}: " + ", ".join(f"{n} {sev}" for sev, n in c.most_common()) for rule, c in by_rule.items()
    )
    table = _table(f"Queue-timeout and lock findings ({counts})")
    table.add_column("rule", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("what", overflow="fold")
    for f in findings[:limit]:
        table.add_row(
            f.rule, Text(f.severity, style=SEVERITY_STYLE.get(f.severity, "")), safe_text(f.summary, limit=400)
        )
    console.print(table)
    if len(findings) > limit:
        console.print(
            Text(
                f"  … {len(findings) - limit} more: `dupfind analyze` lists every finding with its evidence.",
                style="dim",
            )
        )


def render_stats_table(report: StatsReport, console: Console, max_rows: int = 0) -> None:
    """The terminal report; `max_rows` bounds the per-deployment tables (0: every deployment)."""
    summary = report.analysis.summary
    totals = report.analysis.inputs.totals()
    console.print(Text("dupfind stats", style="bold"))
    head = Text(f"{totals['files']} file(s), {totals['records']:,} records")
    if totals["rejected_total"]:
        head.append(f", {totals['rejected_total']:,} lines rejected", style="yellow")
    if summary["first_ts"]:
        head.append(f", {summary['first_ts']} → {summary['last_ts']}")
    head.append(
        f"\n{summary['actions']:,} actions, {summary['executions']:,} executions on {summary['workers']} workers"
    )
    console.print(head)
    for warning in report.analysis.warnings:
        console.print(safe_text(f"warning: {warning}", style="yellow"))
    keys = ("queue", "job_type")
    if report.queues:
        console.print(_counts(report.queues, keys, "Per queue and job type"))
        console.print(
            _distributions(report.queues, keys, "Processing duration, receive to ack/finish/fail (s)", "duration_s")
        )
        console.print(
            _distributions(
                report.queues, keys, "Queue wait, publish to first delivery (s)", "queue_wait_s", "oldest_message_age_s"
            )
        )
    if report.deployments:
        shown = most_telling(report.deployments, max_rows, ("duplicate_side_effects", "redelivered", "received"))
        rest = len(report.deployments) - len(shown)
        title = "Per deployment (worker generation)" + (f", {len(shown)} of {len(report.deployments)}" if rest else "")
        console.print(_counts(shown, ("deployment",), title))
        console.print(_distributions(shown, ("deployment",), "Processing duration per deployment (s)", "duration_s"))
        if rest:
            console.print(Text(
                f"  … {rest} more deployments with fewer duplicated side effects and redeliveries: "
                "--max-rows 0 shows every one, --format json lists them.", style="dim",
            ))
    timeline = _timeline(report)
    if timeline is not None:
        console.print(timeline)
    _timeouts(report, console)
    _findings(report, console)

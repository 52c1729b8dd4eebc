"""Views of `dupfind trace`: a terminal timeline and a Markdown timeline (JSON is TraceReport.to_dict)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dupfind.render.md_text import code, md, table
from dupfind.render.safe import safe_text
from dupfind.trace import ActionTrace, TraceReport

NOTE_MARK = "▲"


def clock(ts) -> str:
    return ts.strftime("%H:%M:%S.%f")[:-3]


def delta(seconds: float) -> str:
    return f"+{seconds:.3f}"


def _effects_line(trace: ActionTrace) -> str:
    parts = []
    for e in trace.side_effects:
        text = f"{e['effect']}: {e['requests']} request(s), {e['succeeded']} succeeded"
        if e["uncertain"]:
            text += f", {e['uncertain']} uncertain"
        if e["replayed"]:
            text += f", {e['replayed']} replayed"
        if e["rejected"]:
            text += f", {e['rejected']} rejected"
        if e["duplicate"]:
            text += f": DUPLICATED ({e['duplicate']})"
        parts.append(text)
    return "; ".join(parts)


def _span_line(trace: ActionTrace) -> str:
    first, last = trace.first_ts, trace.last_ts
    if first is None:
        return "no records"
    shown = f"{len(trace.records)} of {trace.total_records}" if trace.total_records > len(trace.records) \
        else f"{trace.total_records}"
    seconds = (last - first).total_seconds()
    return (f"{first.strftime('%Y-%m-%d')} {clock(first)} → {clock(last)} UTC ({seconds:.1f} s), "
            f"{shown} records in {len(trace.files)} file(s)")


def _ids_line(trace: ActionTrace) -> str:
    return ", ".join(f"{k}={'/'.join(v[:3])}{'…' if len(v) > 3 else ''}" for k, v in trace.ids.items())


def _runs(trace: ActionTrace) -> list[str]:
    return [
        f"{e['label']}: {e['worker'] or '-'}{' [' + e['deployment'] + ']' if e['deployment'] else ''} "
        f"{clock(e['start'])} → {clock(e['end'])}, {e['outcome']}, {e['side_effect_requests']} side-effect request(s)"
        for e in trace.executions
    ]


def _handler(trace: ActionTrace) -> str | None:
    """The consumer an action split from a fan-out is (dupfind.handlers): `<service>/<job type>`."""
    _, marker, handler = trace.identity.rpartition(" handler=")
    return handler if marker else None


# --- terminal ---------------------------------------------------------------------------------

def _header(trace: ActionTrace) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    if trace.finding is not None:
        f = trace.finding
        grid.add_row("finding", safe_text(f"{f.rule} {f.name} [{f.severity}] {f.fingerprint}: {f.summary}"))
    grid.add_row("found by", safe_text(", ".join(trace.matched)))
    if (handler := _handler(trace)) is not None:
        grid.add_row("handler", safe_text(f"{handler} (one consumer of an event others handle too)"))
    if trace.ids:
        grid.add_row("ids", safe_text(_ids_line(trace), limit=600))
    grid.add_row("span", Text(_span_line(trace)))
    if trace.side_effects:
        grid.add_row("effects", safe_text(_effects_line(trace), style="bold red" if any(
            e["duplicate"] for e in trace.side_effects) else ""))
    runs = _runs(trace)
    for n, line in enumerate(runs):
        grid.add_row("runs" if n == 0 else "", safe_text(line))
    return grid


def short_names(names: list[str]) -> dict[str, str]:
    """Worker names without what they all share (a pod prefix, a domain suffix), so columns stay narrow."""
    distinct = sorted(set(n for n in names if n))
    if len(distinct) < 2:
        return {n: n for n in distinct}
    prefix, suffix = distinct[0], distinct[0]
    for name in distinct[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
        while not name.endswith(suffix):
            suffix = suffix[1:]
    head = max(prefix.rfind(sep) for sep in "-._@/") + 1
    tail = suffix.find(".") if "." in suffix else len(suffix)
    tail = len(suffix) - tail
    short = {}
    for name in distinct:
        middle = name[head if head > 3 else 0: len(name) - tail if tail > 3 else len(name)]
        short[name] = ("…" if head > 3 else "") + middle if middle else name
    return short


def _cell(text: Text | str, width: int, right: bool = False, last: bool = False) -> Text:
    cell = text.copy() if isinstance(text, Text) else Text(text)
    cell.truncate(width, overflow="ellipsis")
    padding = "" if last and not right else " " * (width - cell.cell_len)
    return Text(padding) + cell if right else cell + Text(padding)


def _print_timeline(trace: ActionTrace, console: Console) -> None:
    """One line per record (time, delta, worker, attempt, kind, event, file:line); key fields and
    annotations on the lines below it, wrapped under the event column."""
    workers = short_names([e["worker"].split("/")[0] for e in trace.executions if e["worker"]])
    show_deploy = len({e["deployment"] for e in trace.executions}) > 1
    first = trace.first_ts
    rows = []
    for row in trace.records:
        worker = row["worker_id"] or "-"
        rows.append({
            "time": clock(row["ts"]), "delta": delta((row["ts"] - first).total_seconds()),
            "worker": safe_text(workers.get(worker, worker)), "deploy": safe_text(row["deployment_id"] or "-"),
            "att": str(row["attempt_shown"] or "-"), "kind": row["kind"], "event": safe_text(row["name"] or "-"),
            "where": safe_text(f"{Path(row['source']).name}:{row['line']}"),
            "details": " ".join(f"{k}={v}" for k, v in trace.details(row)), "notes": trace.notes.get(row["rid"], []),
        })
    header = {"time": "time (UTC)", "delta": "+s", "worker": "worker", "deploy": "deploy", "att": "att",
              "kind": "kind", "event": "event", "where": "where"}
    columns = ["time", "delta", "worker", *(["deploy"] if show_deploy else []), "att", "kind", "event", "where"]
    caps = {"worker": 24, "deploy": 16, "event": 40}
    widths = {c: min(max([len(header[c])] + [len(r[c]) for r in rows]), caps.get(c, 10_000)) for c in columns}
    fixed = sum(widths[c] for c in columns if c != "event") + 2 * (len(columns) - 1)
    inline_where = fixed + 16 <= console.width
    if not inline_where:
        columns.remove("where")
        fixed -= widths["where"] + 2
    widths["event"] = max(12, min(widths["event"], console.width - fixed))
    indent = widths["time"] + widths["delta"] + 4  # key fields and notes sit under the worker column
    right = {"delta", "att"}
    line = Text("  ").join(
        _cell(Text(header[c], style="bold"), widths[c], c in right, c == columns[-1]) for c in columns
    )
    console.print(line, no_wrap=True, overflow="ellipsis")
    for r in rows:
        cells = [_cell(r[c], widths[c], c in right, c == columns[-1]) for c in columns]
        if "where" in columns:
            cells[-1].stylize("blue")
        cells[0].stylize("dim")
        console.print(Text("  ").join(cells), no_wrap=True, overflow="ellipsis")
        below = []
        details = safe_text(r["details"], style="dim", limit=300)
        if not inline_where:
            where = r["where"].copy()
            where.stylize("blue")
            details = where + Text(" · ", style="dim") + details if r["details"] else where
        if details.plain:
            below.append(details)
        below += [safe_text(f"{NOTE_MARK} {note}", style="bold magenta") for note in r["notes"]]
        for text in below:
            for wrapped in text.wrap(console, max(20, console.width - indent), overflow="fold"):
                wrapped.rstrip()
                console.print(Text(" " * indent) + wrapped, no_wrap=True, overflow="ignore")


def render_trace_table(report: TraceReport, console: Console) -> None:
    for n, trace in enumerate(report.traces):
        if n:
            console.print()
        title = "records outside any action" if trace.action_id is None else f"action {n + 1} of {len(report.traces)}"
        console.print(Text(f"dupfind trace: {title}", style="bold"))
        console.print(_header(trace))
        console.print()
        _print_timeline(trace, console)
        if trace.total_records > len(trace.records):
            more = trace.total_records - len(trace.records)
            console.print(Text(f"… {more} more records (raise --max-records)", style="yellow"))
    if report.omitted_actions:
        console.print(Text(f"{report.omitted_actions} more action(s) carry these ids (raise --max-actions).",
                           style="yellow"))
    if report.not_found:
        console.print(safe_text(f"not found: {', '.join(report.not_found)}", style="yellow"))


# --- Markdown -----------------------------------------------------------------------------------

def trace_rows(trace: ActionTrace, limit: int | None = None) -> list[str]:
    """The timeline as a GFM table: one row per record, its annotations in the last column."""
    first = trace.first_ts
    rows = []
    for row in trace.records[:limit] if limit else trace.records:
        details = "; ".join(f"{k}={v}" for k, v in trace.details(row))
        notes = trace.notes.get(row["rid"], [])
        rows.append([
            clock(row["ts"]), delta((row["ts"] - first).total_seconds()), code(row["worker_id"], 60, cell=True),
            code(row["deployment_id"], 40, cell=True), str(row["attempt_shown"] or "-"), md(row["kind"]),
            code(row["name"], 60, cell=True), md(details, 160) if details else "",
            code(f"{row['source']}:{row['line']}", 160, cell=True),
            "**" + md("; ".join(notes), None) + "**" if notes else "",
        ])
    header = ["time (UTC)", "+s", "worker", "deploy", "att", "kind", "event", "key fields", "where", "what happened"]
    return table(header, rows)


def trace_markdown_block(trace: ActionTrace, limit: int | None = None, heading: str = "###") -> list[str]:
    lines = []
    if trace.finding is not None:
        f = trace.finding
        lines += [f"{heading} {f.rule} {md(f.name)} `{f.fingerprint}`", "", md(f.summary, None), ""]
    if trace.finding is None:
        lines.append(f"- Found by: {', '.join(code(m) for m in trace.matched) or '-'}")
    if (handler := _handler(trace)) is not None:
        lines.append(f"- Handler: {code(handler, 80)} (one consumer of an event others handle too)")
    if trace.ids:
        ids = "; ".join(f"{k}: {', '.join(code(v) for v in vals[:4])}" for k, vals in trace.ids.items())
        lines.append(f"- Ids: {ids}")
    lines.append(f"- Span: {md(_span_line(trace), None)}")
    if trace.side_effects:
        lines.append(f"- Side effects: {md(_effects_line(trace), None)}")
    for e in trace.executions:
        deployment = f" ({code(e['deployment'], 40)})" if e["deployment"] else ""
        lines.append(f"- {md(e['label'])}: {code(e['worker'], 80)}{deployment} {clock(e['start'])} → {clock(e['end'])}, "
                     f"{md(e['outcome'])}, {e['side_effect_requests']} side-effect request(s)")
    lines.append("")
    lines += trace_rows(trace, limit)
    shown = min(limit or len(trace.records), len(trace.records))
    if trace.total_records > shown:
        lines += ["", f"… {trace.total_records - shown} more record(s) not shown."]
    return lines


def render_trace_markdown(report: TraceReport) -> str:
    queries = ", ".join(code(q) for q in report.queries) or (code(report.finding) if report.finding else "-")
    lines = [f"# Trace of {queries}", ""]
    for n, trace in enumerate(report.traces):
        title = "Records outside any action" if trace.action_id is None else f"Action {n + 1} of {len(report.traces)}"
        lines += [f"## {title}", ""] + trace_markdown_block(trace) + [""]
    if report.omitted_actions:
        lines += [f"{report.omitted_actions} more action(s) carry these ids (raise `--max-actions`).", ""]
    if report.not_found:
        lines += ["Not found: " + ", ".join(code(q) for q in report.not_found), ""]
    return "\n".join(lines)

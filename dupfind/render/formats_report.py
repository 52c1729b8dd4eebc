"""The `dupfind formats` report: what each file was read as, mapped to, and rejected."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dupfind.ingest_result import FileReport, IngestResult
from dupfind.render.machine import JSONText, indented_json
from dupfind.render.safe import safe_text
from dupfind.timefmt import iso_us

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA_VERSION = "1"


def file_to_dict(report: FileReport) -> dict:
    """One file's entry in the JSON contract of `formats` (and `analyze`'s inputs)."""
    return {
        "path": report.path,
        "format": report.format,
        "compression": report.compression,
        "lines": report.lines,
        "parsed": report.parsed,
        "records": report.records,
        "blank": report.blank,
        "rejected": dict(sorted(report.rejected.items())),
        "rejected_examples": {
            reason: f"{report.path}:{line}" for reason, line in sorted(report.examples.items())
        },
        "first_ts": iso_us(report.first_ts),
        "last_ts": iso_us(report.last_ts),
        "fields": report.fields,
        "unmapped_events": report.unmapped_events,
        "unmapped_distinct": report.unmapped_distinct,
        "naive_timestamps": report.naive_ts,
        "truncated": report.truncated,
        "notes": report.notes,
    }


def file_entries(result: IngestResult, depth: int, as_written: bool) -> list[dict] | JSONText:
    """The entry of every file (file_to_dict). `as_written`, for inputs the cache keeps: as the JSON
    text a report written by render.machine holds `depth` levels deep, rendered once for a set of
    inputs and stored with it (a first `stats --format json` over 20,000 small files spent 1.1 s
    decoding their reports and rendering them again). Without the cache they are rendered with
    the document (the text and the document beside it: 30 MB more at the peak for 20,000 files)."""
    def entries() -> list[dict]:
        return [file_to_dict(f) for f in result.files]

    data = result.rendered(f"files-json-{depth}", lambda: indented_json(entries(), depth)) if as_written else None
    return entries() if data is None else JSONText(data)


def totals_to_dict(result: IngestResult) -> dict:
    totals = result.totals()
    totals["first_ts"] = iso_us(totals["first_ts"])
    totals["last_ts"] = iso_us(totals["last_ts"])
    return totals


def common_dir(paths: list[str]) -> str:
    """The folder all file inputs share (empty when there is one file or none in common)."""
    files = [p for p in paths if p != "-"]
    if len(files) < 2:
        return ""
    try:
        return os.path.commonpath([os.path.dirname(p) or "." for p in files])
    except ValueError:
        return ""


def relative_to(path: str, base: str) -> str:
    if base and path != "-":
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel
    return path


def formats_document(result: IngestResult, as_written: bool = False) -> dict:
    """The machine-readable `formats` report (`as_written`: its file entries as JSON text, see
    file_entries)."""
    return {
        "schema": SCHEMA_VERSION,
        "files": file_entries(result, 1, as_written),
        "totals": totals_to_dict(result),
    }


def _span(report: FileReport, day: str | None) -> str:
    if report.first_ts is None or report.last_ts is None:
        return "-"
    fmt = "%H:%M:%S" if day and report.first_ts.strftime("%Y-%m-%d") == day == report.last_ts.strftime("%Y-%m-%d") else "%Y-%m-%d %H:%M:%S"
    return f"{report.first_ts.strftime(fmt)} → {report.last_ts.strftime(fmt)}"


def render_formats(result: IngestResult, console: Console) -> None:
    """Terminal view: inputs, rejected lines by reason, then per-file mappings and notes."""
    from rich import box  # rich only for the terminal view (the JSON path does not import it)
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    base = common_dir([f.path for f in result.files])
    title = f"Inputs (under {base}/)" if base else "Inputs"
    summary = Table(title=safe_text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    days = {r.first_ts.strftime("%Y-%m-%d") for r in result.files if r.first_ts} | {
        r.last_ts.strftime("%Y-%m-%d") for r in result.files if r.last_ts}
    day = next(iter(days)) if len(days) == 1 else None
    if day:
        summary.title = safe_text(f"{title}, {day}")
    summary.add_column("file", overflow="fold", min_width=16)
    summary.add_column("format", overflow="fold", min_width=8)
    for name in ("lines", "records", "rejected"):
        summary.add_column(name, justify="right", no_wrap=True)
    summary.add_column("span (UTC)", no_wrap=True)
    for report in result.files:
        fmt = report.format if report.compression == "none" else f"{report.format}, {report.compression}"
        if report.truncated:
            fmt += ", TRUNCATED"
        rejected = report.rejected_total
        summary.add_row(
            safe_text(relative_to(report.path, base)), safe_text(fmt), f"{report.lines:,}", f"{report.records:,}",
            Text(f"{rejected:,}", style="yellow" if rejected else "green"), _span(report, day),
        )
    totals = result.totals()
    summary.add_section()
    summary.add_row(
        Text(f"{totals['files']} file(s)", style="bold"), Text(f"{totals['blank']:,} blank", style="dim"), f"{totals['lines']:,}", f"{totals['records']:,}",
        Text(f"{totals['rejected_total']:,}", style="bold"), "",
    )
    console.print(summary)
    if totals["rejected_total"]:
        rejects = Table(title="Rejected lines", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        rejects.add_column("reason", no_wrap=True)
        rejects.add_column("lines", justify="right", no_wrap=True)
        rejects.add_column("first example", overflow="fold")
        for report in result.files:
            for reason, count in sorted(report.rejected.items()):
                rejects.add_row(reason, f"{count:,}", safe_text(f"{report.path}:{report.examples.get(reason)}"))
        console.print(rejects)
    if result.filtered_out:
        console.print(Text(f"{result.filtered_out:,} records outside --since/--until were left out.", style="dim"))
    for report in result.files:
        parts: list = []
        if report.fields:
            mapping = Table(box=None, padding=(0, 2), pad_edge=False)
            mapping.add_column("canonical column", style="cyan", no_wrap=True)
            mapping.add_column("raw fields", overflow="fold")
            for column, paths in report.fields.items():
                mapping.add_row(column, safe_text(", ".join(paths)))
            parts.append(mapping)
        if report.unmapped_events:
            listed = ", ".join(f"{name} ({count})" for name, count in report.unmapped_events.items())
            more = report.unmapped_distinct - len(report.unmapped_events)
            if more > 0:
                listed += f", and {more} more"
            line = Text("event names mapped to kind 'other': ", style="magenta")
            line.append_text(safe_text(listed, limit=2000))
            parts.append(line)
        if report.naive_ts:
            parts.append(Text(f"{report.naive_ts:,} timestamps had no time zone (taken in --assume-tz)", style="dim"))
        for note in report.notes:
            parts.append(Text(f"note: {note}", style="dim"))
        if parts:
            console.print(Text(""))
            console.print(safe_text(report.path, style="bold"))
            console.print(Group(*parts))

"""One small interface for every output format: render(report, out, options), per report type."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import IO, Any, Callable

from rich.console import Console

from dupfind.analyze import AnalysisReport
from dupfind.redact import Redactor
from dupfind.render.machine import write_json, write_ndjson
from dupfind.render.safe import redacting


@dataclass
class RenderOptions:
    """What a renderer may honour beyond the report itself."""

    worst: int = 5
    width: int | None = None
    color: bool = False
    command: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    redactor: Redactor | None = None


def console_for(buffer: io.StringIO, options: RenderOptions) -> Console:
    """A rich console that writes into `buffer` at the requested width and colour."""
    return Console(file=buffer, width=options.width or 100, force_terminal=options.color,
                   color_system="auto" if options.color else None, highlight=False, soft_wrap=False)


def _redacted(doc: Any, options: RenderOptions) -> Any:
    return options.redactor.tree(doc) if options.redactor is not None else doc


def _table(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.analyze_table import render_table

    buffer = io.StringIO()
    render_table(report, console_for(buffer, options), worst=options.worst)
    out.write(buffer.getvalue().encode())


def _json(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    write_json(_redacted(report.to_dict(), options), out)


def _ndjson(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    write_ndjson((_redacted(f.to_dict(), options) for f in report.findings), out)


def _markdown(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.markdown import render_markdown

    out.write(render_markdown(report, options.command, options.paths, options.redactor is not None).encode())


RENDERERS: dict[str, Callable[[AnalysisReport, IO[bytes], RenderOptions], None]] = {
    "table": _table,
    "json": _json,
    "ndjson": _ndjson,
    "markdown": _markdown,
}


def _trace_table(report, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.trace_view import render_trace_table

    buffer = io.StringIO()
    render_trace_table(report, console_for(buffer, options))
    out.write(buffer.getvalue().encode())


def _trace_json(report, out: IO[bytes], options: RenderOptions) -> None:
    write_json(_redacted(report.to_dict(), options), out)


def _trace_markdown(report, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.trace_view import render_trace_markdown

    out.write(render_trace_markdown(report).encode())


TRACE_RENDERERS: dict[str, Callable[[Any, IO[bytes], RenderOptions], None]] = {
    "table": _trace_table,
    "json": _trace_json,
    "markdown": _trace_markdown,
}


def _formats_table(result, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.formats_report import render_formats

    buffer = io.StringIO()
    render_formats(result, console_for(buffer, options))
    out.write(buffer.getvalue().encode())


def _formats_json(result, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.formats_report import formats_document

    write_json(_redacted(formats_document(result), options), out)


FORMATS_RENDERERS: dict[str, Callable[[Any, IO[bytes], RenderOptions], None]] = {
    "table": _formats_table,
    "json": _formats_json,
}


def _stats_table(report, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.stats_report import render_stats_table

    buffer = io.StringIO()
    render_stats_table(report, console_for(buffer, options))
    out.write(buffer.getvalue().encode())


def _stats_json(report, out: IO[bytes], options: RenderOptions) -> None:
    write_json(_redacted(report.to_dict(), options), out)


STATS_RENDERERS: dict[str, Callable[[Any, IO[bytes], RenderOptions], None]] = {
    "table": _stats_table,
    "json": _stats_json,
}


def render(renderers: dict[str, Callable], fmt: str, report: Any, out: IO[bytes], options: RenderOptions) -> None:
    """Render `report` in `fmt`; with a redactor in the options, every log value is masked on the way."""
    with redacting(options.redactor.text if options.redactor is not None else None):
        renderers[fmt](report, out, options)

"""One small interface for every output format: render(report, out, options), per report type."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from dupfind.render.machine import write_json, write_json_items, write_ndjson
from dupfind.render.safe import redacting

if TYPE_CHECKING:  # a report served from the cache loads neither the analysis nor the redaction rules
    from rich.console import Console

    from dupfind.analyze import AnalysisReport
    from dupfind.redact import Redactor


@dataclass
class RenderOptions:
    """What a renderer may honour beyond the report itself."""

    worst: int = 5
    max_rows: int = 0  # rows of a long terminal table before the rest are counted (0: all)
    width: int | None = None
    color: bool = False
    command: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    redactor: Redactor | None = None
    # The trace of a finding when the report has no context to build it from (inputs read in
    # windows of time: dupfind.windows); None when it cannot be traced.
    trace_finding: Callable[[Any], Any] | None = None


def console_for(buffer: io.StringIO, options: RenderOptions) -> Console:
    """A rich console that writes into `buffer` at the requested width and colour."""
    from rich.console import Console  # rich is imported by the views that draw, not by JSON output

    return Console(file=buffer, width=options.width or 100, force_terminal=options.color,
                   color_system="auto" if options.color else None, highlight=False, soft_wrap=False)


Renderer = Callable[[Any, IO[bytes], RenderOptions], None]


def _redacted(doc: Any, options: RenderOptions) -> Any:
    return options.redactor.tree(doc) if options.redactor is not None else doc


def _terminal(draw: Callable[[Any, Console, RenderOptions], None]) -> Renderer:
    """A renderer that draws on a rich console (width and colour from the options) and writes the text."""
    def renderer(report: Any, out: IO[bytes], options: RenderOptions) -> None:
        buffer = io.StringIO()
        draw(report, console_for(buffer, options), options)
        out.write(buffer.getvalue().encode())
    return renderer


def _document(to_doc: Callable[[Any], Any]) -> Renderer:
    """A renderer that writes one JSON document (redacted as a whole when redaction is on)."""
    def renderer(report: Any, out: IO[bytes], options: RenderOptions) -> None:
        write_json(_redacted(to_doc(report), options), out)
    return renderer


def _text(to_text: Callable[[Any, RenderOptions], str]) -> Renderer:
    def renderer(report: Any, out: IO[bytes], options: RenderOptions) -> None:
        out.write(to_text(report, options).encode())
    return renderer


def _analyze_table(report: AnalysisReport, console: Console, options: RenderOptions) -> None:
    from dupfind.render.analyze_table import render_table

    render_table(report, console, worst=options.worst, max_rows=options.max_rows)


def _analyze_json(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    write_json_items(_redacted(report.to_dict(findings=False, as_written=True), options), "findings",
                     (_redacted(f.to_dict(), options) for f in report.findings), out)


def _analyze_ndjson(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    write_ndjson((_redacted(f.to_dict(), options) for f in report.findings), out)


def _analyze_markdown(report: AnalysisReport, options: RenderOptions) -> str:
    from dupfind.render.markdown import render_markdown

    parts = None
    if report.context is not None and options.trace_finding is None:
        from dupfind.pipeline import markdown_parts

        # Drawn by `analyze` after its report (or by an earlier ticket of this cached analysis).
        parts = markdown_parts(report, options.redactor)
    return render_markdown(report, options.command, options.paths, options.redactor is not None, options.trace_finding,
                           parts)


RENDERERS: dict[str, Renderer] = {
    "table": _terminal(_analyze_table),
    "json": _analyze_json,
    "ndjson": _analyze_ndjson,
    "markdown": _text(_analyze_markdown),
}


def _trace_table(report, console: Console, options: RenderOptions) -> None:
    from dupfind.render.trace_view import render_trace_table

    render_trace_table(report, console)


def _trace_markdown(report, options: RenderOptions) -> str:
    from dupfind.render.trace_view import render_trace_markdown

    return render_trace_markdown(report)


TRACE_RENDERERS: dict[str, Renderer] = {
    "table": _terminal(_trace_table),
    "json": _document(lambda report: report.to_dict()),
    "markdown": _text(_trace_markdown),
}


def _formats_table(result, console: Console, options: RenderOptions) -> None:
    from dupfind.render.formats_report import render_formats

    render_formats(result, console)


def _formats_document(result) -> dict:
    from dupfind.render.formats_report import formats_document

    return formats_document(result, as_written=True)


FORMATS_RENDERERS: dict[str, Renderer] = {
    "table": _terminal(_formats_table),
    "json": _document(_formats_document),
}


def _stats_table(report, console: Console, options: RenderOptions) -> None:
    from dupfind.render.stats_report import render_stats_table

    render_stats_table(report, console, options.max_rows)


STATS_RENDERERS: dict[str, Renderer] = {
    "table": _terminal(_stats_table),
    "json": _document(lambda report: report.to_dict(as_written=True)),
}


def render(renderers: dict[str, Renderer], fmt: str, report: Any, out: IO[bytes], options: RenderOptions) -> None:
    """Render `report` in `fmt`; with a redactor in the options, every log value is masked on the way."""
    with redacting(options.redactor.text if options.redactor is not None else None):
        renderers[fmt](report, out, options)


class _Chunks:
    """A binary sink that keeps the chunks written to it: a report written in one chunk (a JSON
    document) comes back as that very object, not a second copy of it (154 MB at 5M lines)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data) -> int:
        self.chunks.append(data if type(data) is bytes else bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


def render_chunks(renderers: dict[str, Renderer], fmt: str, report: Any, options: RenderOptions) -> list[bytes]:
    """The bytes `render` writes, in the chunks it wrote them: not joined, which would copy a
    report written a finding at a time (154 MB at 5M lines) once more."""
    sink = _Chunks()
    render(renderers, fmt, report, sink, options)
    return sink.chunks


def render_bytes(renderers: dict[str, Renderer], fmt: str, report: Any, options: RenderOptions) -> bytes:
    """The bytes `render` writes."""
    return b"".join(render_chunks(renderers, fmt, report, options))

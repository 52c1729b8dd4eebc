"""One small interface for every output format of `analyze`: render(report, out, options)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import IO, Callable

from rich.console import Console

from dupfind.analyze import AnalysisReport


@dataclass
class RenderOptions:
    """What a renderer may honour beyond the report itself."""

    worst: int = 5
    width: int | None = None
    color: bool = False
    command: list[str] = field(default_factory=list)


def _table(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.analyze_table import render_table

    buffer = io.StringIO()
    console = Console(file=buffer, width=options.width or 100, force_terminal=options.color, color_system="auto" if options.color else None, highlight=False, soft_wrap=False)
    render_table(report, console, worst=options.worst)
    out.write(buffer.getvalue().encode())


def _json(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.machine import render_json

    render_json(report, out)


def _ndjson(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.machine import render_ndjson

    render_ndjson(report, out)


def _markdown(report: AnalysisReport, out: IO[bytes], options: RenderOptions) -> None:
    from dupfind.render.markdown import render_markdown

    out.write(render_markdown(report, options.command).encode())


RENDERERS: dict[str, Callable[[AnalysisReport, IO[bytes], RenderOptions], None]] = {
    "table": _table,
    "json": _json,
    "ndjson": _ndjson,
    "markdown": _markdown,
}

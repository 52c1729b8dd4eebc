"""`dupfind formats`: what each input was read as."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dupfind.cli_common import (
    ConfigOpt, NoCacheOpt, OutputOpt, PathsArg, RedactOpt, RejectsOpt, RulesOpt, SinceOpt, StrictOpt, TableOrJson,
    TzOpt, UntilOpt, app, emit, load_paths, make_redactor, report_width,
)


@app.command()
def formats(
    paths: PathsArg,
    output_format: Annotated[TableOrJson, typer.Option(
        "--format", "-f", help="table for people, json for tools.")] = TableOrJson.table,
    output: OutputOpt = None,
    redact: RedactOpt = None,
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    assume_tz: TzOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    rejects: RejectsOpt = None,
    strict: StrictOpt = False,
    no_cache: NoCacheOpt = False,
) -> None:
    """Show what each file was read as: format, compression, lines parsed and rejected (with
    reasons and an example file:line), time span, which raw fields fed each canonical column,
    and the event names that no vocabulary entry maps (so you know what to add)."""
    from dupfind.render.registry import FORMATS_RENDERERS, RenderOptions

    result = load_paths(paths, config, rules, assume_tz, since, until, rejects, strict, use_cache=not no_cache)
    options = RenderOptions(
        width=report_width(output), color=output is None and sys.stdout.isatty(),
        redactor=make_redactor(redact, output_format.value, result.table),
    )
    emit(FORMATS_RENDERERS, output_format.value, result, options, output)

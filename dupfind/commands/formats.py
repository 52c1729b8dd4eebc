"""`dupfind formats`: what each input was read as."""

from __future__ import annotations

import sys
from typing import Annotated

import orjson
import typer

from dupfind.cli_common import (
    NoCacheOpt,
    ConfigOpt, PathsArg, RejectsOpt, RulesOpt, SinceOpt, StrictOpt,
    TableOrJson, TzOpt, UntilOpt, app, load_paths, stdout_console,
)


@app.command()
def formats(
    paths: PathsArg,
    output_format: Annotated[TableOrJson, typer.Option("--format", "-f", help="table for people, json for tools.")] = TableOrJson.table,
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
    from dupfind.render.formats_report import formats_document, render_formats

    result = load_paths(paths, config, rules, assume_tz, since, until, rejects, strict, use_cache=not no_cache)
    if output_format == TableOrJson.json:
        sys.stdout.buffer.write(orjson.dumps(formats_document(result), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        render_formats(result, stdout_console())

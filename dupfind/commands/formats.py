"""`dupfind formats`: what each input was read as."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dupfind.cli_common import (
    ConfigOpt, MemoryLimitOpt, NoCacheOpt, OutputOpt, PathsArg, RedactOpt, RejectsOpt, RulesOpt, SinceOpt, StrictOpt,
    TableOrJson, TzOpt, UntilOpt, app, emit, load_paths, make_redactor, progress_console, rejects_and_strict,
    report_width, window_options,
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
    memory_limit: MemoryLimitOpt = None,
) -> None:
    """Show what each file was read as: format, compression, lines parsed and rejected (with
    reasons and an example file:line), time span, which raw fields fed each canonical column,
    and the event names that no vocabulary entry maps (so you know what to add)."""
    from dupfind.render.registry import FORMATS_RENDERERS, RenderOptions

    budget, _ = window_options(paths, memory_limit, "1h", since, until, use_cache=not no_cache)
    if budget is None:
        result = load_paths(paths, config, rules, assume_tz, since, until, rejects, strict, use_cache=not no_cache)
    else:
        result = _survey(paths, config, rules, assume_tz, since, until, rejects, strict)
    options = RenderOptions(
        width=report_width(output), color=output is None and sys.stdout.isatty(),
        redactor=make_redactor(redact, output_format.value, result.table, texts=result.texts),
    )
    emit(FORMATS_RENDERERS, output_format.value, result, options, output)


def _survey(paths, config, rules, assume_tz, since, until, rejects, strict):
    """Inputs too large to read whole: every line read and accounted for, no record kept (the
    report needs none; redaction then protects no id values of the input)."""
    from dupfind.config import load_config
    from dupfind.pipeline import time_bounds
    from dupfind.windows import survey_inputs

    cfg = load_config(config, rules, assume_tz)
    sys.stderr.write("dupfind: these inputs are too large to read whole: every line is read and accounted for, "
                     "no record is kept.\n")
    result = survey_inputs(paths, cfg, *time_bounds(cfg, since, until), progress_console())
    rejects_and_strict(result, rejects, strict)
    return result

"""The command line: parse arguments, call the pipeline, hand results to a renderer."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console

from dupfind import __version__
from dupfind.errors import DupfindError
from dupfind.render.safe import safe_str

app = typer.Typer(
    name="dupfind",
    help="Find background-job side effects that happened twice (a second email, a double stock "
    "deduction), by which workers and deploys, and why, from the logs you already have.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class TableOrJson(str, Enum):
    table = "table"
    json = "json"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dupfind {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = None,
) -> None:
    """dupfind: duplicate side-effect forensics for background jobs."""


PathsArg = Annotated[
    list[str],
    typer.Argument(help="Log files, directories (read recursively) or - for standard input.", show_default=False),
]
ConfigOpt = Annotated[
    Optional[Path], typer.Option("--config", help="A dupfind.toml with extra field aliases, vocabulary and rule settings (default: ./dupfind.toml if present).")
]
RulesOpt = Annotated[Optional[Path], typer.Option("--rules", help="A folder of rule and vocabulary files layered over the shipped rules/.")]
TzOpt = Annotated[Optional[str], typer.Option("--assume-tz", help="Time zone for timestamps that carry none (default UTC).")]
SinceOpt = Annotated[Optional[str], typer.Option("--since", help="Only records at or after this time: ISO-8601, or relative like -2h or 30m.")]
UntilOpt = Annotated[Optional[str], typer.Option("--until", help="Only records at or before this time: ISO-8601, or relative like -10m.")]
RejectsOpt = Annotated[Optional[Path], typer.Option("--rejects", help="Write every rejected line (source, line, reason, text) to this NDJSON file.")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Exit 2 when any input line was rejected.")]


def _stdout() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def _stderr() -> Console:
    return Console(file=sys.stderr, highlight=False)


def _load(paths, config_file, rules_dir, assume_tz, since, until, rejects_file, strict):
    from dupfind.pipeline import load_inputs

    result = load_inputs(paths, config_file, rules_dir, assume_tz, since, until, stderr=_stderr())
    if rejects_file is not None:
        from dupfind.pipeline import write_rejects

        write_rejects(result, rejects_file)
    if strict and result.rejects.height:
        total = result.totals()["rejected_total"]
        raise DupfindError(f"{total} input line(s) were rejected and --strict is set (see `dupfind formats` for reasons).")
    return result


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
) -> None:
    """Show what each file was read as: format, compression, lines parsed and rejected (with
    reasons and an example file:line), time span, which raw fields fed each canonical column,
    and the event names that no vocabulary entry maps (so you know what to add)."""
    from dupfind.render.formats_report import formats_document, render_formats

    result = _load(paths, config, rules, assume_tz, since, until, rejects, strict)
    if output_format == TableOrJson.json:
        sys.stdout.buffer.write(orjson.dumps(formats_document(result), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        render_formats(result, _stdout())


def main() -> None:
    """Console-script entry point: one-line errors and exit code 2, never a traceback."""
    try:
        app()
    except DupfindError as exc:
        sys.stderr.write(f"dupfind: error: {safe_str(exc)}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("dupfind: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        # Output piped into `head` or similar: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except Exception as exc:
        if os.environ.get("DUPFIND_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else ""
        sys.stderr.write(
            f"dupfind: internal error: {type(exc).__name__}: {message} (set DUPFIND_DEBUG=1 for a traceback)\n"
        )
        sys.exit(2)

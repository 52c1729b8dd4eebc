"""Shared pieces of the command line: the typer app, common options, loading and output helpers."""

from __future__ import annotations

import shutil
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind import __version__
from dupfind.errors import DupfindError
from dupfind.status_line import terminal_console as progress_console  # the commands take it from here

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


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    ndjson = "ndjson"
    markdown = "markdown"


class TraceFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


class Severity(str, Enum):
    info = "info"
    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dupfind {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = None,
) -> None:
    """dupfind: duplicate side-effect forensics for background jobs."""
    from dupfind.sources import listings_kept

    ctx.with_resource(listings_kept())  # the command lists its inputs once (closed when it ends)


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
def _rejects_file(path: Path | None) -> Path | None:
    if path is not None and str(path) == "-":
        raise DupfindError("--rejects - would mix the rejected lines into the report on stdout: name a file, e.g. --rejects rejects.ndjson.")
    return path


RejectsOpt = Annotated[Optional[Path], typer.Option(
    "--rejects", callback=_rejects_file, help="Write every rejected line (source, line, reason, text) to this NDJSON file.",
)]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Exit 2 when any input line was rejected.")]
def _cache_use(no_cache: bool) -> bool:
    """--no-cache decides, before the command loads its configuration, whether the parses of its
    TOML files are kept in the cache directory and reused (dupfind.parse_memo)."""
    from dupfind import parse_memo

    parse_memo.use_cache(not no_cache)
    if not no_cache:
        _note_unusable_cache()
    return no_cache


_CACHE_NOTE: list = []  # the cache directory this command uses, then whether a note was written


def _note_unusable_cache() -> None:
    """One line on stderr when the cache directory cannot keep what a run stores: a second run
    would take as long as the first, and the engineer should know why (and how to move it)."""
    from dupfind.cache import cache_dir_problem, default_cache_dir

    root = default_cache_dir()
    _CACHE_NOTE[:] = [root, _write_cache_note(root, cache_dir_problem(root))]


def note_cache_after_run() -> None:
    """After a command's cache writes: the note, if not written at its start, when they left the
    cache's disk nearly full (some of them then likely failed)."""
    from dupfind.cache import cache_space_problem

    if len(_CACHE_NOTE) == 2 and not _CACHE_NOTE[1]:
        _CACHE_NOTE[1] = _write_cache_note(_CACHE_NOTE[0], cache_space_problem(_CACHE_NOTE[0]))


def _write_cache_note(root: Path, problem: str | None) -> bool:
    from dupfind.cache import ENV_DIR
    from dupfind.render.safe import safe_str

    if problem is None:
        return False
    sys.stderr.write(f"dupfind: note: the cache directory {safe_str(str(root))} {problem} "
                     f"(set {ENV_DIR} to another directory, or pass --no-cache).\n")
    return True


NoCacheOpt = Annotated[bool, typer.Option(
    "--no-cache", callback=_cache_use,
    help="Parse every file again instead of reusing the cached table (DUPFIND_CACHE_DIR, default ~/.cache/dupfind).",
)]
MemoryLimitOpt = Annotated[Optional[str], typer.Option(
    "--memory-limit",
    help="Memory the command may use, e.g. 8G or 512MiB (default: what is available). Inputs that need more are "
         "read in parts: one window of time at a time (analyze, stats), only around what is shown (trace, "
         "timeline), or without keeping the records (formats).",
)]
# 1h by default (the commands' default value): visibility timeouts and retry back-offs are minutes
# to an hour, and repeats of one action further apart are not linked across windows.
WindowOverlapOpt = Annotated[str, typer.Option(
    "--window-overlap",
    help="With inputs read in windows of time: the records read before and after each window (around a traced "
         "id's records), e.g. 30m or 2h; repeats of one action further apart are not linked.",
)]
def _output_file(path: Path | None) -> Path | None:
    return None if path is not None and str(path) == "-" else path  # `-o -`: stdout, as usual


OutputOpt = Annotated[Optional[Path], typer.Option(
    "--output", "-o", callback=_output_file, help="Write the report to this file instead of stdout (- for stdout).",
)]
RedactOpt = Annotated[Optional[bool], typer.Option(
    "--redact/--no-redact", show_default=False,
    help="Mask e-mail addresses, phone numbers, tokens and keys, IP addresses and card numbers in the output "
         "(correlation ids are kept). Default: on for markdown, off otherwise.",
)]
# Options of the analysis itself, shared by every command that runs it.
DisableOpt = Annotated[
    Optional[list[str]], typer.Option("--disable", help="Disable a rule by code or name (repeatable).")
]
SkewOpt = Annotated[float, typer.Option(
    "--skew", help="Clock-skew tolerance in seconds between hosts: overlaps a clock moved by less would undo are only 'possible'.")]
TimeoutOpt = Annotated[Optional[list[str]], typer.Option(
    "--timeout",
    help="Known visibility timeout: QUEUE=SECONDS, or SECONDS for all queues (repeatable; overrides [timeouts] in the config).")]
MaxJobsOpt = Annotated[int, typer.Option(
    "--max-jobs-per-value",
    help="An id value shared by more jobs than this stops linking (it is a tenant id or a placeholder).")]


def load_paths(paths, config_file, rules_dir, assume_tz, since, until, rejects_file, strict, use_cache=True):
    """Load the configuration from the options, then the inputs (see load_with_config)."""
    from dupfind.config import load_config

    cfg = load_config(config_file, rules_dir, assume_tz)
    return load_with_config(cfg, paths, since, until, rejects_file, strict, use_cache=use_cache)


def stdout_to_devnull() -> None:
    """stdout's file descriptor on the null device: its reader went away (`| head`), or has the
    whole report (what is written after it goes nowhere)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def write_output(data_writer, output: Path | None) -> None:
    if output is None:
        try:
            data_writer(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            # A report written as it is rendered meets the closed pipe within the command, where
            # typer would make it exit status 1: the command ends as a whole report's would.
            stdout_to_devnull()
            raise typer.Exit(0) from None
        return
    try:
        with output.open("wb") as fh:
            data_writer(fh)
    except OSError as exc:
        raise DupfindError(f"cannot write {output}: {exc.strerror or exc}.") from None
    sys.stderr.write(f"dupfind: report written to {output}\n")


def load_with_config(cfg, paths, since, until, rejects_file, strict, use_cache=True):
    """Read the inputs; write --rejects; enforce --strict."""
    from dupfind.pipeline import load_inputs

    result = load_inputs(paths, since=since, until=until, stderr=progress_console(), config=cfg, use_cache=use_cache)
    rejects_and_strict(result, rejects_file, strict)
    return result


def window_options(paths, memory_limit: str | None, window_overlap: str, since, until,
                   use_cache: bool = True) -> tuple[int | None, float]:
    """--memory-limit and --window-overlap: the memory budget when the inputs must be read in
    parts (None: read whole) and the overlap in seconds. A --since/--until window keeps an
    unknown share of the records: parts then only with --memory-limit. With the cache on, the
    estimate of the inputs' size is kept there (see memory_check.log_size)."""
    from dupfind.read_plan import parse_duration, parse_size, window_budget

    limit = parse_size(memory_limit, "--memory-limit") if memory_limit is not None else None
    overlap = parse_duration(window_overlap, "--window-overlap")
    budget = window_budget(paths, limit, use_cache) if limit is not None or (since is None and until is None) else None
    return budget, overlap


def correlate_with_config(cfg, paths, since, until, rejects_file, strict, max_jobs_per_value=25, use_cache=True,
                          naming=()):
    """Read and correlate the inputs (or take both from the result cache); write --rejects; enforce
    --strict. `naming`: the reports of other inputs that name workers of these (pipeline.load_correlated)."""
    from dupfind.pipeline import load_correlated

    loaded = load_correlated(paths, cfg, since, until, max_jobs_per_value, stderr=progress_console(), use_cache=use_cache,
                             naming=naming)
    rejects_and_strict(loaded.result, rejects_file, strict)
    return loaded


def rejects_and_strict(result, rejects_file, strict) -> None:
    from dupfind.pipeline import write_rejects

    if rejects_file is not None:
        write_rejects(result, rejects_file)
    if strict and result.rejects.height:
        total = result.totals()["rejected_total"]
        raise DupfindError(f"{total} input line(s) were rejected and --strict is set (see `dupfind formats` for reasons).")


def parse_timeouts(values: list[str]) -> dict[str, float]:
    """--timeout values (QUEUE=SECONDS or SECONDS) as queue -> seconds ('' = every queue)."""
    timeouts: dict[str, float] = {}
    for value in values:
        queue, sep, seconds = value.rpartition("=")
        if not sep:
            queue, seconds = "", value
        try:
            parsed = float(seconds.strip().rstrip("s"))
        except ValueError:
            parsed = -1.0
        if not 0 < parsed < float("inf"):
            raise DupfindError(f"--timeout {value!r} is not QUEUE=SECONDS (or SECONDS for every queue) with SECONDS > 0.")
        timeouts[queue] = parsed
    return timeouts


def command_line() -> list[str]:
    """This invocation as `dupfind ...` without --output: the command that reproduces the report."""
    args, skip = ["dupfind"], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("--output", "-o"):
            skip = True
        elif not arg.startswith("--output=") and not (arg.startswith("-o") and len(arg) > 2):
            args.append(arg)
    return args


def report_width(output: Path | None) -> int:
    """Terminal reports: as wide as the terminal (or $COLUMNS) on stdout, 120 columns in a file."""
    return shutil.get_terminal_size((100, 24)).columns if output is None else 120


def make_redactor(redact: bool | None, fmt: str, table, business_keys=(), context=None, protected=None, texts=None):
    """The redactor for this output (None: show values as logged); on by default for Markdown.

    `table` may be a function that gives the table: it is only called when redaction is on (a
    cached analysis then need not read the table at all). With the analysis `context`, the ids it
    protects are the context table's, kept in the result cache beside the inputs."""
    if not (redact if redact is not None else fmt == "markdown"):
        return None
    from dupfind.redact import Redactor

    if protected is not None:  # an analysis in windows of time gathered them window by window
        return Redactor(protected)
    if context is not None:
        from dupfind.pipeline import cached_set_value, protected_ids, redaction_ids_kind

        return Redactor(lambda: cached_set_value(
            context, *redaction_ids_kind(context.config),
            lambda: protected_ids(context, context.config),
        ))
    return Redactor.for_table(table() if callable(table) else table, business_keys, texts)


# Formats whose renderers use nothing from the options but the redactor (render/registry.py).
MACHINE_FORMATS = ("json", "ndjson")


def emit(renderers: dict, fmt: str, report, options, output: Path | None) -> None:
    """Render a report to stdout or --output, then say on stderr what redaction masked.

    An analysis from the result cache reuses the bytes (and the note of what redaction masked) an
    earlier run rendered for the same format and options: nothing else shapes them, the ids that
    redaction protects come from the same inputs."""
    import dataclasses

    from dupfind.pipeline import cached_output, write_cached_output
    from dupfind.render.registry import render, render_chunks

    def rendered() -> tuple[list[bytes], str | None]:
        return render_chunks(renderers, fmt, report, options), options.redactor.summary() if options.redactor is not None else None

    # The options as they are: dataclasses.asdict would deep-copy the redactor first (its protected
    # ids: 4.5 s at 5M lines). How a finding is traced is named, not its function (whose text holds
    # its address, another on each run: a Markdown ticket of inputs read in windows was never reused).
    unshaping = ("redactor", "trace_finding")
    shape = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in unshaping}
    if fmt in MACHINE_FORMATS:
        shape = {}
    shape["redacted"] = options.redactor is not None
    shape["traced_around"] = options.trace_finding is not None
    kind = f"{type(report).__qualname__}:{fmt}"
    if options.redactor is None:  # nothing to say on stderr: written as it is rendered, never held whole
        write_cached_output(report, kind, shape, lambda out: render(renderers, fmt, report, out, options),
                            lambda writer: write_output(writer, output))
        return
    data, summary = cached_output(report, kind, shape, rendered)
    write_output(lambda out: out.writelines(data if isinstance(data, list) else [data]), output)
    if summary:
        sys.stderr.write(f"dupfind: {summary}\n")

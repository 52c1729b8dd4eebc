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


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    ndjson = "ndjson"
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


def _parse_timeouts(values: list[str]) -> dict[str, float]:
    timeouts: dict[str, float] = {}
    for value in values:
        queue, sep, seconds = value.rpartition("=")
        if not sep:
            queue, seconds = "", value
        try:
            timeouts[queue] = float(seconds.rstrip("s"))
        except ValueError:
            raise DupfindError(f"--timeout {value!r} is not QUEUE=SECONDS (or SECONDS for every queue).") from None
    return timeouts


def _write_output(data_writer, output: Path | None) -> None:
    if output is None:
        data_writer(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    try:
        with output.open("wb") as fh:
            data_writer(fh)
    except OSError as exc:
        raise DupfindError(f"cannot write {output}: {exc.strerror or exc}.") from None
    sys.stderr.write(f"dupfind: report written to {output}\n")


@app.command()
def analyze(
    paths: PathsArg,
    output_format: Annotated[ReportFormat, typer.Option("--format", "-f", help="table (terminal), json (one document), ndjson (one finding per line), markdown (ticket body).")] = ReportFormat.table,
    fail_on: Annotated[Optional[Severity], typer.Option("--fail-on", help="Exit 1 when a finding at or above this severity exists.")] = None,
    disable: Annotated[Optional[list[str]], typer.Option("--disable", help="Disable a rule by code or name (repeatable).")] = None,
    skew: Annotated[float, typer.Option("--skew", help="Clock-skew tolerance in seconds between hosts: shorter overlaps are only 'possible'.")] = 0.5,
    timeout: Annotated[Optional[list[str]], typer.Option("--timeout", help="Known visibility timeout: QUEUE=SECONDS, or SECONDS for all queues (repeatable).")] = None,
    worst: Annotated[int, typer.Option("--worst", help="How many incidents the terminal report details.")] = 5,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to this file instead of stdout.")] = None,
    max_jobs_per_value: Annotated[int, typer.Option("--max-jobs-per-value", help="An id value shared by more jobs than this stops linking (it is a tenant id or a placeholder).")] = 25,
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    assume_tz: TzOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    rejects: RejectsOpt = None,
    strict: StrictOpt = False,
) -> None:
    """Find side effects executed more than once (which actions, workers, attempts, deploys),
    name the root cause with the log lines that prove it, and list the fixes."""
    from dupfind.analyze import analyze as run_analysis
    from dupfind.config import load_config
    from dupfind.findings import severity_rank
    from dupfind.render.registry import RENDERERS, RenderOptions
    from dupfind.rules_registry import load_rules

    if skew < 0:
        raise DupfindError("--skew must be zero or more seconds.")
    cfg = load_config(config, rules, assume_tz)
    rule_list = load_rules(cfg, rules, tuple(disable or ()))
    result = _load_with(cfg, paths, since, until, rejects, strict)
    report = run_analysis(result, cfg, rule_list, skew, _parse_timeouts(timeout or []), max_jobs_per_value)
    options = RenderOptions(worst=worst, color=output is None and sys.stdout.isatty(), command=["dupfind", *sys.argv[1:]])
    _write_output(lambda out: RENDERERS[output_format.value](report, out, options), output)
    if fail_on is not None and any(severity_rank(f.severity) >= severity_rank(fail_on.value) for f in report.findings):
        raise typer.Exit(1)


def _load_with(cfg, paths, since, until, rejects_file, strict):
    from dupfind.pipeline import load_inputs, write_rejects

    result = load_inputs(paths, since=since, until=until, stderr=_stderr(), config=cfg)
    if rejects_file is not None:
        write_rejects(result, rejects_file)
    if strict and result.rejects.height:
        total = result.totals()["rejected_total"]
        raise DupfindError(f"{total} input line(s) were rejected and --strict is set (see `dupfind formats` for reasons).")
    return result


@app.command()
def synth(
    preset: Annotated[Optional[str], typer.Argument(help="The scenario to simulate (see --list).", show_default=False)] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Folder to write: logs/ and truth.json.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed: the same seed writes the same bytes.")] = 1,
    jobs: Annotated[Optional[int], typer.Option("--jobs", help="Business actions to simulate (default: the preset's).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Log format: ndjson, logfmt, docker or cri.")] = "ndjson",
    list_presets: Annotated[bool, typer.Option("--list", help="List the presets with a line of explanation each.")] = False,
) -> None:
    """Simulate producers, a queue with leases, workers, deploys, locks and guards, and write
    realistic logs of one failure mode (or its benign control) with the answer key (truth.json)."""
    from dupfind.synth import list_presets as presets

    if list_presets or preset is None:
        if preset is None and not list_presets:
            raise DupfindError("name a preset (dupfind synth --list shows them) and --out DIR.")
        width = max(len(name) for name, _ in presets())
        for name, description in presets():
            typer.echo(f"{name:<{width}}  {description}")
        return
    if out is None:
        raise DupfindError("--out DIR is required: where to write logs/ and truth.json.")
    if jobs is not None and jobs < 1:
        raise DupfindError("--jobs must be at least 1.")
    from dupfind.synth import write_scenario

    try:
        truth = write_scenario(preset, out, seed=seed, jobs=jobs, fmt=fmt)
    except ValueError as exc:
        raise DupfindError(str(exc).rstrip(".") + ".") from None
    except OSError as exc:
        raise DupfindError(f"cannot write to {out}: {exc.strerror or exc}.") from None
    counters = truth["counters"]
    sys.stderr.write(
        f"dupfind: wrote {len(truth['files'])} log files ({counters['lines']:,} lines) to {out / 'logs'} and the answer key "
        f"to {out / 'truth.json'}: {counters['actions']} actions, {counters['duplicated_actions']} duplicated, "
        f"{counters['redeliveries']} redeliveries\n"
    )


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

"""`dupfind analyze`: the main job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind.cli_common import (
    NoCacheOpt,
    ConfigOpt, PathsArg, RejectsOpt, ReportFormat, RulesOpt, Severity, SinceOpt, StrictOpt,
    TzOpt, UntilOpt, app, load_with_config, write_output,
)
from dupfind.errors import DupfindError


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
    no_cache: NoCacheOpt = False,
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
    result = load_with_config(cfg, paths, since, until, rejects, strict, use_cache=not no_cache)
    report = run_analysis(result, cfg, rule_list, skew, _parse_timeouts(timeout or []), max_jobs_per_value)
    options = RenderOptions(worst=worst, color=output is None and sys.stdout.isatty(), command=["dupfind", *sys.argv[1:]])
    write_output(lambda out: RENDERERS[output_format.value](report, out, options), output)
    if fail_on is not None and any(severity_rank(f.severity) >= severity_rank(fail_on.value) for f in report.findings):
        raise typer.Exit(1)

"""`dupfind stats`: queue health, the visibility-timeout advisor and lock findings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind.cli_common import (
    ConfigOpt, NoCacheOpt, PathsArg, RejectsOpt, RulesOpt, SinceOpt, StrictOpt, TableOrJson, TimeoutOpt, TzOpt,
    UntilOpt, app, load_with_config, parse_timeouts, write_output,
)
from dupfind.errors import DupfindError


def _parse_bucket(value: str | None) -> float | None:
    """30, 30s, 5m or 1h."""
    if value is None:
        return None
    text = value.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], None)
    try:
        seconds = float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise DupfindError(f"--bucket {value!r} is not a duration such as 30s, 5m or 1h.")
    return seconds


@app.command()
def stats(
    paths: PathsArg,
    output_format: Annotated[TableOrJson, typer.Option("--format", "-f", help="table (terminal) or json (one document).")] = TableOrJson.table,
    timeout: TimeoutOpt = None,
    bucket: Annotated[Optional[str], typer.Option("--bucket", help="Bucket of the receives-vs-publishes view (30s, 1m, 5m); default: about 30 buckets.")] = None,
    skew: Annotated[float, typer.Option("--skew", help="Clock-skew tolerance in seconds between hosts (for the lock rules).")] = 0.5,
    disable: Annotated[Optional[list[str]], typer.Option("--disable", help="Disable a rule by code or name (repeatable).")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to this file instead of stdout.")] = None,
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    assume_tz: TzOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    rejects: RejectsOpt = None,
    strict: StrictOpt = False,
    no_cache: NoCacheOpt = False,
) -> None:
    """Queue health per queue, job type and deployment (published, received, redelivered, failed,
    lost, duplicated; processing duration percentiles; queue wait), receives vs publishes over time,
    the visibility timeout (configured, logged or inferred) with advice, and lock findings."""
    from dupfind.analyze import analyze as run_analysis
    from dupfind.config import load_config
    from dupfind.queue_stats import build_stats
    from dupfind.render.stats_report import render_stats_json, render_stats_table
    from dupfind.rules_registry import load_rules

    if skew < 0:
        raise DupfindError("--skew must be zero or more seconds.")
    bucket_s = _parse_bucket(bucket)
    timeouts = parse_timeouts(timeout or [])
    cfg = load_config(config, rules, assume_tz)
    rule_list = load_rules(cfg, rules, tuple(disable or ()))
    result = load_with_config(cfg, paths, since, until, rejects, strict, use_cache=not no_cache)
    report = build_stats(run_analysis(result, cfg, rule_list, skew, timeouts), bucket_s)
    if output_format is TableOrJson.json:
        write_output(lambda out: render_stats_json(report, out), output)
    else:
        color = output is None and sys.stdout.isatty()
        write_output(lambda out: render_stats_table(report, out, color=color), output)

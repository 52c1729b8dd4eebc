"""`dupfind stats`: queue health, the visibility-timeout advisor and lock findings."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from dupfind.cli_common import (
    ConfigOpt,
    DisableOpt,
    MaxJobsOpt,
    MemoryLimitOpt,
    NoCacheOpt,
    OutputOpt,
    PathsArg,
    RedactOpt,
    RejectsOpt,
    RulesOpt,
    SinceOpt,
    SkewOpt,
    StrictOpt,
    TableOrJson,
    TimeoutOpt,
    TzOpt,
    UntilOpt,
    WindowOverlapOpt,
    app,
    emit,
    make_redactor,
    report_width,
    window_options,
)
from dupfind.errors import DupfindError


@app.command()
def stats(
    paths: PathsArg,
    output_format: Annotated[
        TableOrJson, typer.Option("--format", "-f", help="table (terminal) or json (one document).")
    ] = TableOrJson.table,
    timeout: TimeoutOpt = None,
    bucket: Annotated[
        Optional[str],
        typer.Option(
            "--bucket", help="Bucket of the receives-vs-publishes view (30s, 1m, 5m); default: about 30 buckets."
        ),
    ] = None,
    max_rows: Annotated[
        int,
        typer.Option(
            "--max-rows",
            help="Deployments in the terminal's per-deployment tables: those with the most duplicated side "
            "effects, then redeliveries (0: every one; JSON always lists every one).",
        ),
    ] = 25,
    skew: SkewOpt = 0.5,
    disable: DisableOpt = None,
    output: OutputOpt = None,
    redact: RedactOpt = None,
    max_jobs_per_value: MaxJobsOpt = 25,
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    assume_tz: TzOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    rejects: RejectsOpt = None,
    strict: StrictOpt = False,
    no_cache: NoCacheOpt = False,
    memory_limit: MemoryLimitOpt = None,
    window_overlap: WindowOverlapOpt = "1h",
) -> None:
    """Queue health per queue, job type and deployment (published, received, redelivered, failed,
    lost, duplicated; processing duration percentiles; queue wait), receives vs publishes over time,
    the visibility timeout (configured, logged or inferred) with advice, and lock findings."""
    from dupfind.commands.analyze import run_analysis
    from dupfind.pipeline import store_context_facts
    from dupfind.read_plan import parse_duration
    from dupfind.render.registry import STATS_RENDERERS, RenderOptions

    if max_rows < 0:
        raise DupfindError("--max-rows must be 0 (every deployment) or more.")
    bucket_s = parse_duration(bucket, "--bucket") if bucket is not None else None
    budget, overlap = window_options(paths, memory_limit, window_overlap, since, until, use_cache=not no_cache)
    if budget is None:
        report, cfg = run_analysis(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since,
                                   until, rejects, strict, use_cache=not no_cache)
        stats_report = _stats_report(report, bucket_s)
    else:  # too large to read whole: each window of time counts what is its own, then all is grouped
        from dupfind.commands.analyze import run_windowed
        from dupfind.queue_stats import HEALTH_RULES, StatsReport
        from dupfind.windows_views import stats_aside

        report, cfg, _, shown = run_windowed(paths, disable, skew, timeout, max_jobs_per_value, config, rules,
                                             assume_tz, since, until, rejects, strict, budget, overlap, False,
                                             use_cache=not no_cache, **stats_aside(bucket_s))
        stats_report = StatsReport(analysis=report, findings=report.findings_of(*HEALTH_RULES), **shown)
    _output_cached_beside(stats_report, report, bucket_s)
    options = RenderOptions(
        width=report_width(output),
        color=output is None and sys.stdout.isatty(),
        max_rows=max_rows,
        redactor=make_redactor(redact, output_format.value, None, cfg.business_keys, context=report.context),
    )
    emit(STATS_RENDERERS, output_format.value, stats_report, options, output)
    store_context_facts(report.context)


def _output_cached_beside(stats_report, report, bucket_s: float | None) -> None:
    """Let the rendered stats of a cached analysis be stored and reused (pipeline.write_cached_output),
    keyed by that analysis and the bucket, which are all they are made of. Rendered each time, the
    JSON of 20,000 small files took 1.1 s of a 1.3 s command, most of it their file reports."""
    from dupfind.pipeline import CACHE_REF
    from dupfind.result_cache import ResultCache

    known = report.__dict__.get(CACHE_REF)
    if known is not None:
        cache, set_key, analysis_key = known
        stats_report.__dict__[CACHE_REF] = (
            cache, set_key, ResultCache.value_key(analysis_key, "stats", {"bucket_s": bucket_s}))


def _stats_report(report, bucket_s: float | None):
    """build_stats, or its tables from the result cache (the findings are the analysis' own health
    findings, decoded alone from a cached analysis; `analyze` prepares the default bucket's)."""
    from dupfind.pipeline import STATS_VALUE, cached_value
    from dupfind.queue_stats import StatsReport, stats_state

    parts = cached_value(report, STATS_VALUE, {"bucket_s": bucket_s}, lambda: stats_state(report, bucket_s))
    return StatsReport(**{
        name: report if "analysis" in part else report.findings_of(*part["findings_of"]) if "findings_of" in part
        else part["value"]
        for name, part in parts.items()
    })

"""`dupfind analyze`: the main job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind.cli_common import (
    ConfigOpt, DisableOpt, MaxJobsOpt, MemoryLimitOpt, NoCacheOpt, OutputOpt, PathsArg, RedactOpt, RejectsOpt,
    ReportFormat, RulesOpt, Severity, SinceOpt, SkewOpt, StrictOpt, TimeoutOpt, TzOpt, UntilOpt, WindowOverlapOpt, app,
    command_line, correlate_with_config, emit, make_redactor, parse_timeouts, window_options,
)
from dupfind.errors import DupfindError


def _options(skew, timeout, config, rules, assume_tz, disable, cfg=None):
    """The analysis options checked and loaded: (timeouts, configuration, rules)."""
    from dupfind.config import load_config
    from dupfind.rules_registry import load_rules

    if skew < 0:
        raise DupfindError("--skew must be zero or more seconds.")
    timeouts = parse_timeouts(timeout or [])
    cfg = cfg or load_config(config, rules, assume_tz)
    return timeouts, cfg, load_rules(cfg, rules, tuple(disable or ()))


def run_analysis(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until,
                 rejects, strict, use_cache=True, cfg=None, kept=None, keep_frames=True, naming=()):
    """Load, correlate and run every enabled rule: the AnalysisReport and the effective config.

    With the cache on, unchanged inputs are not read again and the same rules and options reuse
    the stored findings (see dupfind/result_cache.py); `cfg` is a configuration already loaded.
    With `kept` (kept_records: inputs read in windows of time), the records of --since/--until
    are those the analysis in windows kept, unless --rejects or --strict ask for every line.
    `naming`: the reports of the other inputs that name workers of these (file_workers.naming_reports)."""
    from dupfind.pipeline import CACHE_REF, analyze_correlated

    timeouts, cfg, rule_list = _options(skew, timeout, config, rules, assume_tz, disable, cfg)
    found = correlated_of_kept(kept, cfg, since, until, max_jobs_per_value, rejects, strict)
    if found is not None:
        from dupfind.analyze import analyze

        loaded, ref = found
        report = analyze(loaded.result, cfg, rule_list, skew, timeouts, max_jobs_per_value, correlation=loaded.correlation)
        report.__dict__[CACHE_REF] = ref  # what is derived from this read is cached beside the analysis in windows
        return report, cfg
    loaded = correlate_with_config(cfg, paths, since, until, rejects, strict, max_jobs_per_value, use_cache=use_cache,
                                   naming=naming)
    return analyze_correlated(loaded, cfg, rule_list, skew, timeouts, max_jobs_per_value, keep_frames), cfg


def run_windowed(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until, rejects,
                 strict, budget, overlap, protect, use_cache=True, collect=None, share=None, derived=None,
                 derived_optional=False):
    """The analysis of inputs too large to read whole, one window of time at a time (dupfind.windows):
    the report, the effective config, the ids a redactor leaves alone (with `protect`) and what
    `collect` took of each window. With `derived` (kind, params, build(report, collected)), the
    last is that value instead, stored beside the analysis: a stored analysis is used with `collect`
    only when that value is stored too, unless `derived_optional` (the value is then None: it is
    made for later commands, when the analysis is made)."""
    from datetime import timedelta

    from dupfind import background
    from dupfind.cli_common import progress_console, rejects_and_strict
    from dupfind.pipeline import CACHE_REF
    from dupfind.windows import analyze_in_windows
    from dupfind.windows_cache import load_cached, load_cached_value, store_cached, store_cached_value, store_spill

    timeouts, cfg, rule_list, since_ts, until_ts, ref = _windowed_ref(
        paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until, overlap, use_cache)
    if ref is not None and rejects is None and not strict:  # those need the rejected lines themselves
        # The stored analysis is loaded only when it will do: held while the windows are analysed
        # again (for a value not stored beside it), it took 0.3 GB at 5M lines.
        found, value = (True, []) if derived is None else load_cached_value(ref, *derived[:2])
        usable = found or derived_optional
        hit = load_cached(ref, rule_list) if usable and (collect is None or derived is not None) else None
        if hit is not None:
            sys.stderr.write("dupfind: the analysis in windows of time of these unchanged inputs comes from the cache.\n")
            hit[0].__dict__[CACHE_REF] = ref  # what is derived from it is cached beside it (pipeline.cached_output)
            return hit[0], cfg, hit[1], value
    kept: list = []

    def keep_spill(spill) -> None:  # moved beside the analysis with the cache writes; usable meanwhile
        kept.append(spill)
        background.defer(store_spill, ref, spill, if_skipped=lambda _, left: left.remove())

    report, protected, collected = analyze_in_windows(
        paths, cfg, rule_list, skew, timeouts, max_jobs_per_value, since_ts, until_ts, budget,
        timedelta(seconds=overlap), progress_console(), protect or ref is not None, collect,
        **({"share": share} if share is not None else {}), keep_spill=keep_spill if ref is not None else None,
    )
    if kept:
        report.__dict__[SPILL] = kept[0]
    rejects_and_strict(report.inputs, rejects, strict)
    value = derived[2](report, collected) if derived is not None else collected
    if ref is not None:
        background.defer(store_cached, ref, report, protected)
        report.__dict__[CACHE_REF] = ref
        if derived is not None:
            background.defer(store_cached_value, ref, *derived[:2], value)
    return report, cfg, protected, value


# Set on a report analysed in windows just now: the survey's spill (windows.Spill), kept beside the
# analysis once the cache writes run and readable meanwhile (kept_records).
SPILL = "_windows_spill"

# --max-jobs-per-value unless given; `timeline` analyses with it always.
DEFAULT_MAX_JOBS_PER_VALUE = 25

# An export of at most this many records gets the timeline's default views drawn once its report is
# out (prepare_default_views): 0.09 s over 20,000 small files (32,341 records), 0.26 s at 198,746
# records, where a first timeline then takes 0.20 s and 0.10 s instead of 0.33 s each (0.11x and
# 0.16x of the cold analysis: loading polars alone is 0.13-0.17 s). Larger exports analyse long
# enough for a first timeline to stay under 0.1x of that.
PREPARED_VIEWS_MAX_RECORDS = 200_000


def kept_records(source) -> tuple | None:
    """(spill, cache ref): the survey's records an analysis in windows of time kept (made now, or
    kept beside the stored one; `source`: that report, or its cache ref), for the reads of a time
    that follow it; None without them."""
    from dupfind.pipeline import CACHE_REF
    from dupfind.windows_cache import stored_spill

    ref = source if isinstance(source, tuple) else source.__dict__.get(CACHE_REF)
    spill = None if isinstance(source, tuple) else source.__dict__.get(SPILL)
    if spill is None and ref is not None:
        spill = stored_spill(ref)
    return (spill, ref) if spill is not None and ref is not None else None


def correlated_of_kept(kept: tuple | None, cfg, since: str | None, until: str | None, max_jobs_per_value: int,
                       rejects=None, strict: bool = False):
    """(correlated, ref): the records of --since/--until among those an analysis in windows of time
    kept, correlated (what reading those of the files would give), and where what is derived from
    this read is cached, beside that analysis; None without them, when they cannot be read, or
    with --rejects or --strict, which are of every line (the files are read instead)."""
    if kept is None or rejects is not None or strict:
        return None
    from dupfind.pipeline import Correlated, correlated_read, time_bounds
    from dupfind.result_cache import ResultCache
    from dupfind.windows import say

    spill, (cache, set_key, base_key) = kept
    since_ts, until_ts = time_bounds(cfg, since, until)
    result = spill.read(since_ts, until_ts, cfg)
    if result is None:
        return None
    say(f"the records of {since or 'the first record'} to {until or 'the last'} are those the analysis in windows of "
        "time kept, not parsed from the files again.")
    ref = (cache, set_key, ResultCache.value_key(base_key, "read", {"since": since, "until": until}))
    return Correlated(result, correlated_read(result, cfg, max_jobs_per_value)), ref


def _windowed_ref(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until, overlap,
                  use_cache):
    """The options of an analysis in windows of time and where the cache keeps it (None: not cached)."""
    from datetime import timedelta

    from dupfind.pipeline import relative_bound, time_bounds
    from dupfind.windows_cache import cache_ref

    timeouts, cfg, rule_list = _options(skew, timeout, config, rules, assume_tz, disable)
    since_ts, until_ts = time_bounds(cfg, since, until)
    ref = None
    if use_cache and not (relative_bound(cfg, since) or relative_bound(cfg, until)):
        ref = cache_ref(paths, cfg, rule_list, skew, timeouts, max_jobs_per_value, since_ts, until_ts,
                        timedelta(seconds=overlap))
    return timeouts, cfg, rule_list, since_ts, until_ts, ref


def stored_windowed_inputs(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until,
                           overlap, use_cache=True) -> tuple[list | None, tuple | None]:
    """What the cache holds of the analysis in windows of time of these inputs, nothing read or
    analysed: (file reports, each input's span; kept_records). The reports are only loaded when
    no records were kept (4,155 of them took 1.6 s at 5M lines)."""
    from dupfind.windows_cache import load_cached_files

    *_, ref = _windowed_ref(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until,
                            overlap, use_cache)
    if ref is None:
        return None, None
    kept = kept_records(ref)
    return (None if kept is not None else load_cached_files(ref)), kept


def _stats_state(report):
    from dupfind.queue_stats import stats_state  # only when the stats are made: a warm run needs none of it

    return stats_state(report, None)


def _trace_around(finding, paths, files, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz,
                  overlap, use_cache, kept=None):
    """The trace of a finding of inputs read in windows of time, from a read around its span of the
    records the analysis `kept` (kept_records), else of the `files` (reports) with records in it
    (the same as `trace --finding` gives); None when that read does not find it."""
    from datetime import timedelta

    from dupfind.file_workers import naming_reports
    from dupfind.trace import build_trace
    from dupfind.windows_views import around_finding, files_for_read

    bounds = around_finding(finding, timedelta(seconds=overlap))
    if bounds is None:
        return None
    analysis, _ = run_analysis(files_for_read(paths, files, *bounds), disable, skew, timeout, max_jobs_per_value,
                               config, rules, assume_tz, *bounds, None, False, use_cache=use_cache, kept=kept,
                               naming=naming_reports(files))
    found = analysis.findings_where(lambda _, fingerprint: fingerprint == finding.fingerprint)
    if not found or found[0].action_id is None:
        return None
    return build_trace(analysis.context, found[0].action_id, [f"finding {finding.fingerprint}"])


@app.command()
def analyze(
    paths: PathsArg,
    output_format: Annotated[ReportFormat, typer.Option(
        "--format", "-f",
        help="table (terminal), json (one document), ndjson (one finding per line), markdown (ticket body).",
    )] = ReportFormat.table,
    fail_on: Annotated[Optional[Severity], typer.Option(
        "--fail-on", help="Exit 1 when a finding at or above this severity exists (with --baseline: a new one).",
    )] = None,
    baseline: Annotated[Optional[list[Path]], typer.Option(
        "--baseline",
        help="An earlier `analyze --format json` output: report only findings whose fingerprints are new (repeatable).",
    )] = None,
    disable: DisableOpt = None,
    skew: SkewOpt = 0.5,
    timeout: TimeoutOpt = None,
    worst: Annotated[int, typer.Option("--worst", help="How many incidents the terminal report details.")] = 5,
    max_rows: Annotated[int, typer.Option(
        "--max-rows", help="Deploy windows in the terminal report: those with the most duplicates (0: every one; "
                           "JSON always lists every one).")] = 25,
    output: OutputOpt = None,
    redact: RedactOpt = None,
    max_jobs_per_value: MaxJobsOpt = DEFAULT_MAX_JOBS_PER_VALUE,
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
    """Find side effects executed more than once (which actions, workers, attempts, deploys),
    name the root cause with the log lines that prove it, and list the fixes."""
    from dupfind.findings import severity_rank
    from dupfind.pipeline import store_context_facts
    from dupfind.render.registry import RENDERERS, RenderOptions

    if max_rows < 0:
        raise DupfindError("--max-rows must be 0 (every deploy window) or more.")
    if baseline:
        from dupfind.baseline import load_fingerprints

        for path in baseline:  # a bad baseline fails before the (long) analysis, not after
            load_fingerprints(path)
    budget, overlap = window_options(paths, memory_limit, window_overlap, since, until, use_cache=not no_cache)
    protected = None
    if budget is None:
        # The Markdown ticket traces its worst finding, and a baseline's summary counts side
        # effects, from the detectors' frames; the other formats render the findings alone (and
        # with the cache on the frames are stored).
        report, cfg = run_analysis(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since,
                                   until, rejects, strict, use_cache=not no_cache,
                                   keep_frames=output_format.value == "markdown" or bool(baseline))
    else:
        from dupfind.windows_views import stats_aside

        # With the cache on, each window also counts what `stats` shows, stored beside the analysis:
        # `stats` after it then reads nothing (at 5M lines it analysed the windows again, 45 s).
        report, cfg, protected, _ = run_windowed(
            paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since, until, rejects, strict,
            budget, overlap, protect=redact if redact is not None else output_format.value == "markdown",
            use_cache=not no_cache, **(stats_aside(None) if not no_cache else {}), derived_optional=True,
        )
    if budget is None and not no_cache:
        # What `stats` shows of this analysis, made once the report is out (as the analysis in
        # windows does above): a `stats` after it then loads no frame of the table, nor polars.
        from dupfind import background
        from dupfind.pipeline import ANALYSED_NOW, MARKDOWN_VALUE, STATS_VALUE, drawn_ticket_parts, prepare_value

        # The timeline's default views of a small export, and the traces of its worst findings' job
        # ids, after the two below (first: before the cache writes): `timeline`, or `trace` of
        # such an id, after it then loads nothing either. They analyse with the default rules,
        # timeouts and id fan-out, so they read this analysis only when they are.
        if (report.__dict__.get(ANALYSED_NOW) and report.summary.get("records", 0) <= PREPARED_VIEWS_MAX_RECORDS
                and not disable and not timeout and max_jobs_per_value == DEFAULT_MAX_JOBS_PER_VALUE):
            from dupfind.commands.timeline import prepare_default_views
            from dupfind.commands.trace import prepare_worst_traces

            background.defer(prepare_default_views, report, first=True)
            background.defer(prepare_worst_traces, report, cfg, first=True)
        # And the Markdown ticket but its command line, masked as a ticket is by default: the
        # ticket after it then reads no finding and builds no trace (nor loads polars).
        if output_format.value != "markdown":
            background.defer(prepare_value, report, MARKDOWN_VALUE, {"redacted": True}, lambda: drawn_ticket_parts(
                report, make_redactor(None, "markdown", None, cfg.business_keys, context=report.context)), first=True)
        background.defer(prepare_value, report, STATS_VALUE, {"bucket_s": None}, lambda: _stats_state(report),
                         first=True)
    if baseline:
        from dupfind.baseline import apply_baseline

        report = apply_baseline(report, baseline)
    options = RenderOptions(
        worst=worst, max_rows=max_rows, color=output is None and sys.stdout.isatty(), command=command_line(), paths=paths,
        redactor=make_redactor(redact, output_format.value, lambda: report.context.table if report.context else None,
                               cfg.business_keys, context=report.context, protected=protected),
    )
    if budget is not None:  # read in windows: a finding is traced from a read around it
        options.trace_finding = lambda finding: _trace_around(
            finding, paths, report.inputs.files, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz,
            overlap, not no_cache, kept_records(report))
    emit(RENDERERS, output_format.value, report, options, output)
    store_context_facts(report.context)
    if fail_on is not None and any(severity_rank(f.severity) >= severity_rank(fail_on.value) for f in report.findings):
        raise typer.Exit(1)

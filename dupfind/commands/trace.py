"""`dupfind trace`: one action's story across every file, in time order, annotated."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind.cli_common import (
    ConfigOpt, DisableOpt, MaxJobsOpt, MemoryLimitOpt, NoCacheOpt, OutputOpt, RedactOpt, RejectsOpt, RulesOpt,
    SinceOpt, SkewOpt, StrictOpt, TimeoutOpt, TraceFormat, TzOpt, UntilOpt, WindowOverlapOpt, app,
    correlate_with_config, make_redactor, parse_timeouts, progress_console, report_width, window_options,
    write_output,
)
from dupfind.errors import DupfindError
from dupfind.mapped_file import write_end


def split_ids_and_paths(args: list[str], ids: list[str], finding: str | None) -> tuple[list[str], list[str]]:
    """`trace ID PATH...`, or `trace --id ID [--id ID2] PATH...` / `trace --finding FP PATH...`."""
    if ids or finding:
        if not args:
            raise DupfindError("give at least one PATH to read (log files, folders, or - for standard input).")
        return ids, args
    if len(args) < 2:
        raise DupfindError("give the id to trace and at least one PATH: dupfind trace ID PATH... (or --id ID PATH...).")
    first = args[0]
    if first == "-" or Path(first).exists():
        raise DupfindError(
            f"{first!r} is a file or folder, not an id: give the id first (dupfind trace ID PATH...) or use --id ID."
        )
    return [first], args[1:]


DEFAULT_MAX_ACTIONS, DEFAULT_MAX_RECORDS = 20, 1000  # --max-actions, --max-records unless given
# How many of its worst findings' job ids `analyze` draws the trace of, for an export small enough
# (prepare_worst_traces): 0.11 s each over 20,000 small files, where a first `trace ID` then takes
# 0.19 s instead of 0.38 s (0.13x of the cold analysis: loading polars alone is 0.13-0.17 s).
PREPARED_TRACES = 1


def _shape(queries, finding, max_actions, max_records, fmt, width, color, redact) -> dict:
    """What a trace's stored output is kept under (beside its inputs' cached analysis or context)."""
    return {"ids": queries, "finding": finding, "max_actions": max_actions, "max_records": max_records,
            "format": fmt, "width": width, "color": color, "redact": redact}


def _traced(build, fmt: str, width: int, color: bool, redact: bool | None, cfg) -> tuple[bytes, dict]:
    """The bytes of the trace `build()` gives in format `fmt`, and the notes for stderr."""
    from dupfind.render.registry import TRACE_RENDERERS, RenderOptions, render_bytes

    report = build()
    options = RenderOptions(
        width=width, color=color, redactor=make_redactor(redact, fmt, None, cfg.business_keys, context=report.context),
    )
    data = render_bytes(TRACE_RENDERERS, fmt, report, options)
    masked = options.redactor.summary() if options.redactor is not None else None
    return data, {"not_found": report.not_found, "masked": masked}


def prepare_worst_traces(report, cfg) -> None:
    """Store, beside the context of `report`'s cached analysis, what `trace ID` over the same
    inputs writes with no option for the first job id (else the first id) of its worst finding
    (of each of the PREPARED_TRACES worst that name one): the terminal view as this process's
    standard output would show it. `analyze` calls it once its report is out, for an export small
    enough (as the timeline's views): tracing the id an engineer copies first from the report then
    loads no frame, nor polars."""
    from dupfind.pipeline import prepare_output
    from dupfind.trace import trace_ids

    ctx = report.context
    width, color = report_width(None), sys.stdout.isatty()
    chosen: list[str] = []
    for found in report.findings:
        ids = found.ids.get("job_id") or next((values for values in found.ids.values() if values), None)
        if ids and ids[0] not in chosen:
            chosen.append(ids[0])
        if len(chosen) == PREPARED_TRACES:
            break
    for value in chosen:
        build = partial(trace_ids, ctx, [value], DEFAULT_MAX_ACTIONS, DEFAULT_MAX_RECORDS)
        prepare_output(ctx, "trace", _shape([value], None, DEFAULT_MAX_ACTIONS, DEFAULT_MAX_RECORDS, "table", width,
                                            color, None),
                       partial(_traced, build, "table", width, color, None, cfg), noted=True)


def _bounds_around(paths, queries, finding, budget, overlap, disable, skew, timeout, max_jobs_per_value, config, rules,
                   assume_tz, since, until, use_cache) -> tuple[str, str, list[str], tuple | None, list]:
    """--since/--until for a trace of inputs too large to read whole: around the records of the
    ids (found by a survey that keeps only those), or around the finding's span (from the analysis
    in windows of time, stored by `analyze` or made now); the inputs that hold records then; the
    records that analysis kept (analyze.kept_records), read instead of the inputs; and the reports
    that name the workers of that read (file_workers.naming_reports)."""
    from datetime import timedelta

    from dupfind.commands.analyze import kept_records
    from dupfind.config import load_config
    from dupfind.file_workers import naming_reports
    from dupfind.pipeline import time_bounds
    from dupfind.timefmt import iso
    from dupfind.windows_views import around_finding, files_for_read, trace_bounds

    window = timedelta(seconds=overlap)
    if finding:
        from dupfind.commands.analyze import run_windowed
        from dupfind.trace import finding_to_trace

        report, _, _, _ = run_windowed(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz, since,
                                    until, None, False, budget, overlap, False, use_cache)
        found = finding_to_trace(report, finding)
        bounds = around_finding(found, window)
        if bounds is None:
            raise DupfindError(f"finding {found.fingerprint} has no time to read around: narrow the read with "
                               "--since/--until.")
        sys.stderr.write(f"dupfind: these inputs are too large to read whole: reading around finding "
                         f"{found.fingerprint} ({iso(found.first_ts)} to {iso(found.last_ts or found.first_ts)}, "
                         f"{overlap:g} s each side).\n")
        return (*bounds, files_for_read(paths, report.inputs.files, *bounds), kept_records(report),
                naming_reports(report.inputs.files))
    from dupfind.commands.analyze import stored_windowed_inputs

    cfg = load_config(config, rules, assume_tz)
    since_ts, until_ts = time_bounds(cfg, since, until)
    # When `analyze` stored its analysis in windows: the records it kept are searched, else every
    # file's span is known and the survey reads only the files whose text holds an id queried.
    files, kept = stored_windowed_inputs(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz,
                                         since, until, overlap, use_cache)
    bounds = trace_bounds(paths, cfg, queries, since_ts, until_ts, budget, window, progress_console(), files=files,
                          spill=kept[0] if kept is not None else None)
    if bounds is None:
        listed = ", ".join(repr(q) for q in queries)
        raise DupfindError(f"no record carries {listed} in any id column; check the value, or map the field that "
                           "holds it with [aliases] in dupfind.toml.")
    return iso(bounds[0]), iso(bounds[1]), bounds[2], kept, bounds[3]


@app.command()
def trace(
    args: Annotated[Optional[list[str]], typer.Argument(metavar="[ID] PATH...", show_default=False, help=(
        "The id to trace, then log files, folders or - (with --id or --finding, every argument is a path)."))] = None,
    ids: Annotated[Optional[list[str]], typer.Option("--id", metavar="ID", help=(
        "An id to trace (repeatable): job id, event id, idempotency key, notification/order id, request id, "
        "provider message id; COLUMN=VALUE searches one column only."))] = None,
    finding: Annotated[Optional[str], typer.Option("--finding", metavar="FINGERPRINT", help=(
        "Trace the action of this finding fingerprint (or a unique prefix of it) from `dupfind analyze`; "
        "the analysis is re-run with the options given here."))] = None,
    output_format: Annotated[TraceFormat, typer.Option(
        "--format", "-f", help="table (terminal), json, or markdown (for a ticket).")] = TraceFormat.table,
    output: OutputOpt = None,
    redact: RedactOpt = None,
    max_actions: Annotated[int, typer.Option(
        "--max-actions", help="Trace at most this many actions (an id such as a user id may belong to many).")
    ] = DEFAULT_MAX_ACTIONS,
    max_records: Annotated[int, typer.Option(
        "--max-records", help="Show at most this many records of one action.")] = DEFAULT_MAX_RECORDS,
    disable: DisableOpt = None,
    skew: SkewOpt = 0.5,
    timeout: TimeoutOpt = None,
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
    """Print every record of the action(s) an id belongs to, from all files in time order: time,
    delta, worker, deployment, attempt, kind, event, key fields and file:line, with notes where the
    story turns (a redelivery while the first attempt ran, a second provider request, a kill)."""
    from dupfind.pipeline import cached_output, store_context_facts
    from dupfind.trace import trace_finding, trace_ids

    if ids and finding:
        raise DupfindError("give either ids (--id or the first argument) or --finding, not both.")
    if max_actions < 1 or max_records < 1:
        raise DupfindError("--max-actions and --max-records must be at least 1.")
    queries, paths = split_ids_and_paths(args or [], [i for i in ids or [] if i.strip()], finding)
    budget, overlap = window_options(paths, memory_limit, window_overlap, since, until, use_cache=not no_cache)
    kept, naming = None, []
    if budget is not None:  # too large to read whole: read only around what is traced
        since, until, held, kept, naming = _bounds_around(paths, queries, finding, budget, overlap, disable, skew, timeout,
                                                  max_jobs_per_value, config, rules, assume_tz, since, until,
                                                  not no_cache)
        if rejects is None and not strict:  # those are of every line: every file is read then
            paths = held
    if finding:
        from dupfind.commands.analyze import run_analysis

        analysis, cfg = run_analysis(paths, disable, skew, timeout, max_jobs_per_value, config, rules, assume_tz,
                                     since, until, rejects, strict, use_cache=not no_cache, kept=kept, naming=naming)
        ctx, cached = analysis.context, analysis
        build = lambda: trace_finding(ctx, analysis, finding, max_records)  # noqa: E731
    else:
        from dupfind.commands.analyze import correlated_of_kept
        from dupfind.config import load_config
        from dupfind.pipeline import CACHE_REF, analysis_context

        if skew < 0:
            raise DupfindError("--skew must be zero or more seconds.")
        timeouts = parse_timeouts(timeout or [])
        cfg = load_config(config, rules, assume_tz)
        found = correlated_of_kept(kept, cfg, since, until, max_jobs_per_value, rejects, strict)
        loaded = found[0] if found is not None else correlate_with_config(
            cfg, paths, since, until, rejects, strict, max_jobs_per_value, use_cache=not no_cache, naming=naming)
        ctx = cached = analysis_context(loaded, cfg, skew, timeouts)  # no rules run: enough to trace any id
        if found is not None:
            ctx.__dict__[CACHE_REF] = found[1]  # the trace is cached beside the analysis in windows
        build = lambda: trace_ids(ctx, queries, max_actions, max_records)  # noqa: E731
    width, color = report_width(output), output is None and sys.stdout.isatty()
    # The same trace of the same (cached) inputs and analysis is written again as an earlier run did.
    shape = _shape(queries, finding, max_actions, max_records, output_format.value, width, color, redact)
    data, notes = cached_output(cached, "trace", shape, lambda: _traced(build, output_format.value, width, color,
                                                                         redact, cfg))
    for query in notes["not_found"]:
        sys.stderr.write(f"dupfind: no record carries {query!r}\n")
    write_output(lambda out: write_end(out, data), output)
    if notes["masked"]:
        sys.stderr.write(f"dupfind: {notes['masked']}\n")
    store_context_facts(ctx)

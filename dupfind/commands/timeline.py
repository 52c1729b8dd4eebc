"""`dupfind timeline`: deploy windows, worker lifetimes and executions on one time axis."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Optional

import typer

from dupfind.cli_common import (
    ConfigOpt,
    MemoryLimitOpt,
    NoCacheOpt,
    OutputOpt,
    PathsArg,
    RedactOpt,
    RejectsOpt,
    RulesOpt,
    SinceOpt,
    StrictOpt,
    TableOrJson,
    TzOpt,
    UntilOpt,
    WindowOverlapOpt,
    app,
    make_redactor,
    window_options,
    write_output,
)
from dupfind.errors import DupfindError
from dupfind.mapped_file import write_end

# A read that draws views holds their document beside its analysis: planned to this share of the
# memory limit (an analysis' windows take 85%, read_plan.PLANNED_SHARE; at 5M lines, reads that
# size drawing 355 views each peaked at 1.29 GB under a limit of 1 GB).
TIMELINE_PLANNED_SHARE = 0.6

DEFAULT_WINDOW = "10m"
DEFAULT_MAX_ROWS = 40


def deploy_reads(rows: list[dict], chosen: list[str], bounds: list[list[str | None]], overlap_s: float,
                 since: datetime | None, until: datetime | None,
                 fits: Callable[[datetime | None, datetime | None], bool] | None = None,
                 ) -> list[tuple[str | None, str | None, list[str]]]:
    """The reads that draw the views of the `chosen` deploys of inputs read in windows of time
    (`rows`: the summary's deploy windows; `bounds`: its windows' [start, end)): the deploys each
    window owns (where they start) together, in as few reads as `fits` allows (one a window without
    it; a deploy alone when even that does not fit). A read spans its deploys' views, from the first
    start to the last end and the redelivery tail, with the overlap each side, as a read around each
    deploy would: --since/--until and the name of each deploy drawn from it."""
    from dupfind.deploy_concentration import MAX_TAIL_S
    from dupfind.timefmt import iso

    overlap, tail = timedelta(seconds=overlap_s), timedelta(seconds=MAX_TAIL_S)
    parsed = [(datetime.fromisoformat(a) if a else None, datetime.fromisoformat(b) if b else None) for a, b in bounds]
    spans = {r["deploy"]: (datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"])) for r in rows}

    def read_of(names: list[str]) -> tuple[datetime | None, datetime | None]:
        first = min(spans[n][0] for n in names) - overlap
        last = max(spans[n][1] for n in names) + tail + overlap
        return max(first, since or first), min(last, until or last)

    reads = []
    for start, end in parsed or [(None, None)]:
        owned = [n for n in chosen if (start is None or spans[n][0] >= start) and (end is None or spans[n][0] < end)]
        at = 0
        while at < len(owned):
            # The most deploys from `at` whose read fits, at least one: a read of more deploys spans
            # at least as much, so a binary search finds what adding them one by one would (fits
            # asks every file's span: 1,377 questions took 3.5 s at 5M lines, now a few a read).
            low, high = 1, len(owned) - at
            while fits is not None and low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if fits(*read_of(owned[at:at + middle])) else (low, middle - 1)
            group = owned[at:at + (high if fits is None else low)]
            reads.append((*map(iso, read_of(group)), group))
            at += len(group)
    return reads


def _every_deploy(paths, budget, overlap, width_s, skew, config, rules, assume_tz, since, until, rejects, strict,
                  use_cache, redact, bounds_at, html, output_format, output, width, max_rows) -> None:
    """The timeline of every deploy of inputs too large to read whole, written out: the deploys from
    the analysis in windows of time (stored by `analyze` or made now; it writes --rejects and
    applies --strict, over every line), their views drawn in as few reads as fit (deploy_reads).
    Each output is stored beside that analysis, so the same timeline again reads nothing."""
    from dupfind.commands.analyze import kept_records, run_windowed
    from dupfind.pipeline import cached_output
    from dupfind.windows_views import read_fits

    windowed = run_windowed(paths, None, skew, None, 25, config, rules, assume_tz, since, until, rejects, strict,
                            budget, overlap, False, use_cache)[0]
    rows = windowed.summary["deploys"]["windows"]
    chosen = [r["deploy"] for r in rows if r["previous"] is not None] or [r["deploy"] for r in rows]
    if not chosen:
        raise DupfindError("these inputs are too large to read whole and no deploy was found in them: choose a time "
                           "with --around TIME, and the timeline reads only around it.")
    reads = deploy_reads(rows, chosen, windowed.summary.get("windows", {}).get("bounds", []), overlap, *bounds_at,
                         fits=read_fits(paths, windowed.inputs.files, budget * TIMELINE_PLANNED_SHARE))
    json_alone = output_format == TableOrJson.json and html is None
    # Entries as JSON text for --format json and the page (which embeds them as such), as the
    # drawn fields for the terminal view: views held as dicts took 6.7 GB at 5M lines.
    kinds = (True,) * (html is not None or output_format == TableOrJson.json) + (False,) * (
        output_format == TableOrJson.table)
    console = _console(output, width) if output_format == TableOrJson.table else None

    def views():
        return _views_by_read(reads, paths, windowed.inputs.files, width_s, skew, config, rules, assume_tz, redact,
                              kinds, (kept_records(windowed) or (None,))[0], console)

    held: dict = {}

    def document(as_json: bool) -> tuple[dict, str | None]:
        """Every view (entries as JSON text or as the drawn fields), and what redaction masked."""
        if not held:
            kept: dict[bool, list] = {kind: [] for kind in kinds}
            masked, head = None, {}
            for docs, note in views():
                for kind, doc in docs.items():
                    kept[kind].extend(doc.pop("windows"))
                    head = doc
                masked = note or masked
            held.update({kind: ({**head, "verdict": windowed.verdict, "windows": kept[kind]}, masked) for kind in kinds})
        return held[as_json]

    # The reads shape the views (a generation that started before its read is inferred).
    shape = {"width_s": width_s, "redacted": bool(redact), "reads": [r[:2] for r in reads]}
    said = []
    if html is not None:
        from dupfind.render.timeline_html import render_html

        page, note = cached_output(windowed, "timeline:every:html", shape,
                                   lambda: (render_html(document(True)[0]).encode(), document(True)[1]))
        write_output(lambda out: write_end(out, page), html)
        said.append(note)
    if json_alone:
        data, note = cached_output(windowed, "timeline:every:json", shape,
                                   lambda: _json_of_views(windowed.verdict, ((d[True], n) for d, n in views())))
    elif output_format == TableOrJson.json:
        data, note = cached_output(windowed, "timeline:every:json", shape,
                                   lambda: (_json_of_document(document(True)[0]), document(True)[1]))
    else:
        params = {**shape, "width": console.width, "max_rows": max_rows, "color": console.color_system}
        data, note = cached_output(windowed, "timeline:every:table", params,
                                   lambda: (_table_bytes(document(False)[0], console, max_rows), document(False)[1]))
    write_output(lambda out: write_end(out, data), output)
    said.append(note)
    if any(said):
        sys.stderr.write(f"dupfind: {next(n for n in reversed(said) if n)}\n")


def _views_by_read(reads, paths, files, width_s, skew, config, rules, assume_tz, redact, kinds: tuple[bool, ...],
                   spill=None, console=None):
    """For each read of deploy_reads (of the `spill` the windowed analysis kept, else of the
    `files`, reports, with records in it): the document of its deploys' views for each kind asked
    for (True: every field of each execution's entry, as JSON text, an orjson.Fragment; False: what
    the terminal draws on `console`, each worker's bar as cells), and what redaction masked."""
    from dupfind.analyze import analyze
    from dupfind.commands.analyze import _options, run_analysis
    from dupfind.file_workers import naming_reports
    from dupfind.render.timeline_text import DRAWN_ENTRY_FIELDS, bar_width
    from dupfind.timeline import entries_on_one_line, select_windows, timeline_document
    from dupfind.windows import release_memory, say
    from dupfind.windows_views import files_for_read

    timeouts, cfg, _ = _options(skew, None, config, rules, assume_tz, None)
    for number, (read_from, read_to, names) in enumerate(reads, 1):
        source = "the records the analysis kept" if spill is not None and not spill.failed else "the files"
        say(f"these inputs are too large to read whole: read {number}/{len(reads)}, {read_from or 'the first record'} "
            f"to {read_to or 'the last'}, of {source}, draws {len(names)} deploy{'s' if len(names) != 1 else ''}; the "
            "views' counts outside their windows are of those records.")
        kept = spill.read(*(datetime.fromisoformat(b) if b else None for b in (read_from, read_to)), cfg) \
            if spill is not None else None
        if kept is not None:  # the survey's normalised records: what parsing the files would give
            # Correlated only, no rule run: a view draws the records' executions, deploys and side
            # effects, and the document's verdict is the windowed analysis' (the tests compare these
            # views with those of the files' reads, every rule run).
            report = analyze(kept, cfg, [], skew, timeouts, 25)
        else:
            # Not cached: these reads would push the analysis in windows out of the cache (it keeps
            # a few sets), and the timeline they make is stored beside that analysis instead.
            report, cfg = run_analysis(files_for_read(paths, files, read_from, read_to), None, skew, None, 25, config,
                                       rules, assume_tz, read_from, read_to, None, False, use_cache=False,
                                       naming=naming_reports(files))
        redactor = make_redactor(redact, "json", None, cfg.business_keys, context=report.context)
        chosen_windows = [w for name in names for w in select_windows(report, name, None, width_s)]
        docs, masked = {}, None
        if redactor is not None:  # one document redacted (masked once), every field as the whole read's
            redacted = redactor.tree(timeline_document(report, chosen_windows))
            masked = redactor.summary()
            docs = {kind: entries_on_one_line(redacted) if kind else redacted for kind in kinds}
        else:
            docs = {kind: timeline_document(report, chosen_windows, as_json=kind, entry_fields=DRAWN_ENTRY_FIELDS,
                                            bar_width=None if kind else bar_width(console.width))
                    for kind in kinds}
        del report, chosen_windows, kept
        release_memory()  # or the reads' tables (and the texts they made Categorical) outlive them
        yield docs, masked


def _scratch_file():
    """A temporary file in the cache directory, else in the temporary directory, and that directory."""
    import tempfile

    from dupfind.cache import default_cache_dir

    try:
        default_cache_dir().mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryFile(prefix=".timeline-", dir=default_cache_dir()), default_cache_dir()
    except OSError:
        return tempfile.TemporaryFile(prefix="dupfind-timeline-"), tempfile.gettempdir()


def _json_of_views(verdict: str, documents) -> tuple[bytes, str | None]:
    """The bytes --format json writes for the views of these documents (each read's, entries as
    JSON text), and what redaction masked: each read's views are written out as they come to a
    temporary file in the cache directory (a temporary directory may be memory), so that no more
    than one read's are held while reading."""
    import orjson

    from dupfind.timeline import indented_view

    indent = orjson.OPT_INDENT_2
    spill, folder = _scratch_file()
    with spill:
        head, masked, count = {}, None, 0
        for document, note in documents:
            for view in document.pop("windows"):
                chunk = indented_view(view, not count)
                try:
                    spill.write(chunk)
                except OSError as exc:
                    raise DupfindError(f"cannot write the timeline's views to a temporary file in {folder}: "
                                       f"{exc.strerror or exc}; free some space or set DUPFIND_CACHE_DIR.") from None
                count += 1
            head, masked = document, note or masked
        top = orjson.dumps({**head, "verdict": verdict, "windows": []}, option=indent | orjson.OPT_APPEND_NEWLINE)
        if not count:
            return top, masked
        spill.seek(0)
        return b"".join((top[:-len(b"[]\n}\n")], b"[\n", spill.read(), b"\n  ]\n}\n")), masked


def _json_of_document(document: dict) -> bytes:
    """A timeline document whose entries are JSON text already, as --format json writes it."""
    import orjson

    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def _console(output, width):
    """The console a terminal view is drawn on (colour only on a terminal)."""
    import io

    from rich.console import Console

    color = output is None and sys.stdout.isatty()
    return Console(file=io.StringIO(), width=width or (None if sys.stdout.isatty() else 100), force_terminal=color,
                   color_system="auto" if color else None, highlight=False, soft_wrap=False)


def _table_bytes(document: dict, console, max_rows: int) -> bytes:
    from dupfind.render.timeline_text import render_timeline

    render_timeline(document, console, max_rows)
    return console.file.getvalue().encode()


def _bounds_around(paths, deploy, around_ts, width_s, budget, overlap, skew, config, rules, assume_tz, since, until,
                   use_cache) -> tuple[str, str, list[str], tuple | None, list]:
    """--since/--until for a timeline of inputs too large to read whole: its --around window, or
    its --deploy (found in the analysis in windows of time, stored by `analyze` or made now), with
    the overlap each side; the inputs to read (for a deploy, those with records then); the records
    the analysis in windows kept (analyze.kept_records), read instead of the inputs; and the reports
    that name the workers of that read (file_workers.naming_reports)."""
    from dupfind.commands.analyze import _windowed_ref, kept_records
    from dupfind.deploy_concentration import MAX_TAIL_S
    from dupfind.file_workers import naming_reports
    from dupfind.timefmt import iso
    from dupfind.windows_views import files_for_read

    window, files = timedelta(seconds=overlap), []
    if around_ts is not None:
        half = timedelta(seconds=width_s / 2)
        start, end, what = around_ts - half, around_ts + half, f"the window around {iso(around_ts)}"
        ref = _windowed_ref(paths, None, skew, None, 25, config, rules, assume_tz, since, until, overlap, use_cache)[-1]
        kept = kept_records(ref) if ref is not None else None
    elif deploy is not None:
        from dupfind.commands.analyze import run_windowed

        report = run_windowed(paths, None, skew, None, 25, config, rules, assume_tz, since, until, None, False, budget,
                              overlap, False, use_cache)[0]
        files, kept = report.inputs.files, kept_records(report)
        found = [w for w in report.summary["deploys"]["windows"] if w["deploy"] == deploy]
        if not found:
            known = ", ".join(w["deploy"] for w in report.summary["deploys"]["windows"]) or "none"
            raise DupfindError(f"--deploy {deploy!r} was not found in these logs (deploys found: {known}).")
        start, end = (datetime.fromisoformat(found[0][k]) for k in ("start", "end"))
        end += timedelta(seconds=MAX_TAIL_S)  # the view reaches past the deploy by the redelivery tail
        what = f"deploy {deploy} ({found[0]['start']} to {found[0]['end']})"
    else:
        raise DupfindError("choose one deploy with --deploy ID or a time with --around TIME.")
    read_from, read_to = iso(start - window), iso(end + window)
    sys.stderr.write(f"dupfind: these inputs are too large to read whole: reading around {what}, {read_from} to "
                     f"{read_to}; the view's counts outside its window are of those records.\n")
    return read_from, read_to, files_for_read(paths, files, read_from, read_to), kept, naming_reports(files)


class TimelineViews:
    """The views one timeline run draws of `report`: the window(s) chosen by `deploy`, `around`
    (a time, `width_s` wide) or neither, one document built for them all (never stored: each view
    caches its bytes instead; storing the document of a large export cost as much as building it),
    and each view's bytes as an earlier run over the same cached analysis rendered them."""

    def __init__(self, report, deploy: str | None, around: datetime | None, width_s: float, redactor) -> None:
        self.report, self.deploy, self.around, self.width_s, self.redactor = report, deploy, around, width_s, redactor
        self.shape = {"deploy": deploy, "around": around.isoformat() if around else None, "window_s": width_s}
        self.masked: list[str | None] = []  # what redaction masked, said once on stderr
        self._windows: list | None = None
        self._document: dict | None = None

    def windows(self) -> list:
        """The windows drawn, chosen once for all the views of this run."""
        if self._windows is None:
            from dupfind.timeline import select_windows

            self._windows = select_windows(self.report, self.deploy, self.around, self.width_s)
        return self._windows

    def data(self) -> dict:
        """The document of every value any of the views shows (masked when redacting)."""
        if self._document is None:
            from dupfind.timeline import timeline_document

            built = timeline_document(self.report, self.windows())
            self._document = self.redactor.tree(built) if self.redactor is not None else built
        return self._document

    def view(self, kind: str, params: dict, render: Callable[[], bytes]) -> bytes:
        """A view's bytes as an earlier run over the same cached analysis rendered them, or now."""
        from dupfind.pipeline import cached_output

        redactor = self.redactor
        data, summary = cached_output(
            self.report, f"timeline:{kind}", {**self.shape, **params, "redacted": redactor is not None},
            lambda: (render(), redactor.summary() if redactor is not None else None),
        )
        self.masked.append(summary)
        return data

    # --format json is indented, but each execution's entry on one line: half the bytes of a
    # document indented throughout (a 5M-line export's timeline: 534 -> 277 MB), and one line to
    # grep per execution.
    def as_json(self) -> bytes:
        """--format json of the (masked) document."""
        import orjson

        from dupfind.timeline import entries_on_one_line

        return orjson.dumps(entries_on_one_line(self.data()), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)

    def json_written(self, out) -> None:
        """--format json unmasked, written to `out`: the executions' entries as JSON text from
        polars, not as dicts; each window written as it is made, not held as one document."""
        from dupfind.timeline import timeline_parts, write_document_json

        head, views = timeline_parts(self.report, self.windows(), as_json=True)
        write_document_json(head, views, out.write)

    def as_table(self, console, max_rows: int, drawn_alone: bool = True) -> bytes:
        """The terminal view drawn on `console`; `drawn_alone`: no other view of this run needs the
        whole document, so only what this one draws is built."""
        from dupfind.render.timeline_text import DRAWN_ENTRY_FIELDS, bar_width, render_timeline
        from dupfind.timeline import timeline_document, timeline_reads

        if drawn_alone and self.redactor is None:
            if self.report.context is not None:
                self.report.context.read_ahead(*timeline_reads(DRAWN_ENTRY_FIELDS))  # before windows() reads ahead more
            data = timeline_document(self.report, self.windows(), entry_fields=DRAWN_ENTRY_FIELDS,
                                     bar_width=bar_width(console.width))
        else:
            data = self.data()
        render_timeline(data, console, max_rows)
        return console.file.getvalue().encode()


def prepare_default_views(report) -> None:
    """Store, beside `report`'s cached analysis, what `timeline` over the same inputs writes with
    no option but --format: its JSON, and its terminal view as this process's standard output
    would show it (a terminal's width and colours, else 100 columns). `analyze` calls it once its
    report is out, for an export small enough (PREPARED_VIEWS_MAX_RECORDS): the timeline after it
    then loads no frame, nor polars (over 20,000 small files, 0.33 s without it, against 2.9 s
    for the analysis)."""
    import io

    from dupfind.pipeline import prepare_output
    from dupfind.read_plan import parse_duration

    views = TimelineViews(report, None, None, parse_duration(DEFAULT_WINDOW, "--window"), None)

    def json_bytes() -> bytes:
        out = io.BytesIO()
        views.json_written(out)
        return out.getvalue()

    console = _console(None, None)
    params = {"width": console.width, "max_rows": DEFAULT_MAX_ROWS, "color": console.color_system}
    try:
        prepare_output(report, "timeline:json", {**views.shape, "redacted": False}, json_bytes)
        prepare_output(report, "timeline:table", {**views.shape, **params, "redacted": False},
                       lambda: views.as_table(console, DEFAULT_MAX_ROWS))
    except DupfindError:  # nothing to draw (no record): the timeline says so itself
        return


@app.command()
def timeline(
    paths: PathsArg,
    deploy: Annotated[
        Optional[str],
        typer.Option("--deploy", help="Show this deploy (deployment id, version, release or ReplicaSet)."),
    ] = None,
    around: Annotated[
        Optional[str], typer.Option("--around", help="Show the window centred on this time (ISO-8601).")
    ] = None,
    window: Annotated[
        str,
        typer.Option(
            "--window", help="Width of --around's window, and of the busiest-duplicates window (e.g. 10m, 90s)."
        ),
    ] = DEFAULT_WINDOW,
    html: Annotated[
        Optional[Path],
        typer.Option("--html", help="Also write one self-contained, offline HTML file with a zoomable timeline."),
    ] = None,
    output_format: Annotated[
        TableOrJson, typer.Option("--format", "-f", help="table (terminal) or json (the timeline data).")
    ] = TableOrJson.table,
    max_rows: Annotated[
        int,
        typer.Option(
            "--max-rows", help="Worker rows before quieter workers of a generation are aggregated into one row."
        ),
    ] = DEFAULT_MAX_ROWS,
    width: Annotated[
        Optional[int], typer.Option("--width", help="Terminal width to draw for (default: the terminal's, or 100).")
    ] = None,
    skew: Annotated[float, typer.Option("--skew", help="Clock-skew tolerance in seconds between hosts.")] = 0.5,
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
    window_overlap: WindowOverlapOpt = "1h",
) -> None:
    """Deploy-window report: generations and their workers' lifetimes, stop signals and kills,
    executions as bars with duplicated actions marked, and duplicates inside vs outside deploys.
    By default one view per deploy found (or the busiest duplicate period when no deploy is logged)."""
    from dupfind.commands.analyze import DEFAULT_MAX_JOBS_PER_VALUE, run_analysis
    from dupfind.config import load_config
    from dupfind.pipeline import store_context_facts, write_cached_output
    from dupfind.read_plan import parse_duration
    from dupfind.timeparse import parse_time_bound

    if deploy is not None and around is not None:
        raise DupfindError("--deploy and --around choose the window in two ways: give one of them.")
    if max_rows < 4:
        raise DupfindError("--max-rows must be at least 4.")
    if skew < 0:
        raise DupfindError("--skew must be zero or more seconds.")
    width_s = parse_duration(window, "--window")
    cfg = load_config(config, rules, assume_tz)
    around_ts = parse_time_bound(around, "--around", assume_tz=cfg.assume_tz) if around is not None else None
    budget, overlap = window_options(paths, memory_limit, window_overlap, since, until, use_cache=not no_cache)
    if budget is not None and deploy is None and around_ts is None:  # too large: the deploys' views a few reads at a time
        bounds_at = [parse_time_bound(b, o, assume_tz=cfg.assume_tz) if b else None
                     for b, o in ((since, "--since"), (until, "--until"))]
        return _every_deploy(paths, budget, overlap, width_s, skew, config, rules, assume_tz, since, until, rejects,
                             strict, not no_cache, redact, bounds_at, html, output_format, output, width, max_rows)
    kept, naming = None, []
    if budget is not None:  # too large to read whole: read only around the view asked for
        since, until, held, kept, naming = _bounds_around(paths, deploy, around_ts, width_s, budget, overlap, skew, config,
                                                  rules, assume_tz, since, until, not no_cache)
        if rejects is None and not strict:  # those are of every line: every file is read then
            paths = held
    report, cfg = run_analysis(paths, None, skew, None, DEFAULT_MAX_JOBS_PER_VALUE, config, rules, assume_tz, since,
                               until, rejects, strict, use_cache=not no_cache, cfg=cfg, kept=kept, naming=naming)
    redactor = make_redactor(redact, output_format.value, lambda: report.context.table if report.context else None,
                             cfg.business_keys, context=report.context)
    views = TimelineViews(report, deploy, around_ts, width_s, redactor)
    shape, view, timeline_data = views.shape, views.view, views.data

    def done() -> None:
        said = next((m for m in reversed(views.masked) if m), None)
        if said:
            sys.stderr.write(f"dupfind: {said}\n")
        store_context_facts(report.context)

    if html is not None:
        from dupfind.render.timeline_html import render_html

        page = view("html", {}, lambda: render_html(timeline_data()).encode())
        write_output(lambda out: write_end(out, page), html)
    if output_format == TableOrJson.json:
        if redactor is None:  # stored as it is written (the same entry as view("json") keeps)
            write_cached_output(report, "timeline:json", {**shape, "redacted": False}, views.json_written,
                                lambda writer: write_output(writer, output))
            return done()
        data = view("json", {}, views.as_json)
        write_output(lambda out: write_end(out, data), output)
        return done()
    console = _console(output, width)  # the terminal view alone imports rich
    params = {"width": console.width, "max_rows": max_rows, "color": console.color_system}
    data = view("table", params, lambda: views.as_table(console, max_rows, drawn_alone=html is None))
    write_output(lambda out: write_end(out, data), output)
    done()


"""Wiring of the stages (config, ingest, ...) shared by every command."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from dupfind import DIRTY_DECAY_MS, background
from dupfind.cache import TableCache, default_cache_dir
from dupfind.config import Config, load_config
from dupfind.correlate import Correlation
from dupfind.errors import DupfindError
from dupfind.ingest_result import RENDERED_STORE, FileReport, IngestResult
from dupfind.mapped_file import write_end
from dupfind.result_cache import STORED_FACTS, CachedCorrelation, ContextFacts, CorruptEntry, ResultCache, facts_class
from dupfind.sources import expand_inputs, identities
from dupfind.status_line import DelayedStatus
from dupfind.textcodes import Texts

if TYPE_CHECKING:
    from rich.console import Console

    from dupfind.analyze import AnalysisReport


def progress_for(paths: list[str], stderr: Console | None):
    """A byte-count progress bar on stderr, only when stderr is a terminal."""
    if stderr is None or not stderr.is_terminal or not sys.stderr.isatty():
        return None, None
    total = 0
    try:
        sources = expand_inputs(paths)  # the files a read takes (rglob here was 0.35 s for 20,000)
    except DupfindError:
        sources = []  # ingest says what is wrong with the paths
    for src in sources:
        if src.file is not None:
            with contextlib.suppress(OSError):
                total += os.stat(src.file).st_size
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    progress = Progress(
        TextColumn("reading logs"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        console=stderr, transient=True,
        # Left alone, rich would swap sys.stdout for a proxy printing to this console (stderr)
        # while the bar shows: what went to stdout meanwhile would end up on the terminal.
        redirect_stdout=False, redirect_stderr=False,
    )
    task = progress.add_task("read", total=total or None)
    return progress, lambda n: progress.advance(task, n)


def time_bounds(config: Config, since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """--since and --until as UTC datetimes (relative bounds against now)."""
    if not since and not until:
        return None, None
    from dupfind.timeparse import parse_time_bound  # dateutil: only with a bound

    since_ts = parse_time_bound(since, "--since", assume_tz=config.assume_tz) if since else None
    until_ts = parse_time_bound(until, "--until", assume_tz=config.assume_tz) if until else None
    if since_ts and until_ts and since_ts > until_ts:
        raise DupfindError("--since is later than --until, so no record could match.")
    return since_ts, until_ts


def relative_bound(config: Config, bound: str | None) -> bool:
    """Whether a --since/--until value is relative to now (-2h, 30m)."""
    if not bound:
        return False
    from dupfind.timeparse import parse_time_bound

    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    at = [parse_time_bound(bound, "--since", now=now, assume_tz=config.assume_tz)
          for now in (epoch, epoch + timedelta(seconds=1))]
    return at[0] != at[1]


def _warn_if_too_large(paths: list[str]) -> None:
    """A warning on stderr before a read of whole files that would likely exhaust memory (see
    memory_check); a --since/--until window keeps an unknown share of the records, so none then."""
    from dupfind.memory_check import memory_warning

    try:
        sources = expand_inputs(paths)
    except DupfindError:
        return  # ingest says what is wrong with the paths
    warning = memory_warning(sources)
    if warning:
        sys.stderr.write(f"dupfind: warning: {warning}\n")


def _ingest(paths: list[str], config: Config, since_ts, until_ts, stderr: Console | None, cache,
            naming=()) -> IngestResult:
    if since_ts is None and until_ts is None:
        _warn_if_too_large(paths)
    # Files are stored in the cache after the command's output when the command line does its
    # cache writes then (dupfind.background); API callers find them stored when this returns.
    return ingest_with_progress(paths, config, since_ts, until_ts, stderr, cache=cache,
                                store_later=background.deferring(), naming=naming)


def ingest_with_progress(paths: list[str], config: Config, since_ts, until_ts, stderr: Console | None,
                         **options: Any) -> IngestResult:
    """ingest(), with a progress bar on `stderr` when it is a terminal."""
    from dupfind.ingest import ingest  # the parsers: not loaded by a command the cache answers

    progress, advance = progress_for(paths, stderr)
    if progress is None:
        return ingest(paths, config, since_ts, until_ts, **options)
    with progress:
        return ingest(paths, config, since_ts, until_ts, progress=advance, **options)


def load_inputs(
    paths: list[str],
    config_file: Path | None = None,
    rules_dir: Path | None = None,
    assume_tz: str | None = None,
    since: str | None = None,
    until: str | None = None,
    stderr: Console | None = None,
    config: Config | None = None,
    use_cache: bool = True,
) -> IngestResult:
    """Load the configuration and read every input into the canonical table."""
    config = config or load_config(config_file, rules_dir, assume_tz)
    cache = TableCache(default_cache_dir(), config.digest()) if use_cache else None
    since_ts, until_ts = time_bounds(config, since, until)
    return _ingest(paths, config, since_ts, until_ts, stderr, cache)


def correlate_inputs(table: pl.DataFrame, config: Config, max_jobs_per_value: int = 25, texts: Texts | None = None) -> Correlation:
    """The canonical table's records about objects refined (kubectl events), then correlated
    (`texts`: the dictionary of its coded columns, as the read that made it gives it)."""
    from dupfind.correlate import correlate
    from dupfind.deploy_records import refine_object_records

    with DelayedStatus(f"correlating {table.height:,} records into actions and executions"):
        table = refine_object_records(table, config, texts)
        return correlate(table, config.link_keys, max_jobs_per_value, texts)


def correlated_read(result: IngestResult, config: Config, max_jobs_per_value: int = 25) -> Correlation:
    """correlate_inputs over a read, whose table lets go of the near-empty columns the correlation
    holds apart (correlate.held_apart) before it is correlated: were it to keep them, they would
    stay in memory whole through the analysis (and the cache writes after the report)."""
    from dupfind.correlate import held_apart

    whole = result.table
    result.table, apart = held_apart(whole)
    if result.pack is not None:  # the files' pack, stored after the output, lets go of them too
        result.pack.hold_apart(whole, result.table, apart)
    columns = whole.columns
    del whole
    return correlate_inputs(result.table, config, max_jobs_per_value, result.texts).hold_apart(apart, columns)


@dataclass
class Correlated:
    """Inputs read and correlated; `cache` and `set_key` say where their analyses are cached."""

    result: IngestResult
    correlation: Correlation
    cache: ResultCache | None = None
    set_key: str | None = None


def load_correlated(
    paths: list[str],
    config: Config,
    since: str | None = None,
    until: str | None = None,
    max_jobs_per_value: int = 25,
    stderr: Console | None = None,
    use_cache: bool = True,
    naming: list[FileReport] = (),
) -> Correlated:
    """Read and correlate every input, or take both from the result cache when no input changed.

    A warm hit reads no log line: the file reports come from the set entry, the frames are read
    from it when first used (see result_cache). `naming`: the reports of other inputs that name
    workers of these (ingest), part of the set's key.
    """
    since_ts, until_ts = time_bounds(config, since, until)
    if not use_cache:
        result = _ingest(paths, config, since_ts, until_ts, stderr, None, naming)
        return Correlated(result, correlated_read(result, config, max_jobs_per_value))
    root = default_cache_dir()
    digest = config.digest()
    files = TableCache(root, digest)
    results = ResultCache(root)

    def set_key(now: bool = False) -> str | None:
        """With `now` (before storing), of the files as they are now, not as the command listed them."""
        if relative_bound(config, since) or relative_bound(config, until):
            return None  # `--since -2h` is another bound on every run: such a set is never read again
        keys = identities(expand_inputs(paths, fresh=now))
        if keys is None:
            return None  # standard input, or a file that cannot be examined: no set entry
        others = []
        if naming:  # (a read of a time of inputs too large to read whole)
            from dupfind.file_workers import naming_state

            named = {path for path, _ in keys}
            others = sorted(naming_state(r) for r in naming if r.path not in named)
        return results.set_key(keys, digest, since_ts, until_ts, max_jobs_per_value, others)

    key = set_key()

    def fresh() -> tuple[IngestResult, Correlation]:
        result = _ingest(paths, config, since_ts, until_ts, stderr, files, naming)
        correlation = correlated_read(result, config, max_jobs_per_value)
        if key is not None:
            # After the command's output (0.7 s at 1M lines, 3.9 s at 5M); first of the deferred
            # writes, which go into this entry (then the analysis rests on it: _rest_on_stored_set).
            background.defer(store, result, correlation, front=True)
        return result, correlation

    def store(result: IngestResult, correlation: Correlation) -> None:
        if set_key(now=True) == key and results.store_set(key, result, correlation):  # no input changed meanwhile
            # Worked out later, the ids a redactor protects would mean reading every id column of the
            # cached table (2.8 s at 5M lines); from the table in memory they take a tenth of that.
            ids_key = ResultCache.value_key(key, *redaction_ids_kind(config))
            results.store_value_body(key, ids_key, ResultCache.texts_value_body(key, ids_key, protected_id_values(correlation, config)))

    if key is not None:
        entry = results.open_set(key, rebuild=fresh)
        if entry is not None:
            return Correlated(_keeping_rendered(entry.ingest_result(), results, key), entry.correlation(), results, key)
    result, correlation = fresh()
    return Correlated(result if key is None else _keeping_rendered(result, results, key), correlation, results, key)


RENDERED_SUFFIX = ".part"


def rendered_key(set_key: str, name: str) -> str:
    """The key under which a set entry keeps a rendered part of its inputs (IngestResult.rendered)."""
    return ResultCache.value_key(set_key, f"rendered:{name}", None)


def _keeping_rendered(result: IngestResult, cache: ResultCache, set_key: str) -> IngestResult:
    """`result`, whose rendered parts (IngestResult.rendered) are stored with its set entry and
    taken from there once stored (a fresh read's: after the entry, in the deferred writes)."""
    def stored(name: str, render: Callable[[], bytes]) -> bytes:
        key = rendered_key(set_key, name)
        data = cache.load_blob(set_key, key, RENDERED_SUFFIX)
        if data is not None:
            return bytes(data)
        data = render()
        cache.store_blob_soon(set_key, key, data, suffix=RENDERED_SUFFIX)
        return data

    result.__dict__[RENDERED_STORE] = stored
    return result


# AnalysisContext properties an analysis stored in the cache derives for the commands that follow.
PREPARED_FACTS = ("worker_events", "redelivery_gaps", "id_samples", "unlinked_ids", "timeout_statements", "deploy_records",
                  "id_values", "duplicate_requests", "effect_marks")

# AnalysisReport fields that are not stored with a cached analysis: supplied by the run.
LIVE_REPORT_FIELDS = ("inputs", "findings", "rules", "context")
# A table at least this large (polars' estimate; 85-97 MB at 1M lines) let go of by
# _rest_on_stored_set is worth a pause before the writes after it.
PAUSE_AFTER_FREEING = 32 << 20


def analyze_correlated(
    loaded: Correlated,
    config: Config,
    rules: list,
    skew_s: float = 0.5,
    timeouts: dict[str, float] | None = None,
    max_jobs_per_value: int = 25,
    keep_frames: bool = True,
) -> AnalysisReport:
    """analyze.analyze over correlated inputs, or its cached result for the same rules and options
    (`keep_frames`: see analyze.analyze; with the cache on, the frames are kept for it to store)."""
    from dupfind.analyze import AnalysisReport, analyze

    timeouts = timeouts or {}
    key = None
    stored_fields = [f.name for f in fields(AnalysisReport) if f.name not in LIVE_REPORT_FIELDS]
    if loaded.cache is not None and loaded.set_key is not None:
        key = ResultCache.analysis_key(loaded.set_key, rules, skew_s, timeouts, config.timeouts)
        hit = loaded.cache.load_analysis(loaded.set_key, key)
        if hit is not None and sorted(hit["report"]) == sorted(stored_fields):
            # The context exactly as analyze() builds it; its derived facts are read or computed when used.
            ctx = analysis_context(loaded, config, skew_s, {**config.timeouts, **timeouts})

            def findings(select: Callable[[str, str], bool] | None = None, evidence: bool = True) -> list:
                try:
                    return hit["findings"](select, evidence)
                except CorruptEntry:  # deleted; the detectors give the same findings again
                    found = analyze(loaded.result, config, rules, skew_s, timeouts, max_jobs_per_value,
                                    correlation=loaded.correlation).findings
                    return found if select is None else [f for f in found if select(f.rule, f.fingerprint)]

            report = cached_report_class()(
                inputs=loaded.result, findings=findings, rules=rules, context=ctx, **hit["report"]
            )
            report.__dict__["_finding_count"] = hit["count"]
            report.__dict__["_finding_index"] = hit["index"]
            report.__dict__[CACHE_REF] = (loaded.cache, loaded.set_key, key)
            return report
    with DelayedStatus(f"running {sum(1 for r in rules if r.enabled)} detection rules and gathering their evidence"):
        report = analyze(loaded.result, config, rules, skew_s, timeouts, max_jobs_per_value,
                         correlation=loaded.correlation, keep_frames=keep_frames or loaded.cache is not None)
    if key is not None:
        # Stored once the command's output is out (dupfind.background.defer): 0.9 s at 1M lines,
        # 4.7 s at 5M that the report need not wait for. What the run derives from the report is
        # cached beside it meanwhile; were the analysis not stored (a value exact_json cannot give
        # back), a later run analyses again and finds those same outputs.
        analysed = report
        report = cached_report_class()(**{f.name: getattr(analysed, f.name) for f in fields(analysed)})
        report.__dict__[CACHE_REF] = (loaded.cache, loaded.set_key, key)
        report.__dict__[ANALYSED_NOW] = True
        if background.deferring() and not isinstance(loaded.correlation, CachedCorrelation):
            background.defer(_rest_on_stored_set, loaded, (analysed, report), front=True)
        background.defer(_store_analysis, loaded, key, analysed, {name: getattr(analysed, name) for name in stored_fields})
    if report.context is not None:
        _remember_context(loaded, report.context)
    return report


def _rest_on_stored_set(loaded: Correlated, reports: tuple[AnalysisReport, ...]) -> None:
    """Once the set entry of a fresh read is stored (the work deferred before this): the files'
    pack is stored, then the analysis and its inputs read the table from that entry instead of
    memory, which lets go of the read's table. The cache writes after this (what a later `stats`
    and ticket show, the facts for later commands) then hold the columns each reads, not the
    table: at 1M lines their base fell from 339 to 243 MiB. Nothing changes when the set was not
    stored (an input changed meanwhile, a full disk): the pack is then stored last, as deferred."""
    entry = loaded.cache.open_set(loaded.set_key)
    if entry is None:
        return
    result, correlation = loaded.result, loaded.correlation
    freed = correlation.table.estimated_size()
    if result.pack is not None:
        result.pack.store()  # from the read's table, while it is here
    entry.take_over(result, correlation)
    inputs = _keeping_rendered(entry.ingest_result(), loaded.cache, loaded.set_key)
    for report in reports:
        report.inputs = inputs
        if report.context is not None:
            report.context.correlation = entry.correlation()
    loaded.result, loaded.correlation = inputs, entry.correlation()
    del result, correlation
    if freed >= PAUSE_AFTER_FREEING:
        # jemalloc gives freed pages back DIRTY_DECAY_MS after they were freed, at its next call:
        # the writes that follow at once would allocate beside the read's table, not in its place
        # (the run's peak 385-394 MiB at 1M lines; 370 after this pause, after the output).
        time.sleep(DIRTY_DECAY_MS / 1000 + 0.05)


def _store_analysis(loaded: Correlated, key: str, report: AnalysisReport, stored: dict[str, Any]) -> None:
    if loaded.cache.store_analysis(loaded.set_key, key, report.findings, stored) and report.context is not None:
        # Frames the next commands (trace, stats, timeline) need and no detector derived: cheap
        # from the table in memory, several column reads from the cached table; stored with the
        # facts (store_context_facts, deferred after this).
        for name in PREPARED_FACTS:
            getattr(report.context, name)


def _output_ref(source) -> tuple[ResultCache, str, str] | None:
    """(cache, set key, key) of a cached analysis report, or of a context backed by the cache."""
    attrs = getattr(source, "__dict__", {})
    if CACHE_REF in attrs:
        return attrs[CACHE_REF]
    facts = attrs.get(STORED_FACTS)
    return (facts.cache, facts.set_key, facts.folder.name) if facts is not None else None


def cached_output(source, kind: str, params: Any, render: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
    """`render()` (the bytes of a report derived from `source` alone and `params`, or a list of
    the chunks they were written in, and notes for stderr as JSON data), or what an earlier run
    rendered for the same cached analysis or context (`source`), kind and params (one chunk)."""
    entry = _output_entry(source, kind, params)
    if entry is None:
        return render()
    cache, set_key, key, stored = entry
    if stored is not None:
        return stored
    data, note = render()
    cache.store_blob_soon(set_key, key, orjson.dumps(note) + b"\n", *(data if isinstance(data, list) else [data]))
    return data, note


def prepare_output(source, kind: str, params: Any, render: Callable[[], Any], noted: bool = False) -> None:
    """Store what cached_output(source, kind, params, ...) would give, unless an earlier run stored
    it: for a command that will likely follow. `render()` gives the bytes (no notes for stderr),
    or with `noted` the bytes and the notes, as cached_output's `render`."""
    entry = _output_entry(source, kind, params)
    if entry is not None and entry[3] is None:
        cache, set_key, key, _ = entry
        data, note = render() if noted else (render(), None)
        cache.store_blob_soon(set_key, key, orjson.dumps(note) + b"\n", data)


def write_cached_output(source, kind: str, params: Any, render: Callable[[Any], None],
                        write: Callable[[Callable[[Any], None]], None]) -> None:
    """Like cached_output, for a report with no notes for stderr: `write` is given a writer of the
    output, which writes what an earlier run stored, else `render(out)` straight into the output
    while the same bytes are stored (the JSON of 10M lines is never held whole)."""
    entry = _output_entry(source, kind, params)
    if entry is None:
        write(render)
        return
    cache, set_key, key, stored = entry
    if stored is not None:
        write(lambda out: write_end(out, stored[0]))
        return
    blob = cache.stream_blob(set_key, key, orjson.dumps(None) + b"\n")
    try:
        write(lambda out: render(_Tee(out, blob)))
    except BaseException:  # an output cut short (a closed pipe) is not stored
        blob.abandon()
        raise
    blob.finish()


def _output_entry(source, kind: str, params: Any) -> tuple[ResultCache, str, str, tuple | None] | None:
    """Where an output derived from `source` alone is cached: (cache, set key, key, (bytes, notes)
    an earlier run stored, or None); None when `source` is not backed by the cache."""
    known = _output_ref(source)
    if known is None:
        return None
    cache, set_key, base_key = known
    key = ResultCache.value_key(base_key, f"output:{kind}", params)
    stored = cache.load_blob(set_key, key)
    end = _line_end(stored) if stored is not None else -1
    return cache, set_key, key, ((stored[end + 1:], orjson.loads(stored[:end])) if end >= 0 else None)


class _Tee:
    """A binary sink that writes to the output and to a stored copy."""

    def __init__(self, out, blob) -> None:
        self.out, self.blob = out, blob

    def write(self, data) -> int:
        self.out.write(data)
        self.blob.write(data)
        return len(data)

    def flush(self) -> None:
        self.out.flush()


def _line_end(data: memoryview) -> int:
    """Where the first line of `data` ends (-1: no newline), without copying all of it."""
    size = 4096
    while True:
        end = bytes(data[:size]).find(b"\n")
        if end >= 0 or size >= len(data):
            return end
        size *= 16


def redaction_ids_kind(config: Config) -> tuple[str, dict]:
    """The kind and params under which a set's protected ids are cached (see protected_ids)."""
    return "redactor", {"business_keys": list(config.business_keys)}


def protected_ids(source: Correlation, config: Config) -> list[str]:
    """The ids a Markdown redactor leaves alone (redact.protected_values), reading only their
    columns of the table of `source` (a correlation, or an analysis context over one)."""
    return protected_id_values(source, config).to_list()


def protected_id_values(source: Correlation, config: Config) -> pl.Series:
    """protected_ids as a Series of text."""
    from dupfind.redact import PROTECTED_COLUMNS, protected_values

    wanted = source.present_columns(*PROTECTED_COLUMNS, *config.business_keys)
    return protected_values(source.columns(*wanted), config.business_keys, source.texts)


def cached_set_value(ctx, kind: str, params: Any, build: Callable[[], Any]) -> Any:
    """Like cached_value, for a value derived from the correlated inputs of a context alone."""
    facts = ctx.__dict__.get(STORED_FACTS) if ctx is not None else None
    if facts is None:
        return build()
    return _stored_or_built(facts.cache, facts.set_key, ResultCache.value_key(facts.set_key, kind, params), build)


def analysis_context(loaded: Correlated, config: Config, skew_s: float, timeouts: dict[str, float]):
    """An AnalysisContext over correlated inputs; with the cache on, the frames it derives (side
    effects, the deploy model, ...) are read from the set entry when an earlier run stored them, and
    the ones it derives now are stored by store_context_facts()."""
    from dupfind.analysis import AnalysisContext

    if loaded.cache is None or loaded.set_key is None:
        return AnalysisContext(loaded.correlation, config, skew_s, timeouts)
    ctx = facts_class(AnalysisContext)(loaded.correlation, config, skew_s, timeouts)
    _remember_context(loaded, ctx)
    return ctx


def _context_key(set_key: str, ctx) -> str:
    """The context's own parameters (every dataclass field but the correlation and configuration,
    which the set key covers) and class."""
    params = {f.name: getattr(ctx, f.name) for f in fields(ctx) if f.name not in ("correlation", "config")}
    cls = type(ctx)  # facts_class(C) has C's module and qualname
    return ResultCache.value_key(set_key, f"context:{cls.__module__}.{cls.__qualname__}", params)


def _remember_context(loaded: Correlated, ctx) -> None:
    """Attach the context's ContextFacts (read by facts_class contexts, written by store_context_facts)."""
    if loaded.cache is None or loaded.set_key is None or STORED_FACTS in ctx.__dict__:
        return
    ctx.__dict__[STORED_FACTS] = ContextFacts(loaded.cache, loaded.set_key, _context_key(loaded.set_key, ctx))


def store_context_facts(ctx) -> None:
    """Store the frames `ctx` derived that no earlier run stored (a command calls it when its
    output is out; deferred after the analysis' own store, which prepares some)."""
    facts = ctx.__dict__.get(STORED_FACTS) if ctx is not None else None
    if facts is not None:
        background.defer(facts.store_new, ctx)


# Set on a report whose analysis this command made (and will store), not read from the cache: what
# a command prepares for the next from a new analysis, an earlier one prepared from a stored one.
ANALYSED_NOW = "_analysed_now"

# Set on a report whose analysis is in the result cache: (cache, set key, analysis key), so that
# what is derived from it can be cached beside it. A report rebuilt from other findings
# (--baseline) is another object without it, so nothing derived from that one is cached.
CACHE_REF = "_result_cache_ref"


@lru_cache(maxsize=1)
def cached_report_class() -> type:
    """AnalysisReport as the result cache gives it back: findings decoded when first used (a warm
    timeline, or analyze output rendered before, never decodes them)."""
    from dupfind.analyze import AnalysisReport

    class CachedAnalysisReport(AnalysisReport):
        @property
        def findings(self) -> list:
            value = self.__dict__["_findings"]
            if callable(value):  # the cache's decoder
                value = self.__dict__["_findings"] = value()
            return value

        @findings.setter
        def findings(self, value) -> None:
            self.__dict__["_findings"] = value

        def findings_where(self, select: Callable[[str, str], bool]) -> list:
            value = self.__dict__["_findings"]
            if callable(value):  # still undecoded: decode only the findings selected
                return value(select)
            return super().findings_where(select)

        def findings_without_evidence(self) -> list:
            value = self.__dict__["_findings"]
            if not callable(value):
                return value
            if "_brief_findings" not in self.__dict__:
                self.__dict__["_brief_findings"] = value(None, False)
            return self.__dict__["_brief_findings"]

        def finding_index(self) -> list:
            stored = self.__dict__.get("_finding_index")
            if stored is None or not callable(self.__dict__["_findings"]):
                return super().finding_index()
            if callable(stored):  # the stored index, read when first asked for
                stored = self.__dict__["_finding_index"] = stored()
            return stored

        @property
        def finding_count(self) -> int:
            if callable(self.__dict__["_findings"]):
                return self.__dict__["_finding_count"]
            return super().finding_count

    CachedAnalysisReport.__name__ = CachedAnalysisReport.__qualname__ = "AnalysisReport"
    return CachedAnalysisReport


def cached_value(report: AnalysisReport, kind: str, params: Any, build: Callable[[], Any]) -> Any:
    """`build()` (a document derived from `report`, shaped by `params`), or its cached copy when the
    analysis is cached and the same kind and params were built before. Values go through exact_json:
    a value it cannot give back exactly is simply not cached."""
    entry = _value_entry(report, kind, params)
    return build() if entry is None else _stored_or_built(*entry, build)


def _value_entry(report: AnalysisReport, kind: str, params: Any) -> tuple[ResultCache, str, str] | None:
    """Where a value derived from a cached analysis is kept: (cache, set key, key); None when the
    analysis is not cached."""
    known = report.__dict__.get(CACHE_REF)
    if known is None:
        return None
    cache, set_key, analysis_key = known
    return cache, set_key, ResultCache.value_key(analysis_key, kind, params)


# The kind of value (cached_value) under which a cached analysis keeps what `stats` shows of it.
STATS_VALUE = "stats"


# The kind of value under which a cached analysis keeps the trace of a finding's action
# (trace.finding_trace: the ticket's worst finding's is kept as `analyze` draws the ticket).
TRACE_VALUE = "trace"

# The kind of value under which a cached analysis keeps its Markdown ticket but for the command line
# (render.markdown.ticket_parts, and what redaction masked in them).
MARKDOWN_VALUE = "markdown"


def drawn_ticket_parts(report: AnalysisReport, redactor) -> dict[str, Any]:
    """render.markdown.ticket_parts of `report` drawn under a fresh copy of `redactor` (None:
    nothing masked), and what it masked in them (`masked`, Redactor.masked_lists)."""
    from dupfind.render.markdown import ticket_parts
    from dupfind.render.safe import redacting

    fresh = redactor.fresh() if redactor is not None else None
    with redacting(fresh.text if fresh is not None else None):
        parts = ticket_parts(report, fresh is not None)
    return {**parts, "masked": fresh.masked_lists() if fresh is not None else {}}


def markdown_parts(report: AnalysisReport, redactor) -> dict[str, Any]:
    """drawn_ticket_parts as a cached analysis stored them (`analyze` draws them once its report
    is out), else drawn now and stored for the next ticket; `redactor` then counts what they
    masked as masked."""
    parts = cached_value(report, MARKDOWN_VALUE, {"redacted": redactor is not None},
                         lambda: drawn_ticket_parts(report, redactor))
    if redactor is not None:
        redactor.add_masked(parts["masked"])
    return parts


def prepare_value(report: AnalysisReport, kind: str, params: Any, build: Callable[[], Any]) -> None:
    """Build the value cached_value(report, kind, params, build) would build for a cached analysis,
    unless it is stored already, and store it with the deferred writes (after the analysis'
    own): for a command that will likely follow (`stats` after `analyze` then loads no frame, nor
    polars). A command defers this until its output is out, first: the value is made while less
    memory is held than once the cache writes have run."""
    entry = _value_entry(report, kind, params)
    if entry is None or entry[0].has_value(*entry[1:]):
        return
    cache, set_key, key = entry
    body = cache.value_body(set_key, key, build())
    if body is not None:
        background.defer(cache.store_value_body, set_key, key, body)


def _stored_or_built(cache: ResultCache, set_key: str, key: str, build: Callable[[], Any]) -> Any:
    """The value stored under `key` beside the set, else `build()`, stored there for next time."""
    found, value = cache.load_value(set_key, key)
    if found:
        return value
    value = build()
    body = cache.value_body(set_key, key, value)  # encoded now: the caller may change the value
    if body is not None:
        background.defer(cache.store_value_body, set_key, key, body)
    return value


def write_rejects(result: IngestResult, target: Path) -> None:
    """Every rejected line as NDJSON: source, line, reason, text."""
    try:
        with target.open("wb") as fh:
            for row in result.rejects.sort(["source", "line"]).iter_rows(named=True):
                fh.write(orjson.dumps(row) + b"\n")
    except OSError as exc:
        raise DupfindError(f"cannot write rejects to {target}: {exc.strerror or exc}.") from None

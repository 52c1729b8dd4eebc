"""Wiring of the stages (config, ingest, ...) shared by every command."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import polars as pl
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from dupfind.cache import TableCache, default_cache_dir
from dupfind.config import Config, load_config
from dupfind.correlate import Correlation
from dupfind.errors import DupfindError
from dupfind.ingest import IngestResult, ingest
from dupfind.result_cache import ResultCache
from dupfind.sources import expand_inputs
from dupfind.timeparse import parse_time_bound

if TYPE_CHECKING:
    from dupfind.analyze import AnalysisReport


def _progress_for(paths: list[str], stderr: Console | None):
    """A byte-count progress bar on stderr, only when stderr is a terminal."""
    if stderr is None or not stderr.is_terminal or not sys.stderr.isatty():
        return None, None
    total = 0
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    progress = Progress(
        TextColumn("reading logs"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
        console=stderr, transient=True,
    )
    task = progress.add_task("read", total=total or None)
    return progress, lambda n: progress.advance(task, n)


def time_bounds(config: Config, since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """--since and --until as UTC datetimes (relative bounds against now)."""
    since_ts = parse_time_bound(since, "--since", assume_tz=config.assume_tz) if since else None
    until_ts = parse_time_bound(until, "--until", assume_tz=config.assume_tz) if until else None
    if since_ts and until_ts and since_ts > until_ts:
        raise DupfindError("--since is later than --until, so no record could match.")
    return since_ts, until_ts


def _ingest(paths: list[str], config: Config, since_ts, until_ts, stderr: Console | None, cache) -> IngestResult:
    progress, advance = _progress_for(paths, stderr)
    if progress is None:
        return ingest(paths, config, since_ts, until_ts, cache=cache)
    with progress:
        return ingest(paths, config, since_ts, until_ts, progress=advance, cache=cache)


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


def correlate_inputs(table: pl.DataFrame, config: Config, max_jobs_per_value: int = 25) -> Correlation:
    """The canonical table's records about objects refined (kubectl events), then correlated."""
    from dupfind.correlate import correlate
    from dupfind.deploy_records import refine_object_records

    return correlate(refine_object_records(table, config), config.link_keys, max_jobs_per_value)


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
) -> Correlated:
    """Read and correlate every input, or take both from the result cache when no input changed.

    A warm hit reads no log line: the file reports come from the set entry, the frames are read
    from it when first used (see result_cache)."""
    since_ts, until_ts = time_bounds(config, since, until)
    if not use_cache:
        result = _ingest(paths, config, since_ts, until_ts, stderr, None)
        return Correlated(result, correlate_inputs(result.table, config, max_jobs_per_value))
    root = default_cache_dir()
    digest = config.digest()
    files = TableCache(root, digest)
    results = ResultCache(root)

    def set_key() -> str | None:
        keys = []
        for src in expand_inputs(paths):
            key = files.key(src.file) if src.file is not None else None
            if key is None:
                return None  # standard input, or a file that cannot be examined: no set entry
            keys.append((src.path, key))
        return results.set_key(keys, digest, since_ts, until_ts, max_jobs_per_value)

    key = set_key()

    def fresh() -> tuple[IngestResult, Correlation]:
        result = _ingest(paths, config, since_ts, until_ts, stderr, files)
        correlation = correlate_inputs(result.table, config, max_jobs_per_value)
        if key is not None and set_key() == key:  # no input changed while it was read
            results.store_set(key, result, correlation)
        return result, correlation

    if key is not None:
        entry = results.open_set(key, rebuild=fresh)
        if entry is not None:
            return Correlated(entry.ingest_result(), entry.correlation(), results, key)
    result, correlation = fresh()
    return Correlated(result, correlation, results, key)


# AnalysisReport fields that are not stored with a cached analysis: supplied by the run.
_LIVE_REPORT_FIELDS = ("inputs", "findings", "rules", "context")


def analyze_correlated(
    loaded: Correlated,
    config: Config,
    rules: list,
    skew_s: float = 0.5,
    timeouts: dict[str, float] | None = None,
    max_jobs_per_value: int = 25,
) -> AnalysisReport:
    """analyze.analyze over correlated inputs, or its cached result for the same rules and options."""
    from dupfind.analyze import AnalysisReport, analyze

    timeouts = timeouts or {}
    key = None
    stored_fields = [f.name for f in fields(AnalysisReport) if f.name not in _LIVE_REPORT_FIELDS]
    if loaded.cache is not None and loaded.set_key is not None:
        key = ResultCache.analysis_key(loaded.set_key, rules, skew_s, timeouts, config.timeouts)
        hit = loaded.cache.load_analysis(loaded.set_key, key)
        if hit is not None and sorted(hit["report"]) == sorted(stored_fields):
            from dupfind.analysis import AnalysisContext

            # The context exactly as analyze() builds it; its derived facts are computed when used.
            ctx = AnalysisContext(loaded.correlation, config, skew_s, {**config.timeouts, **timeouts})
            return AnalysisReport(
                inputs=loaded.result, findings=hit["findings"], rules=rules, context=ctx, **hit["report"]
            )
    report = analyze(loaded.result, config, rules, skew_s, timeouts, max_jobs_per_value,
                     correlation=loaded.correlation)
    if key is not None:
        loaded.cache.store_analysis(
            loaded.set_key, key, report.findings, {name: getattr(report, name) for name in stored_fields}
        )
    return report


def write_rejects(result: IngestResult, target: Path) -> None:
    """Every rejected line as NDJSON: source, line, reason, text."""
    try:
        with target.open("wb") as fh:
            for row in result.rejects.sort(["source", "line"]).iter_rows(named=True):
                fh.write(orjson.dumps(row) + b"\n")
    except OSError as exc:
        raise DupfindError(f"cannot write rejects to {target}: {exc.strerror or exc}.") from None

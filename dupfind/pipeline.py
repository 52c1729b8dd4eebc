"""Wiring of the stages (config, ingest, ...) shared by every command."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from dupfind.cache import TableCache, default_cache_dir
from dupfind.config import Config, load_config
from dupfind.errors import DupfindError
from dupfind.ingest import IngestResult, ingest
from dupfind.timeparse import parse_time_bound


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
    since_ts = parse_time_bound(since, "--since", assume_tz=config.assume_tz) if since else None
    until_ts = parse_time_bound(until, "--until", assume_tz=config.assume_tz) if until else None
    if since_ts and until_ts and since_ts > until_ts:
        raise DupfindError("--since is later than --until, so no record could match.")
    progress, advance = _progress_for(paths, stderr)
    if progress is None:
        return ingest(paths, config, since_ts, until_ts, cache=cache)
    with progress:
        return ingest(paths, config, since_ts, until_ts, progress=advance, cache=cache)


def write_rejects(result: IngestResult, target: Path) -> None:
    """Every rejected line as NDJSON: source, line, reason, text."""
    try:
        with target.open("wb") as fh:
            for row in result.rejects.sort(["source", "line"]).iter_rows(named=True):
                fh.write(orjson.dumps(row) + b"\n")
    except OSError as exc:
        raise DupfindError(f"cannot write rejects to {target}: {exc.strerror or exc}.") from None

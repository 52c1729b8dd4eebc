"""A framework log named after its file (no banner in it) takes the worker whose records it repeats."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dupfind.echoed_workers import echoed_workers
from dupfind.ingest_result import FileReport

from conftest import FIXTURES
from test_rotated_logs import _findings

CELERY = sorted(p.parent for p in (FIXTURES / "real").glob("celery_redis_*/logs"))


def _since_first_task(logs: Path, out: Path) -> None:
    """The logs as `kubectl logs --since` gives them once the workers have run a while: Celery's
    own logs from their first task on, without the banner and `ready.` line that name the node."""
    shutil.copytree(logs, out)
    for log in out.glob("celery-*.log"):
        if log.name.startswith("celery-beat"):  # a scheduler's log: it runs no task
            continue
        lines = log.read_text().splitlines(keepends=True)
        first = next(i for i, line in enumerate(lines) if "] Task " in line)
        assert any("ready." in line for line in lines[:first])
        log.write_text("".join(lines[first:]))


@pytest.mark.parametrize("case", CELERY, ids=lambda p: p.name)
def test_celery_logs_without_their_banner_give_the_findings_of_the_whole_logs(tmp_path, case):
    """Celery's own lines and the application's of one worker are one process's: named after its
    file for want of a banner, the Celery log was a second worker that ran each job beside the
    first: each recording gave 46-47 false DF103s, and the guarded controls 11-13 false DF104s."""
    _since_first_task(case / "logs", tmp_path / "logs")
    assert _findings(tmp_path / "logs") == _findings(case / "logs")


def _table(rows: list[tuple[str, str, str, str, float]]) -> pl.DataFrame:
    start = datetime(2026, 11, 29, 8, 58, tzinfo=UTC)
    return pl.DataFrame(
        [(source, worker, kind, job, start + timedelta(seconds=at)) for source, worker, kind, job, at in rows],
        schema={"source": pl.String, "worker_id": pl.String, "kind": pl.String, "job_id": pl.String, "ts": pl.Datetime("us", "UTC")},
        orient="row",
    )


def _named(path: str, worker: str) -> FileReport:
    return FileReport(path=path, named_worker=worker)


def test_a_log_is_named_after_the_worker_that_repeats_most_of_its_runs_at_the_same_moments():
    framework = [("celery.log", "celery", kind, f"j{n}", n * 2.0 + (0.4 if kind == "finish" else 0)) for n in range(6) for kind in ("receive", "finish")]
    app = [("app.ndjson", "w1@host", kind, f"j{n}", n * 2.0 + (0.4 if kind == "finish" else 0) + 0.002) for n in range(6) for kind in ("receive", "finish")]
    reports = [_named("celery.log", "celery"), FileReport(path="app.ndjson")]
    assert echoed_workers(_table(framework + app), reports) == {"celery.log": ("celery", "w1@host")}
    # Its own banner, or a name taken from another part of its log, is left alone.
    assert echoed_workers(_table(framework + app), [FileReport(path="celery.log", named_worker="celery", context_worker="w9@h")]) == {}
    assert echoed_workers(_table(framework + app), reports, {"celery.log"}) == {}


def test_a_worker_that_ran_the_same_jobs_later_or_only_a_few_of_them_is_another_worker():
    framework = [("celery.log", "celery", "receive", f"j{n}", n * 2.0) for n in range(10)]
    reports = [_named("celery.log", "celery")]
    # A redelivery to another worker seconds later (a visibility timeout) is not the same moment.
    later = [("app.ndjson", "w2@host", "receive", f"j{n}", n * 2.0 + 6.0) for n in range(10)]
    assert echoed_workers(_table(framework + later), reports) == {}
    # Repeated at the same moments for 4 of 10 runs only: not most of them.
    few = [("app.ndjson", "w1@host", "receive", f"j{n}", n * 2.0) for n in range(4)]
    assert echoed_workers(_table(framework + few), reports) == {}
    # Two workers repeating it alike: neither is known to be it.
    split = [("a.ndjson", "w1@host", "receive", f"j{n}", n * 2.0) for n in range(6)]
    split += [("b.ndjson", "w2@host", "receive", f"j{n}", n * 2.0) for n in range(4, 10)]
    assert echoed_workers(_table(framework + split), reports) == {}

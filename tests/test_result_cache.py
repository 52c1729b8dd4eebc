"""The whole-input result cache: warm outputs equal cold ones byte for byte, a warm run reads no
log line and runs no detector, what matters invalidates, what does not reuses, and nothing
corrupt, foreign or unwritable is trusted or breaks a run."""

from __future__ import annotations

import dataclasses
import io
import math
import os
import shutil
import subprocess
import sys
import zlib
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

import dupfind.analyze
import dupfind.background
import dupfind.cache
import dupfind.pipeline
import dupfind.render.formats_report
import dupfind.result_cache
from dupfind.cli import app
from dupfind.config import load_config
from dupfind.exact_json import decode, decode_values, encode, encode_values
from dupfind.findings import Evidence, Finding
from dupfind.ingest_result import IngestResult
from dupfind.pipeline import analyze_correlated, load_correlated
from dupfind.result_cache import CachedCorrelation, CachedIngest
from dupfind.rules_registry import load_rules
from dupfind.schema import as_strings

from conftest import FIXTURES, rename_worker_keeping_size_and_mtime, run_cli

SCENARIO = FIXTURES / "synth" / "deploy-overlap" / "logs"


@pytest.fixture
def logs(tmp_path):
    target = tmp_path / "logs"
    shutil.copytree(SCENARIO, target)
    return target


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(path))
    return path


@pytest.fixture
def no_prepared_views(monkeypatch):
    """`analyze` draws no timeline view for the next command: the only output it stores is its own."""
    import dupfind.commands.analyze

    monkeypatch.setattr(dupfind.commands.analyze, "PREPARED_VIEWS_MAX_RECORDS", 0)


def run(*args: str) -> bytes:
    """One in-process CLI run: its stdout, after checking it succeeded."""
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    dupfind.background.wait()  # as main() does before the process exits
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


class Calls:
    """Counts (and optionally forbids) ingestion, correlation and the detectors."""

    def __init__(self, monkeypatch) -> None:
        self.ingest = self.correlate = self.analyze = 0
        self.forbid = False
        ingest, correlate = dupfind.pipeline._ingest, dupfind.pipeline.correlate_inputs
        analyze = dupfind.analyze.analyze

        def counted(name, fn):
            def wrapper(*a, **k):
                assert not self.forbid, f"a warm run called {name}"
                setattr(self, name, getattr(self, name) + 1)
                return fn(*a, **k)
            return wrapper

        monkeypatch.setattr(dupfind.pipeline, "_ingest", counted("ingest", ingest))
        monkeypatch.setattr(dupfind.pipeline, "correlate_inputs", counted("correlate", correlate))
        monkeypatch.setattr(dupfind.analyze, "analyze", counted("analyze", analyze))

    def reset(self) -> Calls:
        self.ingest = self.correlate = self.analyze = 0
        return self


@pytest.fixture
def calls(monkeypatch):
    return Calls(monkeypatch)


def _finding(logs: Path) -> dict:
    doc = orjson.loads(run("analyze", str(logs), "--format", "json", "--no-cache"))
    return next(f for f in doc["findings"] if f["harmful"])


COMMANDS = {
    "analyze-json": ["analyze", "{logs}", "--format", "json"],
    "analyze-ndjson": ["analyze", "{logs}", "--format", "ndjson"],
    "analyze-markdown": ["analyze", "{logs}", "--format", "markdown"],
    "analyze-table": ["analyze", "{logs}", "--format", "table"],
    "trace-json": ["trace", "{job}", "{logs}", "--format", "json"],
    "trace-table": ["trace", "{job}", "{logs}"],
    "trace-markdown": ["trace", "{job}", "{logs}", "--format", "markdown"],
    "trace-finding": ["trace", "--finding", "{fingerprint}", "{logs}", "--format", "json"],
    "timeline-json": ["timeline", "{logs}", "--format", "json"],
    "timeline-table": ["timeline", "{logs}"],
    "stats-json": ["stats", "{logs}", "--format", "json"],
    "stats-table": ["stats", "{logs}"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_warm_output_equals_cold_and_reads_nothing(name, logs, cache_dir, calls):
    finding = _finding(logs)
    values = {"logs": str(logs), "job": finding["ids"]["job_id"][0], "fingerprint": finding["fingerprint"]}
    args = [a.format(**values) for a in COMMANDS[name]]
    uncached = run(*args, "--no-cache")
    calls.reset()
    cold = run(*args)
    assert calls.ingest == 1 and calls.correlate == 1
    calls.reset().forbid = True
    warm = run(*args)
    assert warm == cold == uncached
    again = run(*args)  # the facts and documents stored by the first warm run read back the same
    assert again == cold


def test_timeline_views_are_kept_as_bytes(logs, cache_dir, tmp_path, monkeypatch):
    """Each timeline view (table, JSON, HTML; redacted or not) is stored as the bytes it wrote,
    with its note for stderr: a later run over the same cached analysis builds no document."""
    import dupfind.timeline

    def invoke(*args: str) -> tuple[bytes, str, bytes]:
        page = tmp_path / "t.html"
        result = CliRunner().invoke(app, ["timeline", str(logs), *args, "--html", str(page)], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout_bytes, result.stderr, page.read_bytes()

    views = [(), ("--format", "json"), ("--redact",), ("--redact", "--format", "json"), ("--width", "120")]
    cold = [invoke(*v, "--no-cache") for v in views]
    assert len({c[0] for c in cold}) == 3  # table, JSON, wider table: the timeline of this scenario has nothing to mask
    first = [invoke(*v) for v in views]

    def refuse(*args, **kwargs):
        raise AssertionError("the timeline document was built again")

    monkeypatch.setattr(dupfind.timeline, "timeline_document", refuse)
    assert [invoke(*v) for v in views] == first == cold


def test_analyze_prepares_what_stats_shows(logs, cache_dir, monkeypatch):
    """A cached `analyze` also stores the stats of its analysis (once its report is out): a `stats`
    after it builds none and writes what a --no-cache run writes. Another bucket is made then."""
    import dupfind.queue_stats

    views = [("--format", "json"), (), ("--redact",)]
    uncached = [run("stats", str(logs), *v, "--no-cache") for v in views]
    run("analyze", str(logs), "--format", "json")

    def refuse(*args, **kwargs):
        raise AssertionError("the stats were built again")

    monkeypatch.setattr(dupfind.queue_stats, "build_stats", refuse)
    assert [run("stats", str(logs), *v) for v in views] == uncached
    with pytest.raises(AssertionError, match="built again"):
        run("stats", str(logs), "--bucket", "5m")


def test_stats_after_analyze_loads_no_polars(logs, tmp_path):
    """The command line: `analyze` stores the stats after its report is out, and `stats` then
    reads them without loading polars (0.2 s of a first `stats` over 20,000 small files)."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("analyze", str(logs), "--format", "json", env=env).returncode == 0
    stats = run_cli("stats", str(logs), "--format", "json", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert stats.returncode == 0 and b'"schema": "dupfind.stats/1"' in stats.stdout
    imported = {line.rsplit(b"|", 1)[-1].strip() for line in stats.stderr.splitlines() if line.startswith(b"import time:")}
    assert b"dupfind.queue_stats" in imported and b"polars.dataframe.frame" not in imported
    no_stats = run_cli("stats", str(logs), "--format", "json", "--bucket", "5m", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert b"polars.dataframe.frame" in {line.rsplit(b"|", 1)[-1].strip() for line in no_stats.stderr.splitlines()}


PII = FIXTURES / "scenarios" / "pii-order-confirmation" / "logs"


def test_analyze_prepares_the_markdown_ticket(tmp_path, cache_dir, monkeypatch):
    """A cached `analyze` also draws its Markdown ticket but the command line, masked as a ticket
    is by default: the ticket after it decodes no finding and builds no trace, and writes what a
    --no-cache run writes, with the same note on stderr of what was masked. A ticket that is not
    the analysis' own (--no-redact, --baseline) is drawn, as without the cache."""
    import dupfind.render.markdown

    logs = tmp_path / "pii"
    shutil.copytree(PII, logs)
    baseline = tmp_path / "baseline.json"
    baseline.write_bytes(run("analyze", str(logs), "--format", "json", "--no-cache"))

    def ticket(*options: str) -> tuple[bytes, str]:
        result = CliRunner().invoke(app, ["analyze", str(logs), "--format", "markdown", *options],
                                    catch_exceptions=False)
        dupfind.background.wait()
        assert result.exit_code == 0, result.output
        return result.stdout_bytes, result.stderr

    views = [(), ("--no-redact",), ("--baseline", str(baseline))]
    uncached = [ticket(*v, "--no-cache") for v in views]
    assert "masked" in uncached[0][1] and b"[redacted email]" in uncached[0][0]
    run("analyze", str(logs), "--format", "json")
    drawn = []
    ticket_parts = dupfind.render.markdown.ticket_parts
    monkeypatch.setattr(dupfind.render.markdown, "ticket_parts", lambda *a, **k: drawn.append(1) or ticket_parts(*a, **k))
    assert ticket() == uncached[0] and drawn == []
    assert [ticket(*v) for v in views[1:]] == uncached[1:] and len(drawn) == 2


def test_the_ticket_keeps_its_worst_findings_trace_for_trace_finding(tmp_path, cache_dir, monkeypatch):
    """The ticket `analyze` draws traces its worst finding, and keeps that trace: `trace --finding`
    of that finding (the command the ticket gives to reproduce it) then builds none, in every
    format, and writes what a --no-cache run writes. Another finding's trace is built."""
    import dupfind.trace

    logs = tmp_path / "pii"
    shutil.copytree(PII, logs)
    report = orjson.loads(run("analyze", str(logs), "--format", "json"))
    worst = next(f for f in report["findings"] if f["harmful"])
    other = next(f for f in report["findings"] if f["rule"] == "DF104")  # the same action, another finding

    def trace(fingerprint: str, *options: str) -> tuple[bytes, str]:
        result = CliRunner().invoke(app, ["trace", "--finding", fingerprint, str(logs), *options], catch_exceptions=False)
        dupfind.background.wait()
        assert result.exit_code == 0, result.output
        return result.stdout_bytes, result.stderr

    views = [("--format", "json"), ("--format", "markdown"), ()]
    uncached = [trace(worst["fingerprint"], *v, "--no-cache") for v in views]
    other_uncached = trace(other["fingerprint"], "--format", "json", "--no-cache")

    def refuse(*args, **kwargs):
        raise AssertionError("the trace was built again")

    monkeypatch.setattr(dupfind.trace, "build_trace", refuse)
    assert [trace(worst["fingerprint"], *v) for v in views] == uncached
    with pytest.raises(AssertionError, match="built again"):
        trace(other["fingerprint"], "--format", "json")
    monkeypatch.undo()
    assert trace(other["fingerprint"], "--format", "json") == other_uncached


def test_a_ticket_after_analyze_loads_no_polars(tmp_path):
    """The command line: the ticket after `analyze` is drawn from the parts analyze stored, without
    loading polars or rich (the worst incident's trace needed both)."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("analyze", str(PII), "--format", "json", env=env).returncode == 0
    md = run_cli("analyze", str(PII), "--format", "markdown", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert md.returncode == 0 and md.stdout.startswith(b"# Duplicated side effects")
    imported = {line.rsplit(b"|", 1)[-1].strip() for line in md.stderr.splitlines() if line.startswith(b"import time:")}
    assert b"dupfind.render.markdown" in imported
    assert not imported & {b"polars.dataframe.frame", b"rich.console", b"dupfind.trace"}
    assert b"dupfind: masked 3 tokens or keys" in md.stderr
    worst = md.stdout.split(b"dupfind trace --finding ")[1].split()[0].decode()
    trace = run_cli("trace", "--finding", worst, str(PII), "--format", "json", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert trace.returncode == 0 and orjson.loads(trace.stdout)["finding"] == worst
    imported = {line.rsplit(b"|", 1)[-1].strip() for line in trace.stderr.splitlines() if line.startswith(b"import time:")}
    assert b"dupfind.trace" in imported and b"polars.dataframe.frame" not in imported


def test_analyze_prepares_the_timelines_default_views(logs, cache_dir, monkeypatch):
    """A cached `analyze` of a small export also draws the timeline's default views (JSON, and the
    terminal view as this output would show it): the timeline after it builds no document and
    writes what a --no-cache run writes. An analysis the timeline does not read (other rules, an
    id fan-out of its own), one not made now, or an export above PREPARED_VIEWS_MAX_RECORDS is not
    drawn for."""
    import dupfind.commands.analyze
    import dupfind.timeline

    def timeline(*options: str) -> bytes:
        return run("timeline", str(logs), *options)

    views = [("--format", "json"), ()]
    uncached = [timeline(*v, "--no-cache") for v in views]
    built = []
    for name in ("timeline_document", "timeline_parts"):
        real = getattr(dupfind.timeline, name)
        monkeypatch.setattr(dupfind.timeline, name, lambda *a, _real=real, **k: built.append(1) or _real(*a, **k))

    for options in (("--disable", "DF105"), ("--max-jobs-per-value", "30")):
        run("analyze", str(logs), "--format", "json", *options)
        assert built == []
    run("analyze", str(logs), "--format", "json")
    assert built  # drawn once the report was out
    built.clear()
    assert [timeline(*v) for v in views] == uncached and built == []
    assert timeline("--width", "120") and built  # another view is drawn
    shutil.rmtree(cache_dir)
    monkeypatch.setattr(dupfind.commands.analyze, "PREPARED_VIEWS_MAX_RECORDS", 10)
    built.clear()
    run("analyze", str(logs), "--format", "json")
    assert built == []
    monkeypatch.undo()


def test_a_timeline_after_analyze_loads_no_polars(logs, tmp_path):
    """The command line: the timeline after `analyze` writes the views analyze drew, without
    loading polars (over 20,000 small files, 0.33 s a first timeline took, 0.20 s now)."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("analyze", str(logs), "--format", "json", env=env).returncode == 0
    for options in (("--format", "json"), ()):
        shown = run_cli("timeline", str(logs), *options, env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
        assert shown.returncode == 0 and b"deploy" in shown.stdout
        imported = {line.rsplit(b"|", 1)[-1].strip() for line in shown.stderr.splitlines()
                    if line.startswith(b"import time:")}
        assert b"dupfind.result_cache" in imported and b"polars.dataframe.frame" not in imported


def _job_ids(logs) -> list[str]:
    """The first job id of each finding that names one, the worst finding's first."""
    report = orjson.loads(run("analyze", str(logs), "--format", "json", "--no-cache"))
    return list(dict.fromkeys(f["ids"]["job_id"][0] for f in report["findings"] if f["ids"].get("job_id")))


def test_analyze_prepares_the_trace_of_its_worst_findings_job_id(logs, cache_dir, monkeypatch):
    """A cached `analyze` of a small export also draws what `trace ID` writes for its worst
    finding's job id (the terminal view, as this output would show it): that trace after it builds
    nothing and writes what a --no-cache run writes; another id's trace is built. An analysis the
    trace does not read (other rules) is not drawn for."""
    import dupfind.trace

    job, other = _job_ids(logs)[:2]
    uncached = run("trace", job, str(logs), "--no-cache")
    built = []
    real = dupfind.trace.trace_ids
    monkeypatch.setattr(dupfind.trace, "trace_ids", lambda *a, **k: built.append(a[1]) or real(*a, **k))
    run("analyze", str(logs), "--format", "json", "--disable", "DF105")
    assert built == []
    run("analyze", str(logs), "--format", "json")
    assert built == [[job]]  # drawn once the report was out
    built.clear()
    assert run("trace", job, str(logs)) == uncached and built == []
    assert job.encode() in uncached
    run("trace", "--id", other, str(logs))
    assert built == [[other]]


def test_a_trace_of_the_worst_findings_job_id_after_analyze_loads_no_polars(logs, tmp_path):
    """The command line: `trace ID` of the id an engineer copies first from the report writes what
    analyze drew, without loading polars (over 20,000 small files, 0.38 s a first trace took, 0.19
    s now); the trace of another id loads it."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("analyze", str(logs), "--format", "json", env=env).returncode == 0
    job, other = _job_ids(logs)[:2]
    for query, loaded in ((job, False), (other, True)):
        shown = run_cli("trace", query, str(logs), env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
        assert shown.returncode == 0
        imported = {line.rsplit(b"|", 1)[-1].strip() for line in shown.stderr.splitlines()
                    if line.startswith(b"import time:")}
        assert b"dupfind.result_cache" in imported and (b"polars.dataframe.frame" in imported) == loaded
        assert query.encode() in shown.stdout


def test_a_timeline_after_analyze_reads_its_marks_not_the_side_effects(logs, cache_dir):
    """A cached analysis stores each execution's side-effect marks and when each duplicate was
    requested (PREPARED_FACTS): a timeline over it reads those, not every side-effect request, and
    draws what it draws without the cache."""
    import orjson

    from dupfind.commands.analyze import run_analysis
    from dupfind.timeline import select_windows, timeline_document

    def document(use_cache: bool) -> tuple[bytes, dict]:
        report, _ = run_analysis([str(logs)], None, 0.5, None, 25, None, None, None, None, None, None, False,
                                 use_cache=use_cache)
        doc = timeline_document(report, select_windows(report, None, None, 600.0), as_json=True)
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2), vars(report.context)

    run("analyze", str(logs), "--format", "json")
    cached, derived = document(True)
    assert {"effect_marks", "duplicate_requests"} <= set(derived) and "side_effects" not in derived
    assert b'"repeat": true' not in cached and b'"repeat":true' in cached  # entries that repeat a side effect
    assert cached == document(False)[0]


def test_stats_views_are_kept_as_bytes(logs, cache_dir, monkeypatch):
    """Each stats view (table, JSON; another bucket, redacted, fewer rows) of a cached analysis is
    stored as the bytes it wrote: a later run renders nothing (the JSON of 20,000 small files' stats
    took 1.1 s to render, most of it their file reports), and every view keeps bytes of its own."""
    import dupfind.render.registry

    def invoke(*args: str) -> bytes:
        result = CliRunner().invoke(app, ["stats", str(logs), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout_bytes

    views = [("--format", "json"), (), ("--bucket", "5m", "--format", "json"), ("--bucket", "5m"), ("--redact",),
             ("--max-rows", "1"), ("--skew", "2", "--format", "json")]
    cold = [invoke(*v, "--no-cache") for v in views]
    assert cold[0] != cold[2] and cold[1] != cold[3]  # the bucket shapes the receives-vs-publishes view
    first = [invoke(*v) for v in views]

    def refuse(*args, **kwargs):
        raise AssertionError("the stats were rendered again")

    for fmt in ("table", "json"):
        monkeypatch.setitem(dupfind.render.registry.STATS_RENDERERS, fmt, refuse)
    assert [invoke(*v) for v in views] == first == cold


@pytest.mark.parametrize("part_rows", [dupfind.result_cache.TABLE_PART_ROWS, 37])
def test_one_warm_set_serves_every_command(part_rows, logs, cache_dir, calls, monkeypatch):
    # With parts of 37 rows, the table of the scenario is stored in dozens of parts, and the warm
    # commands read some columns of all of them, or a few of them whole.
    monkeypatch.setattr(dupfind.result_cache, "TABLE_PART_ROWS", part_rows)
    finding = _finding(logs)
    commands = [
        ["trace", finding["ids"]["job_id"][0], str(logs), "--format", "json"],
        ["trace", "--finding", finding["fingerprint"], str(logs), "--format", "markdown"],
        ["analyze", str(logs), "--format", "markdown"],
        ["stats", str(logs), "--format", "json"],
        ["timeline", str(logs), "--format", "json"],
    ]
    cold = run("analyze", str(logs), "--format", "json")
    calls.reset().forbid = True
    warm = [run(*c) for c in commands]
    calls.forbid = False
    assert warm == [run(*c, "--no-cache") for c in commands]
    assert run("analyze", str(logs), "--format", "json") == cold


def test_the_ids_redaction_protects_are_stored_with_the_set(logs, cache_dir, monkeypatch):
    """A redactor over a cached set reads its protected ids from the set entry (working them out
    again would read every id column of the cached table), and they are the uncached ones."""
    import dupfind.redact
    from dupfind.cli_common import make_redactor
    from dupfind.redact import Redactor

    config = load_config(cwd=Path("/"))
    correlation = load_correlated([str(logs)], config, use_cache=False).correlation
    expected = Redactor.for_table(correlation.table, texts=correlation.texts).protected
    assert len(expected) > 10  # order ids and the like look like phone numbers
    load_correlated([str(logs)], config)  # stores the set

    def refuse(*args, **kwargs):
        raise AssertionError("the protected ids were worked out again")

    monkeypatch.setattr(dupfind.redact, "protected_values", refuse)
    warm = analyze_correlated(load_correlated([str(logs)], config), config, load_rules(config), 0.5, {})
    assert isinstance(warm.context.correlation, CachedCorrelation)
    redactor = make_redactor(None, "markdown", None, config.business_keys, context=warm.context)
    assert redactor.protected == expected


def test_an_analysis_stores_the_frames_the_next_commands_need(logs, cache_dir, calls):
    run("analyze", str(logs), "--format", "json")
    [entry] = _set_dirs(cache_dir)
    for name in dupfind.pipeline.PREPARED_FACTS:
        assert list(entry.glob(f"facts/*/{name}/meta.json")), name
    calls.reset().forbid = True
    finding = next(f for f in orjson.loads(run("analyze", str(logs), "--format", "json"))["findings"] if f["harmful"])
    calls.forbid = False
    assert run("trace", "--finding", finding["fingerprint"], str(logs), "--format", "json") == run(
        "trace", "--finding", finding["fingerprint"], str(logs), "--format", "json", "--no-cache")


def test_a_set_placed_meanwhile_by_another_command_is_kept(logs, cache_dir):
    """Two commands started together over the same inputs each store the set. The second keeps the
    first's entry (the same rows in other bytes, which that command may be reading) instead of
    replacing it under its reader, whose frames then failed their checksums and deleted it; an
    entry that fails its checks in that place is replaced."""
    run("analyze", str(logs), "--format", "json")
    [folder] = _set_dirs(cache_dir)
    cache = dupfind.result_cache.ResultCache(cache_dir)
    reader = cache.open_set(folder.name)
    placed = {p.name: p.stat().st_ino for p in folder.glob("*.arrow")}
    fresh = load_correlated([str(logs)], load_config(cwd=Path("/")), use_cache=False)
    assert cache.store_set(folder.name, fresh.result, fresh.correlation)
    assert {p.name: p.stat().st_ino for p in folder.glob("*.arrow")} == placed
    assert as_strings(reader.correlation().text_table()).equals(as_strings(fresh.correlation.text_table()))
    assert not list((cache_dir / "sets").glob(".tmp-*"))  # the second one's staging removed
    _truncate(folder / "meta.json")
    assert cache.store_set(folder.name, fresh.result, fresh.correlation)
    assert {p.name: p.stat().st_ino for p in folder.glob("*.arrow")} != placed
    assert cache.open_set(folder.name) is not None


def test_commands_started_together_share_one_cache_without_a_word(logs, tmp_path):
    """Commands over the same inputs started at once, each with an empty cache: each prints what
    it prints without the cache, and none says the cache was not updated (each replaced the
    others' set entries and facts under their reads: checksums failed, files vanished)."""
    commands = [["analyze", "--format", "json"], ["stats", "--format", "json"], ["timeline", "--format", "json"]] * 2
    expected = [run(argv[0], str(logs), *argv[1:], "--no-cache") for argv in commands]
    env = {**os.environ, "DUPFIND_CACHE_DIR": str(tmp_path / "shared-cache")}
    started = [subprocess.Popen([sys.executable, "-m", "dupfind", argv[0], str(logs), *argv[1:]], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for argv in commands]
    for process, want in zip(started, expected):
        out, err = process.communicate(timeout=120)
        assert (process.returncode, err.decode()) == (0, "")
        assert out == want
    assert run("analyze", str(logs), "--format", "json") == expected[0]


def test_a_table_in_parts_gives_back_its_columns_and_rows(logs, cache_dir, monkeypatch):
    monkeypatch.setattr(dupfind.result_cache, "TABLE_PART_ROWS", 37)
    config = load_config(cwd=Path("/"))
    fresh = load_correlated([str(logs)], config, use_cache=False).correlation
    table = fresh.table_with(*fresh.apart_names)  # the whole table, as the cache holds it
    run("analyze", str(logs), "--format", "json")
    [entry] = _set_dirs(cache_dir)
    assert len(list(entry.glob("table-*.arrow"))) == math.ceil(table.height / 37) > 3
    meta = orjson.loads(bytes(dupfind.result_cache._unchecked((entry / "meta.json").read_bytes(), dupfind.result_cache.SET_FORMAT)))
    assert len(meta["table"]["parts"][0]["streams"]) > 2  # its Categorical columns, a few a stream

    def cached() -> CachedCorrelation:
        correlation = load_correlated([str(logs)], config).correlation
        assert isinstance(correlation, CachedCorrelation)
        return correlation

    warm = cached()
    assert warm.column_names == fresh.column_names  # every column, those the fresh one holds apart too
    # The dictionary of the ids and messages comes back with the table: its codes mean the same texts.
    assert warm.texts.values.equals(fresh.texts.values) and warm.texts.columns == fresh.texts.columns
    assert as_strings(warm.text_table()).equals(as_strings(fresh.text_table()))
    # Labels as text: each table has its own pool of labels.
    assert as_strings(warm.columns("kind", "rid", "job_id")).equals(as_strings(table.select("kind", "rid", "job_id")))
    picks = [table.height - 1, 40, 0, 36, 37, 40, 74, table.height // 2]  # unordered, repeated, at part edges
    assert as_strings(warm.rows(picks)).equals(as_strings(table[picks]))
    assert as_strings(warm.rows([])).equals(as_strings(table.clear()))
    with pytest.raises(IndexError):
        warm.rows([table.height])
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        warm.columns("kind", "no_such_column")
    assert entry.is_dir()  # a caller's mistake does not discard the entry
    assert as_strings(warm.table).equals(as_strings(table))
    # A part read whole holds the rows asked for; the others are not read whole.
    warm = cached()
    assert as_strings(warm.rows([38, 40])).equals(as_strings(table[[38, 40]]))
    assert set(warm._entry._parts) == {1}
    # Past MAX_OPEN_PARTS descriptors, parts are read and checked on every read instead.
    monkeypatch.setattr(dupfind.result_cache, "MAX_OPEN_PARTS", 2)
    warm = cached()
    assert warm.columns("rid", "message").equals(table.select("rid", "message"))
    assert as_strings(warm.rows(picks)).equals(as_strings(table[picks]))
    assert len(warm._entry._part_files) == 2


def test_a_frame_is_written_in_streams_of_a_few_categorical_columns(tmp_path):
    per_stream = dupfind.result_cache.CATEGORICALS_PER_STREAM
    texts = [None if i % 5 == 0 else f"v{i % 7}" for i in range(50)]
    columns = {"rid": pl.int_range(50, eager=True)}
    for n in range(2 * per_stream + 1):  # three streams: per_stream, per_stream and 1 Categorical columns
        columns[f"c{n}"] = pl.Series(texts, dtype=pl.Categorical)
        columns[f"x{n}"] = pl.Series([float(i) if i % 3 else None for i in range(50)])
    frame = pl.DataFrame(columns)
    path = tmp_path / "frame.arrow"
    info = dupfind.result_cache._write_frame(path, frame)
    assert [columns for columns, _, _ in info["streams"]] == [2 * per_stream + 1, 2 * per_stream, 2]
    assert sum(size for _, size, _ in info["streams"]) == info["bytes"] == path.stat().st_size
    assert dupfind.result_cache._read_frame(path, info).equals(frame)
    found = dupfind.result_cache._read_streams(path.read_bytes(), info)
    assert [zlib.crc32(data) for _, data in found] == [crc for _, _, crc in info["streams"]]
    stream_of = {name: k for k, (names, _) in enumerate(found) for name in names}
    assert stream_of["rid"] == 0 and stream_of[f"c{per_stream}"] == 1 and stream_of[f"x{2 * per_stream}"] == 2
    with pytest.raises(dupfind.result_cache.CorruptEntry):  # a layout that does not add up
        dupfind.result_cache._read_frame(path, {**info, "streams": [[2, 10, 0], *info["streams"][1:]]})
    # One that adds up but cuts the bytes elsewhere fails to decode (callers discard the entry).
    shifted = [[n, size + d, crc] for (n, size, crc), d in zip(info["streams"], (8, -8, 0))]
    with pytest.raises((dupfind.result_cache.CorruptEntry, pl.exceptions.PolarsError)):
        dupfind.result_cache._read_frame(path, {**info, "streams": shifted})


def test_a_frame_file_holds_the_streams_polars_writes_and_gets_them_in_pieces(tmp_path, monkeypatch):
    # Each stream goes into the file as polars encodes it (no buffer of a whole stream first): the
    # same bytes as polars' own IPC output of those columns, sizes and CRC-32s counted on the way.
    n = 300_000
    frame = pl.DataFrame({
        "rid": pl.int_range(n, eager=True),
        "text": pl.int_range(n, eager=True).cast(pl.String) + "-some-longer-text",
        "ids": pl.int_range(n, eager=True).cast(pl.String).str.split("1"),
        "label": pl.Series([f"w{i % 11}" for i in range(n)], dtype=pl.Categorical),
        "after": pl.int_range(n, eager=True).cast(pl.Float64),
    })
    pieces: list[int] = []
    write = dupfind.result_cache._CheckedWriter.write

    def counted(self, data):
        pieces.append(memoryview(data).nbytes)
        return write(self, data)

    monkeypatch.setattr(dupfind.result_cache._CheckedWriter, "write", counted)
    path = tmp_path / "frame.arrow"
    info = dupfind.result_cache._write_frame(path, frame)
    raw = path.read_bytes()
    expected = [frame.select(names).write_ipc(None, compression=dupfind.result_cache.COMPRESSION).getvalue()
                for names in dupfind.result_cache._column_streams(frame)]
    assert raw == b"".join(expected)
    streams = dupfind.result_cache._read_streams(raw, info)
    assert [len(data) for _, data in streams] == [size for _, size, _ in info["streams"]]
    assert [zlib.crc32(data) for _, data in streams] == [crc for _, _, crc in info["streams"]]
    assert zlib.crc32(raw) == info["crc32"] and len(raw) == info["bytes"] == sum(pieces)
    assert max(pieces) < max(size for _, size, _ in info["streams"]) / 2  # written in pieces
    assert dupfind.result_cache._read_frame(path, info).equals(frame)


def test_columns_are_read_from_their_own_streams_each_checked(tmp_path):
    per_stream = dupfind.result_cache.CATEGORICALS_PER_STREAM
    columns = {"rid": pl.int_range(40, eager=True)}
    for n in range(2 * per_stream + 1):
        columns[f"c{n}"] = pl.Series([f"t{i % 3}" for i in range(40)], dtype=pl.Categorical)
    frame = pl.DataFrame(columns)
    path = tmp_path / "frame.arrow"
    info = dupfind.result_cache._write_frame(path, frame)
    last = f"c{2 * per_stream}"  # alone in the last stream
    _, size, _ = info["streams"][-1]
    raw = bytearray(path.read_bytes())
    raw[-size // 2] ^= 0xFF  # damage the last stream only
    path.write_bytes(bytes(raw))
    fd = os.open(path, os.O_RDONLY)
    try:
        read = dupfind.result_cache._streams_at(fd, info, path.name, ["rid"])
        assert [names for names, _ in read] == [["rid"]]  # one stream read, not the file
        assert len(read[0][1]) == info["streams"][0][1]
        assert pl.read_ipc(io.BytesIO(read[0][1])).get_column("rid").equals(frame.get_column("rid"))
        with pytest.raises(dupfind.result_cache.CorruptEntry):
            dupfind.result_cache._streams_at(fd, info, path.name, ["rid", last])
    finally:
        os.close(fd)


def test_options_that_matter_invalidate_and_others_reuse(logs, cache_dir, calls, tmp_path):
    base = ["analyze", str(logs), "--format", "json"]
    cold = run(*base)
    assert (calls.ingest, calls.analyze) == (1, 1)
    # Output options: the same analysis.
    calls.reset()
    assert run("analyze", str(logs), "--format", "table")
    run(*base, "--output", str(tmp_path / "report.json"))
    assert (tmp_path / "report.json").read_bytes() == cold
    assert (calls.ingest, calls.correlate, calls.analyze) == (0, 0, 0)
    # Analysis options: the correlated set is reused, the detectors run again (once per new value).
    for extra in (["--skew", "2"], ["--disable", "DF201"], ["--timeout", "45"]):
        calls.reset()
        changed = run(*base, *extra)
        assert (calls.ingest, calls.analyze) == (0, 1), extra
        assert changed == run(*base, *extra, "--no-cache")
        calls.reset()
        assert run(*base, *extra) == changed and calls.analyze == 0
    assert orjson.loads(run(*base, "--disable", "DF201"))["rules"] != orjson.loads(cold)["rules"]
    # Rendering options: each rendered output is its own.
    table = ["analyze", str(logs), "--format", "table"]
    for worst in ("1", "3", "1"):
        assert run(*table, "--worst", worst) == run(*table, "--worst", worst, "--no-cache")
    assert run(*table, "--worst", "1") != run(*table, "--worst", "3")
    # Inputs and correlation options: read and correlated again.
    for extra in (["--since", "2000-01-01T00:00:00Z"], ["--max-jobs-per-value", "3"]):
        calls.reset()
        run(*base, *extra)
        assert calls.ingest == 1 and calls.correlate == 1, extra
    calls.reset()
    assert run(*base) == cold and calls.ingest == 0


def test_a_file_rewritten_at_its_size_with_its_mtime_put_back_invalidates_the_set(logs, cache_dir, calls):
    """A same-length change (a worker renamed, personal data masked) restored with its mtime, as
    `tar x` or `cp -p` leave it: the answer is the new files', not the cached one."""
    base = ["analyze", str(logs), "--format", "json"]
    before = orjson.loads(run(*base))
    worker, renamed = rename_worker_keeping_size_and_mtime(min(logs.glob("worker-*.log")))
    calls.reset()
    after = run(*base)
    # (the file keeps its name: the old id is still in its path, not as a worker)
    assert calls.ingest == 1 and b'"worker-' + renamed + b'"' in after and b'"worker-' + worker + b'"' not in after
    assert orjson.loads(after) == orjson.loads(run(*base, "--no-cache")) != before


def test_changed_added_or_removed_file_invalidates_the_set(logs, cache_dir, calls):
    base = ["analyze", str(logs), "--format", "json"]
    cold = run(*base)
    victim = min(logs.glob("worker-*.log"))
    os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 1_000_000_000))
    calls.reset()
    assert run(*base) == cold  # same bytes, new mtime: read again (that one file), same answer
    assert calls.ingest == 1
    extra = logs / "zz-extra.log"
    extra.write_bytes(victim.read_bytes()[:2000].rsplit(b"\n", 1)[0] + b"\n")
    calls.reset()
    added = orjson.loads(run(*base))
    assert calls.ingest == 1
    assert added["inputs"]["totals"]["files"] == orjson.loads(cold)["inputs"]["totals"]["files"] + 1
    extra.unlink()
    calls.reset()
    assert run(*base) == cold and calls.ingest == 0  # the set before the file was added, still cached


def _set_dirs(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (cache_dir / "sets").iterdir() if not p.name.startswith("."))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = os.urandom(64)
    path.write_bytes(bytes(data))


def _bad_file_report(path: Path) -> None:
    """File reports whose checksum holds but one of which has another layout: the reports are
    read only when a command needs them, and must still never be trusted."""
    reports = orjson.loads(bytes(dupfind.result_cache._unchecked(path.read_bytes(), dupfind.result_cache.SET_FORMAT)))
    reports[0]["unknown_field"] = 1
    path.write_bytes(dupfind.result_cache._checked(orjson.dumps(reports), dupfind.result_cache.SET_FORMAT))


def _one_file_report_less(path: Path) -> None:
    """File reports that pass their checks, and the meta's (its size) too, but one fewer than the
    entry's files."""
    rc = dupfind.result_cache
    reports = orjson.loads(bytes(rc._unchecked(path.read_bytes(), rc.SET_FORMAT)))
    body = rc._checked(orjson.dumps(reports[1:]), rc.SET_FORMAT)
    path.write_bytes(body)
    meta_path = path.with_name("meta.json")
    meta = orjson.loads(bytes(rc._unchecked(meta_path.read_bytes(), rc.SET_FORMAT)))
    meta["files"]["bytes"] = len(body)
    meta_path.write_bytes(rc._checked(orjson.dumps(meta), rc.SET_FORMAT))


def _analyses(entry: Path) -> list[Path]:
    return [p for p in entry.glob("analyses/*.json") if not p.name.endswith(".value.json")]


DAMAGE = {
    "table-truncated": (lambda e: sorted(e.glob("table-*.arrow")), _truncate),
    "table-garbage": (lambda e: sorted(e.glob("table-*.arrow")), _garbage),
    "executions-garbage": (lambda e: [e / "executions.arrow"], _garbage),
    "texts-garbage": (lambda e: [e / "texts.arrow"], _garbage),  # the dictionary of the ids and messages
    "texts-truncated": (lambda e: [e / "texts.arrow"], _truncate),
    "meta-garbage": (lambda e: [e / "meta.json"], _garbage),
    "meta-missing": (lambda e: [e / "meta.json"], Path.unlink),
    "files-report-layout": (lambda e: [e / "files.json"], _bad_file_report),
    "files-one-less": (lambda e: [e / "files.json"], _one_file_report_less),
    "files-garbage": (lambda e: [e / "files.json"], _garbage),
    "files-missing": (lambda e: [e / "files.json"], Path.unlink),
    "analysis-truncated": (_analyses, _truncate),
    "analysis-garbage": (_analyses, _garbage),
    "value-garbage": (lambda e: list(e.glob("analyses/*.value.json")), _garbage),
    "fact-garbage": (lambda e: list(e.glob("facts/*/deploys/*.arrow")), _garbage),
    "fact-meta-truncated": (lambda e: list(e.glob("facts/*/side_effects/meta.json")), _truncate),
    "findings-garbage": (lambda e: list(e.glob("analyses/*.findings")), _garbage),
    "findings-missing": (lambda e: list(e.glob("analyses/*.findings")), Path.unlink),
    "output-garbage": (lambda e: list(e.glob("analyses/*.out")), _garbage),
    "output-truncated": (lambda e: list(e.glob("analyses/*.out")), _truncate),
    "output-empty": (lambda e: list(e.glob("analyses/*.out")), lambda p: p.write_bytes(b"")),  # cannot be mapped
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entries_are_rebuilt_and_never_trusted(damage, logs, cache_dir):
    finding = _finding(logs)
    commands = [
        ["analyze", str(logs), "--format", "markdown"],
        ["analyze", str(logs), "--format", "json"],
        ["trace", finding["ids"]["job_id"][0], str(logs), "--format", "json"],
        ["stats", str(logs), "--format", "json"],
        ["timeline", str(logs), "--format", "json"],
    ]
    cold = [run(*c) for c in commands]
    [entry] = _set_dirs(cache_dir)
    select, harm = DAMAGE[damage]
    targets = select(entry)
    assert targets and all(t.is_file() for t in targets)
    for target in targets:
        harm(target)
    assert [run(*c) for c in commands] == cold
    assert [run(*c) for c in commands] == cold  # and again, from what the rebuild stored
    [entry] = _set_dirs(cache_dir)
    loaded = load_correlated([str(logs)], load_config(cwd=Path("/")))
    assert isinstance(loaded.correlation, CachedCorrelation)
    assert loaded.correlation.table.height > 0  # every frame passes its checks again


def _rewritten_index(path: Path, change) -> None:
    """The analysis `path` with its stored finding index changed by `change`, still passing the
    file's own checks (its length and CRC-32)."""
    rc = dupfind.result_cache
    data = orjson.loads(bytes(rc._unchecked(path.read_bytes(), rc.ANALYSIS_FORMAT)))
    change(data["findings"])
    path.write_bytes(rc._checked(orjson.dumps(data), rc.ANALYSIS_FORMAT))


INDEX_DAMAGE = {
    "harm-as-text": lambda index: index.update(harmful=[str(flag) for flag in index["harmful"]]),
    "cause-as-number": lambda index: index.update(causes=[1 for _ in index["causes"]]),
    "one-severity-less": lambda index: index["severities"].pop(),
    "no-causes": lambda index: index.pop("causes"),
}


@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE))
def test_a_stored_finding_index_of_another_shape_is_never_trusted(damage, logs, cache_dir):
    """The terminal report counts the findings from the index stored beside them; one that is not
    a boolean harm, a text or no cause and a severity for each finding is not used."""
    cold = run("analyze", str(logs), "--no-cache")
    run("analyze", str(logs), "--format", "json")
    [entry] = _set_dirs(cache_dir)
    for path in _analyses(entry):
        _rewritten_index(path, INDEX_DAMAGE[damage])
    assert run("analyze", str(logs)) == cold
    assert run("analyze", str(logs), "--format", "markdown", "--no-redact") == \
        run("analyze", str(logs), "--format", "markdown", "--no-redact", "--no-cache")


@pytest.mark.parametrize("harm", [_garbage, _truncate, Path.unlink])
def test_a_damaged_part_of_the_table_is_never_trusted(harm, logs, cache_dir, monkeypatch):
    monkeypatch.setattr(dupfind.result_cache, "TABLE_PART_ROWS", 37)
    finding = _finding(logs)
    commands = [
        ["stats", str(logs), "--format", "json"],
        ["trace", finding["ids"]["job_id"][0], str(logs), "--format", "json"],
        ["timeline", str(logs), "--format", "json"],
    ]
    cold = [run(*c, "--no-cache") for c in commands]
    run("analyze", str(logs), "--format", "json")
    [entry] = _set_dirs(cache_dir)
    parts = sorted(entry.glob("table-*.arrow"))
    harm(parts[len(parts) // 2])
    assert [run(*c) for c in commands] == cold
    [entry] = _set_dirs(cache_dir)
    assert len(sorted(entry.glob("table-*.arrow"))) == len(parts)  # rebuilt whole


def test_foreign_entry_is_not_trusted(logs, cache_dir, tmp_path):
    cold = run("analyze", str(logs), "--format", "json")
    other = tmp_path / "other"
    shutil.copytree(logs, other)
    run("analyze", str(other), "--format", "json")
    first, second = _set_dirs(cache_dir)
    # Swap the two entries' contents: each meta now names the other key.
    shutil.move(first, first.with_name(".swap"))
    shutil.move(second, first)
    shutil.move(first.with_name(".swap"), second)
    assert run("analyze", str(logs), "--format", "json") == cold


def test_unwritable_cache_never_breaks_a_run(logs, tmp_path, monkeypatch):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(blocker))
    out = run("analyze", str(logs), "--format", "json")
    assert out == run("analyze", str(logs), "--format", "json", "--no-cache")
    assert run("timeline", str(logs), "--format", "json")
    assert blocker.read_text().startswith("a file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_read_only_set_entry_still_serves(logs, cache_dir):
    cold = run("analyze", str(logs), "--format", "json")
    for path in sorted(cache_dir.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        assert run("analyze", str(logs), "--format", "json") == cold
        assert run("stats", str(logs), "--format", "json")
    finally:
        for path in cache_dir.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.parametrize("command", ["analyze", "timeline", "stats", "trace"])
def test_no_cache_writes_nothing(command, logs, cache_dir):
    args = [command, str(logs)] if command != "trace" else ["trace", _finding(logs)["ids"]["job_id"][0], str(logs)]
    run(*args, "--format", "json", "--no-cache")
    assert not cache_dir.exists()


def test_a_command_lists_its_inputs_once(logs, cache_dir, monkeypatch):
    """Its memory estimate, cache keys and read share one listing of the inputs (and one stat of
    each file); a first run lists them once more, as they are now, before storing the set. The
    estimate is made once, and kept in the cache: a warm run opens no input."""
    import dupfind.memory_check
    import dupfind.sources

    listed, real = [], dupfind.sources._expand
    monkeypatch.setattr(dupfind.sources, "_expand", lambda paths: listed.append(paths) or real(paths))
    monkeypatch.setattr(dupfind.memory_check, "available_bytes", lambda: 10**12)  # an estimate is made
    monkeypatch.setattr(dupfind.memory_check, "_totals", {})
    estimated, estimate = [], dupfind.memory_check._log_size
    monkeypatch.setattr(dupfind.memory_check, "_log_size", lambda sources: estimated.append(1) or estimate(sources))
    cold = run("analyze", str(logs), "--format", "json")
    # Estimated once, for the choice of a whole read and the warning before it.
    assert len(listed) == 2 and len(estimated) == 1 and len(list(cache_dir.glob("??/*.logbytes"))) == 1
    listed.clear()
    dupfind.memory_check._totals.clear()  # as in a new process
    assert run("analyze", str(logs), "--format", "json") == cold and len(listed) == 1 and len(estimated) == 1


def test_set_entries_are_pruned_to_the_most_recent(logs, cache_dir, monkeypatch):
    monkeypatch.setattr(dupfind.result_cache, "KEEP_SETS", 2)
    for jobs in (21, 22, 23):
        run("analyze", str(logs), "--format", "json", "--max-jobs-per-value", str(jobs))
    assert len(_set_dirs(cache_dir)) == 2
    config = load_config(cwd=Path("/"))
    assert isinstance(load_correlated([str(logs)], config, max_jobs_per_value=23).correlation, CachedCorrelation)
    assert not isinstance(load_correlated([str(logs)], config, max_jobs_per_value=21).correlation, CachedCorrelation)


def test_stdin_input_is_not_cached(cache_dir):
    data = b"".join(p.read_bytes() for p in sorted(SCENARIO.glob("worker-*.log")))
    result = CliRunner().invoke(app, ["analyze", "-", "--format", "json"], input=data, catch_exceptions=False)
    assert result.exit_code == 0
    assert not (cache_dir / "sets").exists()


def test_cached_report_is_the_report(logs, cache_dir):
    config = load_config(cwd=Path("/"))
    rules = load_rules(config)
    cold = analyze_correlated(load_correlated([str(logs)], config), config, rules, 0.5, {})
    warm = analyze_correlated(load_correlated([str(logs)], config), config, rules, 0.5, {})
    assert isinstance(warm.context.correlation, CachedCorrelation)
    assert warm.findings == cold.findings and warm.summary == cold.summary and warm.to_dict() == cold.to_dict()
    assert warm.context.table.equals(cold.context.table_with(*cold.context.correlation.apart_names))
    assert warm.context.executions.equals(cold.context.executions)
    assert warm.context.side_effects.equals(cold.context.side_effects)
    assert warm.inputs.rejects.equals(cold.inputs.rejects)
    assert warm.inputs.totals() == cold.inputs.totals()


def test_a_set_entry_gives_its_totals_without_decoding_a_file_report(logs, cache_dir):
    """The terminal and Markdown reports and `stats` show the inputs' totals: a set entry keeps
    them, so that over thousands of files they do not decode every file report (0.4-0.6 s for
    20,000 files). They are the totals of the reports, times in their zones included."""
    config = load_config(cwd=Path("/"))
    cold = load_correlated([str(logs)], config).result
    warm = load_correlated([str(logs)], config).result
    assert isinstance(warm, CachedIngest)
    totals = warm.totals()
    assert warm._entry._files is None  # no file report decoded
    assert totals == cold.totals() and totals["files"] == len(cold.files) > 1 and totals["records"] > 0
    assert [type(totals[k]) for k in ("first_ts", "last_ts")] == [type(cold.totals()["first_ts"])] * 2
    assert [totals[k].utcoffset() for k in ("first_ts", "last_ts")] == [cold.totals()[k].utcoffset() for k in ("first_ts", "last_ts")]
    assert totals == IngestResult.totals(warm)  # the reports' own, once decoded


def test_a_cached_analysis_decodes_the_findings_of_some_rules_alone(logs, cache_dir):
    config = load_config(cwd=Path("/"))
    rules = load_rules(config)
    cold = analyze_correlated(load_correlated([str(logs)], config), config, rules, 0.5, {})
    codes = sorted({f.rule for f in cold.findings})
    assert len(codes) >= 2
    for wanted in [(codes[0],), (codes[-1], codes[0]), ("DF1",), ("DF9",)]:
        warm = analyze_correlated(load_correlated([str(logs)], config), config, rules, 0.5, {})
        expected = [f for f in cold.findings if f.rule.startswith(wanted)]
        assert warm.findings_of(*wanted) == expected == cold.findings_of(*wanted)
        assert callable(warm.__dict__["_findings"])  # the other findings were never decoded
        assert warm.findings == cold.findings and warm.findings_of(*wanted) == expected
    prefix = cold.findings[len(cold.findings) // 2].fingerprint[:8]
    warm = analyze_correlated(load_correlated([str(logs)], config), config, rules, 0.5, {})
    assert warm.finding_count == len(cold.findings)
    assert warm.findings_where(lambda _, fp: fp.startswith(prefix)) == [
        f for f in cold.findings if f.fingerprint.startswith(prefix)
    ]
    assert callable(warm.__dict__["_findings"])


# -- exact round trips -------------------------------------------------------------------------


def _same(a, b) -> bool:
    """Equal, with the same types all the way down (datetime zones included)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(k1, k2) and _same(a[k1], b[k2]) for k1, k2 in zip(a, b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, datetime):
        return a == b and type(a.tzinfo) is type(b.tzinfo) and a.tzinfo == b.tzinfo and a.utcoffset() == b.utcoffset()
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@pytest.mark.parametrize("value", [
    None, True, 0, -(1 << 70), 1.5, 3.0, float("nan"), float("-inf"), "$t", [1, "a", None],
    (1, (2, 3)), {"a": (1,), "b": [datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=ZoneInfo("UTC"))]},
    {1: "int key", "x": 2}, {"$t": [1]}, {"$dt": "not a tag"}, date(2026, 1, 2), timedelta(seconds=1.5),
    datetime(2026, 1, 2, 3, 4, 5), datetime(2026, 1, 2, tzinfo=timezone(timedelta(hours=2))),
    datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Berlin")), datetime(2026, 1, 2, tzinfo=UTC),
])
def test_exact_json_round_trip(value):
    assert _same(decode(orjson.loads(orjson.dumps(encode(value)))), value)


_BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize("column", [
    [], ["a", None, True, ""], [1, None, -(1 << 63), (1 << 63) - 1], [1, 1 << 63, None], [-(1 << 64), 2],
    [1.5, float("nan"), 2], ["$t", {"$t": [1]}, (1,)],
    [datetime(2026, 1, 2, tzinfo=ZoneInfo("UTC")), datetime(2026, 1, 3, 4, 5, 6, 7, tzinfo=ZoneInfo("UTC"))],
    [datetime(2026, 3, 29, 2, 30, tzinfo=_BERLIN), datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=_BERLIN)],
    [datetime(2026, 1, 2, tzinfo=ZoneInfo("UTC")), datetime(2026, 1, 2, tzinfo=_BERLIN)],
    [datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 2)], [datetime(2026, 1, 2), None],
], ids=lambda c: ",".join(type(v).__name__ for v in c) or "empty")
def test_exact_json_values_round_trip_and_tag_only_what_needs_it(column):
    state = orjson.loads(orjson.dumps(encode_values(column)))
    assert _same(decode_values(state, len(column)), column)
    untagged = [i for i in range(len(column)) if i not in state[0]]
    assert all(_same(state[i + 1], column[i]) for i in untagged)  # read back without a walk
    assert all(i in untagged for i, v in enumerate(column)
               if type(v) in (str, bool, type(None)) or (type(v) is int and -(1 << 63) <= v < 1 << 63))


def test_exact_json_refuses_what_it_cannot_give_back():
    for value in (object(), {1, 2}, b"bytes", pl.Series([1])):
        with pytest.raises(TypeError):
            encode(value)


def test_finding_state_round_trip_on_real_findings():
    config = load_config(cwd=Path("/"))
    rules = load_rules(config)
    seen = 0
    for preset in ("deploy-overlap", "visibility-timeout", "lock-nonatomic", "double-publish", "db-update-fails"):
        loaded = load_correlated([str(FIXTURES / "synth" / preset / "logs")], config, use_cache=False)
        for finding in analyze_correlated(loaded, config, rules).findings:
            back = Finding.from_state(orjson.loads(orjson.dumps(finding.to_state())))
            assert back == finding and back.to_dict() == finding.to_dict()
            assert _same(vars(back)["figures"], finding.figures) and _same(back.first_ts, finding.first_ts)
            assert all(_same(a.ts, b.ts) for a, b in zip(back.evidence, finding.evidence))
            brief = Finding.from_state(orjson.loads(orjson.dumps(finding.to_state())), evidence=False)
            assert brief.evidence == [] and brief == dataclasses.replace(finding, evidence=[])
            seen += 1
    assert seen > 20


def test_finding_state_with_unusual_values():
    utc = ZoneInfo("UTC")
    finding = Finding(
        "DF999", "x.y", "title", "high", "identity", "summary", True, "unknown", "likely", None,
        {"job_id": ["j-1"]}, ["w-1"], [1, 2], ["d-1"], datetime(2026, 1, 1, tzinfo=utc), None,
        {"gap_s": 1.25, "nan": float("nan"), "pair": (1, 2), "at": datetime(2026, 1, 1, 0, 0, 1, tzinfo=utc), 7: "x"},
        [Evidence(datetime(2026, 1, 1, 0, 0, 0, 5, tzinfo=utc), "a.log", 3, None, "receive", "got", None, "note")],
        ["fix it"], 42,
    )
    back = Finding.from_state(orjson.loads(orjson.dumps(finding.to_state())))
    assert _same(back.figures, finding.figures) and back.action_id == 42
    assert _same(back.evidence[0].ts, finding.evidence[0].ts) and back.evidence[0].note == "note"


def test_cli_process_warm_equals_cold(cli, logs, tmp_path):
    """As a user runs it: a second process prints the same bytes (markdown's command line included)."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cli-cache")}
    for args in (["analyze", str(logs), "--format", "json"], ["analyze", str(logs), "--format", "markdown"],
                 ["timeline", str(logs), "--format", "json"], ["stats", str(logs), "--format", "json"]):
        cold = cli(*args, env=env)
        warm = cli(*args, env=env)
        assert cold.returncode == warm.returncode == 0
        assert warm.stdout == cold.stdout, args
    assert any((tmp_path / "cli-cache" / "sets").glob("*/analyses/*.json"))


def test_warm_rejects_and_strict_equal_cold(tmp_path, cache_dir, calls):
    dirty = FIXTURES / "formats" / "ndjson-dirty" / "logs"
    args = ["analyze", str(dirty), "--config", str(dirty.parent / "dupfind.toml"), "--format", "json"]
    cold = run(*args, "--rejects", str(tmp_path / "cold.ndjson"))
    calls.reset().forbid = True
    assert run(*args, "--rejects", str(tmp_path / "warm.ndjson")) == cold
    assert (tmp_path / "warm.ndjson").read_bytes() == (tmp_path / "cold.ndjson").read_bytes()
    assert (tmp_path / "cold.ndjson").read_bytes().count(b"\n") >= 6
    strict = CliRunner().invoke(app, [*args, "--strict"])
    assert strict.exit_code != 0 and "--strict" in str(strict.exception)


def test_relative_bounds_store_no_set(logs, cache_dir, calls):
    run("analyze", str(logs), "--format", "json", "--since", "-100000d")
    assert not (cache_dir / "sets").exists() or not _set_dirs(cache_dir)
    calls.reset()
    run("analyze", str(logs), "--format", "json", "--since", "-100000d")
    assert calls.ingest == 1  # the per-file cache still serves the files


def test_warm_trace_repeats_its_notes(cli, logs, tmp_path):
    """A trace written again from the cache says the same on stderr (ids not found, what was masked)."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cli-cache")}
    job = _finding(logs)["ids"]["job_id"][0]
    for fmt in ("json", "markdown"):
        args = ["trace", "--id", job, "--id", "no-such-id-anywhere", str(logs), "--format", fmt]
        cold, warm = cli(*args, env=env), cli(*args, env=env)
        uncached = cli(*args, "--no-cache", env=env)
        assert cold.returncode == warm.returncode == 0
        assert warm.stdout == cold.stdout == uncached.stdout
        assert warm.stderr == cold.stderr == uncached.stderr
        assert b"no record carries 'no-such-id-anywhere'" in warm.stderr


def test_analyses_and_outputs_of_a_set_are_bounded(logs, cache_dir, monkeypatch):
    monkeypatch.setattr(dupfind.result_cache, "KEEP_ANALYSES", 3)
    for skew in ("0.1", "0.2", "0.3"):
        run("analyze", str(logs), "--format", "json", "--skew", skew)
    [entry] = _set_dirs(cache_dir)
    assert len(list((entry / "analyses").iterdir())) == 3
    monkeypatch.setattr(dupfind.result_cache, "ANALYSES_MAX_BYTES", 1)
    out = run("analyze", str(logs), "--format", "json", "--skew", "0.4")
    assert len(list((entry / "analyses").iterdir())) == 1  # the newest alone, whatever its size
    assert run("analyze", str(logs), "--format", "json", "--skew", "0.4") == out


def test_a_large_output_is_stored_while_it_is_written_and_main_waits_for_it(logs, cache_dir, monkeypatch,
                                                                            no_prepared_views):
    """An output rendered whole (the Markdown ticket: what redaction masked is said after it) of
    BACKGROUND_BLOB_BYTES or more is stored on a thread of its own; the entry point returns only
    once it is stored, and the next run reads it back."""
    import sys
    import threading
    import time

    import dupfind.cli

    monkeypatch.setattr(dupfind.result_cache, "BACKGROUND_BLOB_BYTES", 1)
    started: list[threading.Thread] = []
    real_start = threading.Thread.start

    def start(thread):
        if thread.name == "dupfind-store-output":
            started.append(thread)
        return real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    real_stage = dupfind.result_cache.ResultCache._staged_blob

    def slow_stage(self, *args):
        time.sleep(0.3)  # still storing when the command is done writing, unless main waits
        return real_stage(self, *args)

    monkeypatch.setattr(dupfind.result_cache.ResultCache, "_staged_blob", slow_stage)
    monkeypatch.setattr(sys, "argv", ["dupfind", "analyze", str(logs), "--format", "markdown"])
    with pytest.raises(SystemExit) as exit_info:
        dupfind.cli.main()
    assert exit_info.value.code == 0
    assert len(started) == 1 and not started[0].is_alive()
    assert not dupfind.background._RUNNING
    [entry] = _set_dirs(cache_dir)
    assert len(list((entry / "analyses").glob("*.out"))) == 1
    cold = run("analyze", str(logs), "--format", "markdown", "--no-cache")
    calls = Calls(monkeypatch)
    calls.forbid = True
    assert _without_command_line(run("analyze", str(logs), "--format", "markdown")) == _without_command_line(cold)


def _without_command_line(ticket: bytes) -> bytes:
    return b"\n".join(line for line in ticket.split(b"\n") if b"dupfind analyze" not in line)


@pytest.mark.parametrize("fmt", ["json", "ndjson", "table"])
def test_an_output_without_notes_is_stored_as_it_is_written(logs, cache_dir, monkeypatch, fmt, no_prepared_views):
    """A report with nothing to say on stderr (no redaction) goes to the output a chunk at a time
    and into the cache as it goes (never held whole): the stored copy is the output, byte for
    byte, and the next run writes it without analysing anything."""
    cold = run("analyze", str(logs), "--format", fmt, "--no-cache")
    written: list[bytes] = []
    real_write = dupfind.result_cache.BlobStream.write

    def write(self, chunk):
        written.append(bytes(chunk))
        return real_write(self, chunk)

    monkeypatch.setattr(dupfind.result_cache.BlobStream, "write", write)
    first = run("analyze", str(logs), "--format", fmt)
    assert first == cold
    assert b"".join(written[1:]) == first  # after the note line ("null"): the output itself
    if fmt == "json":
        assert len(written) > 3  # the findings one at a time, not one document
    [entry] = _set_dirs(cache_dir)
    [stored] = (entry / "analyses").glob("*.out")
    assert stored.read_bytes().endswith(first)
    calls = Calls(monkeypatch)
    calls.forbid = True
    assert run("analyze", str(logs), "--format", fmt) == first


@pytest.mark.parametrize("later", [("stats", "--format", "json"), ("analyze", "--format", "json", "--disable", "DF101")],
                         ids=["stats", "other-rules"])
def test_a_later_json_report_writes_the_file_entries_an_earlier_one_rendered(logs, cache_dir, monkeypatch, later):
    """A JSON report's entries for the input files are rendered once for a set of inputs and kept
    with its entry: a later JSON report (another command, other rules) writes them as stored,
    the same bytes as rendering every file report again (over 20,000 files: decoding and
    rendering them took a first `stats --format json` 1.1 s)."""
    command, *options = later
    cold = run(command, str(logs), *options, "--no-cache")
    run("analyze", str(logs), "--format", "json")
    [entry] = _set_dirs(cache_dir)
    assert [p.stem for p in (entry / "analyses").glob("*.part")] == [dupfind.pipeline.rendered_key(entry.name, "files-json-2")]

    def rendered_again(report):
        raise AssertionError("a file entry rendered again")

    monkeypatch.setattr(dupfind.render.formats_report, "file_to_dict", rendered_again)
    assert run(command, str(logs), *options) == cold


@pytest.mark.parametrize("damage", [_truncate, _garbage])
def test_damaged_file_entries_are_rendered_again_and_never_trusted(logs, cache_dir, damage):
    cold = run("stats", str(logs), "--format", "json", "--no-cache")
    run("analyze", str(logs), "--format", "json")
    [entry] = _set_dirs(cache_dir)
    [part] = (entry / "analyses").glob("*.part")
    stored = part.read_bytes()
    damage(part)
    assert run("stats", str(logs), "--format", "json") == cold
    assert part.read_bytes() == stored  # rendered and stored again
    assert run("stats", str(logs), "--format", "json", "--redact") == run("stats", str(logs), "--format", "json", "--redact", "--no-cache")


def test_an_output_cut_short_is_not_stored(logs, cache_dir, monkeypatch):
    """A reader that goes away mid-report (a closed pipe) leaves no stored output and no staging
    file: the next run renders the whole report again."""
    run("analyze", str(logs), "--format", "json")  # the analysis stored; now only the output is missing
    [entry] = _set_dirs(cache_dir)
    for path in (entry / "analyses").glob("*.out"):
        path.unlink()
    import io

    class ClosingPipe(io.BytesIO):
        def write(self, data):
            if self.tell() > 100:
                raise BrokenPipeError
            return super().write(data)

    import dupfind.cli_common

    def to_pipe(writer, output):
        writer(ClosingPipe())

    monkeypatch.setattr(dupfind.cli_common, "write_output", to_pipe)
    with pytest.raises(BrokenPipeError):
        CliRunner().invoke(app, ["analyze", str(logs), "--format", "json"], catch_exceptions=False)
    dupfind.background.wait()
    assert not list((entry / "analyses").glob("*.out"))
    assert not [p for p in (cache_dir / "sets").iterdir() if p.name.startswith(".tmp-")]
    monkeypatch.undo()
    assert run("analyze", str(logs), "--format", "json") == run("analyze", str(logs), "--format", "json", "--no-cache")


def test_a_stored_output_whose_write_fails_is_dropped_and_the_output_stays_whole(logs, cache_dir, monkeypatch,
                                                                                 no_prepared_views):
    """A failed write of the stored copy (a full disk) costs the entry, not the report."""
    cold = run("analyze", str(logs), "--format", "json", "--no-cache")
    real_write = dupfind.result_cache.BlobStream.write
    calls = {"n": 0}

    def failing(self, chunk):
        calls["n"] += 1
        if calls["n"] == 3 and self._fh is not None:
            self._fh.close()
            self._fh = _Failing()  # the disk fills up: this write and the rest fail
        return real_write(self, chunk)

    class _Failing:
        def write(self, data):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    monkeypatch.setattr(dupfind.result_cache.BlobStream, "write", failing)
    assert run("analyze", str(logs), "--format", "json") == cold
    [entry] = _set_dirs(cache_dir)
    assert not list((entry / "analyses").glob("*.out"))
    assert not [p for p in (cache_dir / "sets").iterdir() if p.name.startswith(".tmp-")]


def test_a_first_run_writes_its_report_before_it_stores_the_analysis(logs, cache_dir, monkeypatch, capsysbinary):
    """main() defers storing the correlated set, each input file's entry (the pack: stored then,
    before the analysis lets go of the read's table), the analysis, the next commands' facts and
    the rendered report until the report is out (it shows that much sooner), in that order (the
    report's file entries, rendered before the report, with it); they are stored all the same
    before the process ends, and the next runs read them."""
    import sys

    import dupfind.cli
    import dupfind.cli_common

    events: list[str] = []
    real_write, real_store = dupfind.cli_common.write_output, dupfind.result_cache.ResultCache.store_analysis
    real_facts = dupfind.result_cache.ContextFacts.store_new
    real_set, real_place = dupfind.result_cache.ResultCache.store_set, dupfind.result_cache.ResultCache._place_blob

    def store_set(self, *args):
        events.append("set")
        return real_set(self, *args)

    def place_blob(self, *args):
        events.append("part stored" if args[-1] == dupfind.pipeline.RENDERED_SUFFIX else "output stored")
        return real_place(self, *args)

    def write_output(*args):
        events.append("output")
        return real_write(*args)

    def store_analysis(self, *args):
        events.append("analysis")
        return real_store(self, *args)

    def store_new(self, ctx):
        events.append("facts")
        return real_facts(self, ctx)

    real_file = dupfind.cache.TableCache.store

    def store_file(self, *args):
        if "files" not in events:
            events.append("files")
        return real_file(self, *args)

    monkeypatch.setattr(dupfind.cli_common, "write_output", write_output)
    monkeypatch.setattr(dupfind.result_cache.ResultCache, "store_analysis", store_analysis)
    monkeypatch.setattr(dupfind.result_cache.ContextFacts, "store_new", store_new)
    monkeypatch.setattr(dupfind.result_cache.ResultCache, "store_set", store_set)
    monkeypatch.setattr(dupfind.result_cache.ResultCache, "_place_blob", place_blob)
    monkeypatch.setattr(dupfind.cache.TableCache, "store", store_file)
    monkeypatch.setattr(sys, "argv", ["dupfind", "analyze", str(logs), "--format", "json"])
    with pytest.raises(SystemExit) as exit_info:
        dupfind.cli.main()
    assert exit_info.value.code == 0
    # Then the timeline's two default views and the trace of the worst finding's job id, drawn for
    # the next command once the report is out.
    assert events == ["output", "set", "files", "analysis", "part stored", "output stored", "facts", "output stored",
                      "output stored", "output stored"]
    assert not [p for p in (cache_dir / "sets").iterdir() if p.name.startswith(".tmp-")]  # the staged report was moved
    cold = capsysbinary.readouterr().out
    calls = Calls(monkeypatch)
    calls.forbid = True  # the analysis was stored: no ingestion, correlation or detector
    assert run("stats", str(logs), "--format", "json")
    assert run("analyze", str(logs), "--format", "json") == cold


def test_a_report_staged_by_a_stopped_command_is_removed(tmp_path):
    """Ctrl-C before the deferred writes: the report staged for its set is removed, not left to prune."""
    from dupfind.result_cache import ResultCache

    cache = ResultCache(tmp_path / "cache")
    dupfind.background.defer_until_output()
    try:
        cache.store_blob_soon("f" * 32, "e" * 32, b"{}\n", b"report")
        assert [p for p in cache.sets.iterdir() if p.name.startswith(".tmp-")]  # staged, not placed yet
        dupfind.background.stop()
    finally:
        dupfind.background.run_deferred()
        dupfind.background.wait()
    assert not list(cache.sets.iterdir())


def test_an_output_without_its_set_entry_leaves_no_staged_file_and_stale_ones_are_pruned(tmp_path):
    """A rendered report is staged in the sets folder, then moved beside its set entry; without
    the entry (never stored, or pruned meanwhile) the staged file is removed. A staging file a
    killed run left is pruned after an hour."""
    import time

    from dupfind.result_cache import ResultCache

    cache = ResultCache(tmp_path / "cache")
    cache.store_blob_soon("f" * 32, "e" * 32, b"{}\n", b"report")  # nothing defers: placed at once
    assert not [p for p in cache.sets.iterdir() if p.name.startswith(".tmp-")]
    left = cache.sets / ".tmp-left-by-a-killed-run"
    left.write_bytes(b"x")
    os.utime(left, (time.time() - 7200, time.time() - 7200))
    fresh = cache.sets / ".tmp-being-written"
    fresh.write_bytes(b"x")
    cache.prune()
    assert not left.exists() and fresh.exists()


def test_an_analysis_with_one_finding_it_cannot_give_back_is_not_stored(tmp_path):
    """Findings are encoded and checked one at a time (all at once held 0.2 GB at 5M lines): one
    whose value the cache cannot give back exactly, anywhere in the list, stores nothing."""
    cache = dupfind.result_cache.ResultCache(tmp_path)
    folder = tmp_path / "sets" / "s1" / "analyses"
    folder.mkdir(parents=True)
    ts = datetime(2026, 7, 21, 10, 0, tzinfo=UTC)
    good = [
        Finding(rule="DF101", name="duplicate.side-effect", title="t", severity="critical", identity=f"job_id=j{i}",
                summary="s", first_ts=ts, figures={"side_effects": 2},
                evidence=[Evidence(ts, "a.log", 3, "w1", "side_effect", "email_sent")])
        for i in range(3)
    ]
    bad = dataclasses.replace(good[1], identity="job_id=jx", figures={"shape": object()})
    assert not cache.store_analysis("s1", "k1", [good[0], bad, good[2]], {"verdict": "harmful"})
    assert list(folder.iterdir()) == []
    # Encoded, but read back unequal (NaN is not NaN): the lines already written go too.
    unequal = dataclasses.replace(good[2], identity="job_id=jn", figures={"ratio": float("nan")})
    assert not cache.store_analysis("s1", "k1", [*good, unequal], {"verdict": "harmful"})
    assert list(folder.iterdir()) == []
    assert cache.store_analysis("s1", "k2", good, {"verdict": "harmful"})
    assert sorted(p.name for p in folder.iterdir()) == ["k2.findings", "k2.json"]
    assert len((folder / "k2.findings").read_bytes().split(b"\n")) == 3
    loaded = cache.load_analysis("s1", "k2")
    assert loaded is not None and loaded["findings"]() == good


def test_the_set_keeps_the_protected_ids_as_value_body_writes_their_list(logs, cache_dir, monkeypatch):
    """The ids a redactor protects are stored with the set (written a slice of texts at a time,
    not as one list of Python strings): the same bytes value_body writes for their list, read
    back as protected_ids gives them."""
    tricky = pl.Series(["a\"b", "x\\y", "tab\there", "é ünï", "\x01ctl", "order-4111111111111111", "\u2028", "/s", None])
    monkeypatch.setattr(dupfind.result_cache, "TEXTS_SLICE", 3)
    body = dupfind.result_cache.ResultCache.texts_value_body("set", "key", tricky)
    assert body == dupfind.result_cache.ResultCache.value_body("set", "key", tricky.drop_nulls().to_list())
    empty = pl.Series([], dtype=pl.String)
    assert dupfind.result_cache.ResultCache.texts_value_body("s", "k", empty) == dupfind.result_cache.ResultCache.value_body("s", "k", [])

    config = load_config(cwd=Path("/"))
    loaded = load_correlated([str(logs)], config, use_cache=True)
    expected = dupfind.pipeline.protected_ids(loaded.correlation, config)
    assert len(expected) > 3  # several slices
    found, stored = loaded.cache.load_value(
        loaded.set_key, dupfind.result_cache.ResultCache.value_key(loaded.set_key, *dupfind.pipeline.redaction_ids_kind(config)))
    assert found and stored == expected


def run_deferring(*args: str) -> bytes:
    """run(), with the cache writes deferred until the output is out, as the command line does."""
    dupfind.background.defer_until_output()
    try:
        return run(*args)
    finally:
        dupfind.background.run_deferred()
        dupfind.background.wait()


def test_the_writes_after_the_report_rest_on_the_stored_set(logs, cache_dir, calls, monkeypatch):
    """With the cache writes deferred until the report is out (the command line), the set entry is
    stored first, then the files' pack, then the analysis moves onto that entry and lets go of the
    read's table: what the writes after that prepare from the entry (the stats, the ticket, the
    facts) gives every later command what a run without the cache gives, reading no log."""
    rested = []
    rest = dupfind.pipeline._rest_on_stored_set

    def resting(loaded, reports):
        read = loaded.result
        rest(loaded, reports)
        rested.append((read, loaded, reports))

    monkeypatch.setattr(dupfind.pipeline, "_rest_on_stored_set", resting)
    slept: list[float] = []  # the pause for jemalloc, only after a large table
    monkeypatch.setattr(dupfind.pipeline, "time", SimpleNamespace(sleep=slept.append))
    finding = _finding(logs)
    values = {"logs": str(logs), "job": finding["ids"]["job_id"][0], "fingerprint": finding["fingerprint"]}
    uncached = {name: run(*[a.format(**values) for a in argv], "--no-cache") for name, argv in COMMANDS.items()}
    assert run_deferring("analyze", str(logs), "--format", "json") == uncached["analyze-json"]
    ((read, loaded, reports),) = rested
    assert read.pack is not None and read.pack.table is None  # the pack stored, its rows let go of
    assert list((cache_dir / "packs").glob("*/table.arrow"))
    assert isinstance(loaded.correlation, CachedCorrelation) and isinstance(loaded.result, CachedIngest)
    assert all(isinstance(r.context.correlation, CachedCorrelation) and r.inputs is loaded.result for r in reports)
    entry = loaded.correlation._entry
    assert not entry._columns and not entry._parts and "table" not in entry._frames  # read for each use, not kept
    assert entry._texts is read.texts  # the dictionary in memory, not read back
    assert slept == []  # a small table: no pause
    monkeypatch.setattr(dupfind.pipeline, "PAUSE_AFTER_FREEING", 0)
    shutil.rmtree(cache_dir)
    run_deferring("analyze", str(logs), "--format", "json")
    assert slept == [dupfind.DIRTY_DECAY_MS / 1000 + 0.05]
    calls.reset().forbid = True
    for name, argv in COMMANDS.items():
        assert run(*[a.format(**values) for a in argv]) == uncached[name], name

"""Inputs larger than memory: analysed one window of time at a time, with the findings of one read."""

from __future__ import annotations

import io
import re
import shutil
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import orjson
import polars as pl
import pytest
from conftest import FIXTURES, run_cli
from rich.console import Console

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.errors import DupfindError
from dupfind.ingest import ingest
from dupfind.queue_stats import build_stats, stats_from
from dupfind.read_plan import parse_size, window_budget
from dupfind.render.timeline_text import render_timeline
from dupfind.rules_registry import load_rules
from dupfind.timeline import entries_on_one_line
from dupfind.windows import Window, plan_windows, run_windows
from dupfind.windows_views import merge_stats_facts, stats_collector

SCENARIOS = sorted(p.parent for p in FIXTURES.glob("*/*/logs") if p.is_dir())
T0 = datetime(2026, 7, 21, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "size"), [
    ("8G", 8 * 10**9), ("1.5GB", 1_500_000_000), ("512MiB", 512 * 2**20), ("2000000", 2_000_000), ("64k", 64_000),
    ("3 gib", 3 * 2**30),
])
def test_sizes_in_bytes_and_units(text: str, size: int) -> None:
    assert parse_size(text, "--memory-limit") == size


@pytest.mark.parametrize("text", ["", "lots", "0", "-1G", "5X", "1.2.3G"])
def test_a_size_that_is_not_one_is_a_clear_error(text: str) -> None:
    with pytest.raises(DupfindError, match="--memory-limit .* is not a size"):
        parse_size(text, "--memory-limit")


def _counts(records: list[int]) -> pl.DataFrame:
    return pl.DataFrame({
        "second": pl.Series([T0 + timedelta(seconds=i) for i in range(len(records))], dtype=pl.Datetime("us", "UTC")),
        "records": pl.Series(records, dtype=pl.UInt32),
    })


def _read_records(counts: pl.DataFrame, window: Window) -> int:
    held = counts
    if window.read_from is not None:
        held = held.filter(pl.col("second") >= window.read_from)
    if window.read_to is not None:
        held = held.filter(pl.col("second") <= window.read_to)
    return int(held["records"].sum())


def test_windows_cover_every_record_once_and_each_read_fits() -> None:
    counts = _counts([1 + (i * 7919) % 13 for i in range(10_000)])  # uneven: 1 to 13 records a second
    overlap = timedelta(seconds=60)
    plan = plan_windows(counts, 3000, overlap)
    assert len(plan) > 10
    assert plan[0].start is None and plan[0].read_from is None and plan[-1].end is None and plan[-1].read_to is None
    for before, after in pairwise(plan):
        assert before.end == after.start  # consecutive: every second is one window's own
        assert after.read_from == after.start - overlap and before.read_to == before.end + overlap
    for window in plan:
        assert window.records == _read_records(counts, window) <= 3000
    # the windows are as large as fit: one more second would not
    first_end = plan[0].end
    grown = Window(None, first_end + timedelta(seconds=1), None, first_end + timedelta(seconds=1) + overlap, 0)
    assert _read_records(counts, grown) > 3000


def test_windows_stay_within_since_and_until() -> None:
    counts = _counts([5] * 600)
    since, until = T0 - timedelta(hours=1), T0 + timedelta(hours=1)
    plan = plan_windows(counts, 1000, timedelta(seconds=30), since, until)
    assert len(plan) > 1 and plan[0].read_from == since and plan[-1].read_to == until
    close = T0 + timedelta(seconds=10), T0 + timedelta(seconds=590)  # bounds nearer than the overlap
    plan = plan_windows(counts.filter(pl.col("second").is_between(*close)), 200, timedelta(seconds=30), *close)
    assert len(plan) > 3 and all(close[0] <= w.read_from and w.read_to <= close[1] for w in plan)


def test_an_overlap_larger_than_fits_makes_windows_as_long_as_the_overlap() -> None:
    counts = _counts([10] * 1000)
    plan = plan_windows(counts, 50, timedelta(seconds=100))  # the overlap alone holds 2000 records
    assert all(w.records > 50 for w in plan)
    assert all(w.end - w.start >= timedelta(seconds=100) for w in plan[1:-1])
    assert len(plan) == 10


def test_no_record_is_one_window_of_everything() -> None:
    empty = _counts([]).clear()
    assert plan_windows(empty, 10, timedelta(hours=1)) == [Window(None, None, None, None, 0)]


def test_standard_input_and_inputs_that_fit_are_read_whole(tmp_path: Path) -> None:
    logs = FIXTURES / "synth" / "deploy-overlap" / "logs"
    assert window_budget([str(logs)], 10**12) is None
    assert window_budget([str(logs)], 10**6) == 10**6
    assert window_budget(["-"], 10**6) is None  # cannot be read twice (and stderr says so)
    assert window_budget([str(tmp_path / "missing")], 10**6) is None  # ingest says what is wrong


def test_inputs_are_read_whole_only_with_room_beside_the_estimate() -> None:
    from dupfind.memory_check import log_size, needed_bytes
    from dupfind.read_plan import WHOLE_READ_SHARE
    from dupfind.sources import expand_inputs

    logs = FIXTURES / "synth" / "deploy-overlap" / "logs"
    needed = needed_bytes(log_size(expand_inputs([str(logs)])))
    assert 0 < WHOLE_READ_SHARE < 1
    tight = int(needed / WHOLE_READ_SHARE) - 1000  # the estimate fits, but without its room
    assert tight > needed and window_budget([str(logs)], tight) == tight
    assert window_budget([str(logs)], int(needed / WHOLE_READ_SHARE) + 1000) is None


def _without_window_notes(document: dict) -> dict:
    document = dict(document)
    if "windows" in document["summary"]:
        document["summary"] = {k: v for k, v in document["summary"].items() if k != "windows"}
    document["warnings"] = [w for w in document["warnings"] if "of time to stay within" not in w]
    return document


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_three_windows_that_each_see_everything_report_what_one_read_reports(scenario: Path) -> None:
    """The merge alone: each window owns a third of the records; findings, counts, deploy summary,
    verdict and accounting equal those of one analysis of everything."""
    config = load_config(None, None, None)
    rules = load_rules(config, None, ())
    paths = [str(scenario / "logs")]
    whole = analyze(ingest(paths, config), config, rules)
    survey = ingest(paths, config, survey=True)
    seconds = survey.time_counts
    # The survey counts what it reads; an analysis counts once what an earlier file holds exactly, or a file again.
    assert int(seconds["records"].sum()) == whole.summary["records"] + sum(entry[2] for entry in whole.inputs.copies)
    cut = whole.context.table["ts"]
    first, second = cut[cut.len() // 3], cut[2 * cut.len() // 3]
    plan = [Window(None, first, None, None, 0), Window(first, second, None, None, 0), Window(second, None, None, None, 0)]
    merged, _, parts = run_windows(paths, config, rules, 0.5, {}, 25, survey, plan, 10**9, timedelta(hours=1),
                                   collect=stats_collector)
    assert merged.summary["windows"]["count"] == 3
    assert _without_window_notes(orjson.loads(orjson.dumps(merged.to_dict()))) == orjson.loads(orjson.dumps(whole.to_dict()))
    # and `stats` of the windows' merged counts is the stats of one read
    windowed_stats = orjson.loads(orjson.dumps(stats_from(merged, merge_stats_facts(parts)).to_dict()))
    assert _without_window_notes(windowed_stats) == orjson.loads(orjson.dumps(build_stats(whole).to_dict()))


@pytest.fixture(scope="module")
def long_scenario(tmp_path_factory) -> Path:
    """35 minutes of a deploy overlap: 2000 jobs, 21k lines."""
    out = tmp_path_factory.mktemp("long") / "scenario"
    done = run_cli("synth", "deploy-overlap", "--jobs", "2000", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out / "logs"


def test_analyze_over_the_memory_limit_reads_windows_and_finds_what_one_read_finds(long_scenario: Path) -> None:
    whole = run_cli("analyze", str(long_scenario), "--format", "json", "--no-cache")
    windowed = run_cli("analyze", str(long_scenario), "--format", "json", "--memory-limit", "253MB",
                       "--window-overlap", "5m")
    assert windowed.returncode == whole.returncode == 0, windowed.stderr
    one, many = orjson.loads(whole.stdout), orjson.loads(windowed.stdout)
    stderr = windowed.stderr.decode()
    assert f"analysing them in {many['summary']['windows']['count']} windows of time" in stderr
    assert many["summary"]["windows"]["count"] >= 5 and "window 3/" in stderr
    # each window read only part of the records, and the first window's read ends 5m after it
    bounds = many["summary"]["windows"]["bounds"]
    assert bounds[0][0] is None and bounds[-1][1] is None
    assert many["summary"]["records"] == one["summary"]["records"] == one["inputs"]["totals"]["records"]
    assert many["verdict"] == one["verdict"] == "harmful_duplicates"
    assert _without_window_notes(many) == one
    assert any("windows of time" in w and "5m" in w for w in many["warnings"])


def test_windowed_markdown_redacts_and_a_baseline_applies(long_scenario: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "before.json"
    whole = run_cli("analyze", str(long_scenario), "--format", "json", "--no-cache", "--output", str(baseline))
    assert whole.returncode == 0
    args = ["analyze", str(long_scenario), "--memory-limit", "253MB", "--window-overlap", "5m", "--no-cache"]
    markdown = run_cli(*args, "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    assert b"side effect" in markdown.stdout and b"dupfind: window 2/" in markdown.stderr
    # the ticket of one read, worst incident's trace included (read around that finding), but for
    # the command that made it and the warning that says how it was read
    one_read = run_cli("analyze", str(long_scenario), "--format", "markdown", "--no-cache")
    windowed_lines = [line for line in markdown.stdout.decode().splitlines() if not line.startswith("dupfind analyze")]
    one_lines = [line for line in one_read.stdout.decode().splitlines() if not line.startswith("dupfind analyze")]
    assert "## Worst incident" in one_lines
    at = windowed_lines.index("## Warnings")
    assert "of time to stay within" in windowed_lines[at + 2]
    assert windowed_lines[:at - 1] + windowed_lines[at + 3:] == one_lines
    known = run_cli(*args, "--format", "json", "--baseline", str(baseline))
    report = orjson.loads(known.stdout)
    assert report["findings"] == [] and report["baseline"]["left_out"] == len(orjson.loads(baseline.read_bytes())["findings"])
    assert report["verdict"] == "no_harmful_duplicates" and "already in the baseline" in report["verdict_reason"]
    assert report["summary"]["duplicated_actions"] == 0 and report["summary"]["records"] > 0


def test_a_memory_limit_that_is_not_a_size_is_one_clear_error(long_scenario: Path) -> None:
    done = run_cli("analyze", str(long_scenario), "--memory-limit", "plenty")
    assert done.returncode == 2
    assert done.stderr.decode().strip() == (
        "dupfind: error: --memory-limit 'plenty' is not a size: use bytes or a unit, e.g. 8G, 1.5GB, 512MiB."
    )


def test_the_survey_keeps_no_categorical_column() -> None:
    """polars keeps every text turned into a Categorical while any Categorical column lives: an
    empty one in the survey's result, held through the windows, kept every window's ids (the 5M
    export in 1 GB peaked at 1375 MiB instead of 953)."""
    config = load_config(None, None, None)
    survey = ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], config, survey=True)
    assert survey.table.height == 0 and "ts" in survey.table.columns
    assert pl.Categorical not in survey.table.dtypes
    whole = ingest([str(FIXTURES / "synth" / "deploy-overlap" / "logs")], config)
    assert pl.Categorical in whole.table.dtypes  # what a read keeps, for contrast
    assert int(survey.time_counts["records"].sum()) == whole.table.height
    assert [f.lines for f in survey.files] == [f.lines for f in whole.files]


def test_a_second_windowed_analysis_of_unchanged_inputs_comes_from_the_cache(long_scenario: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(long_scenario, logs)
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(logs), "--memory-limit", "253MB", "--window-overlap", "5m"]
    first = run_cli(*args, "--format", "json", env=env)
    second = run_cli(*args, "--format", "json", env=env)
    assert first.returncode == second.returncode == 0, second.stderr
    assert b"dupfind: window 1/" in first.stderr and b"window 1/" not in second.stderr
    assert b"from the cache" in second.stderr
    assert second.stdout == first.stdout
    # Markdown (redacted by default) from the stored analysis equals Markdown of a fresh one
    cached_md = run_cli(*args, "--format", "markdown", env=env)
    fresh_md = run_cli(*args, "--format", "markdown", env={"DUPFIND_CACHE_DIR": str(tmp_path / "empty-cache")})
    assert b"window 1/" in fresh_md.stderr
    assert b"from the cache" in cached_md.stderr and cached_md.stdout == fresh_md.stdout
    # the terminal report, its findings counted from the stored index, equals a fresh one's
    cached_table = run_cli(*args, env=env)
    fresh_table = run_cli(*args, "--no-cache")
    assert b"from the cache" in cached_table.stderr and b"window 1/" in fresh_table.stderr
    assert b"Worst incidents" in cached_table.stdout and cached_table.stdout == fresh_table.stdout
    # another overlap, or a changed file, is another analysis
    other = run_cli(*args[:-1], "6m", "--format", "json", env=env)
    assert b"window 1/" in other.stderr
    victim = next(p for p in sorted(logs.iterdir()) if p.is_file())
    victim.write_bytes(victim.read_bytes() + b"not json at all\n")
    changed = run_cli(*args, "--format", "json", env=env)
    assert b"window 1/" in changed.stderr
    assert orjson.loads(changed.stdout)["inputs"]["totals"]["rejected_total"] == \
        orjson.loads(first.stdout)["inputs"]["totals"]["rejected_total"] + 1


def test_a_damaged_windowed_entry_is_analysed_again(long_scenario: Path, tmp_path: Path) -> None:
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(long_scenario), "--memory-limit", "253MB", "--window-overlap", "5m", "--format", "json"]
    first = run_cli(*args, env=env)
    for stored in (tmp_path / "cache").rglob("*.findings"):
        stored.write_bytes(stored.read_bytes()[:-10])
    again = run_cli(*args, env=env)
    assert again.returncode == 0 and b"window 1/" in again.stderr and again.stdout == first.stdout


@pytest.fixture(scope="module")
def long_analysis(long_scenario: Path) -> dict:
    done = run_cli("analyze", str(long_scenario), "--format", "json", "--no-cache")
    return orjson.loads(done.stdout)


def test_a_trace_of_inputs_too_large_reads_only_around_the_id(long_scenario: Path, long_analysis: dict) -> None:
    harmful = [f for f in long_analysis["findings"] if f["harmful"]]
    finding = harmful[len(harmful) // 2]
    job = finding["ids"]["job_id"][0]
    whole = run_cli("trace", job, str(long_scenario), "--format", "json", "--no-cache")
    around = run_cli("trace", job, str(long_scenario), "--format", "json", "--no-cache", "--memory-limit", "253MB",
                     "--window-overlap", "5m")
    assert around.returncode == whole.returncode == 0, around.stderr
    assert around.stdout == whole.stdout
    said = around.stderr.decode()
    assert f"the records of {job} span" in said and "reading" in said
    # the read is the id's records with 5 minutes each side, not the 35 minutes of the inputs
    start, end = said.rsplit("reading ", 1)[1].rstrip(".\n").split(" to ")
    read = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    span = datetime.fromisoformat(finding["last_ts"]) - datetime.fromisoformat(finding["first_ts"])
    assert read <= span + timedelta(minutes=10, seconds=1) and read < timedelta(minutes=20)


def test_a_trace_of_a_finding_of_inputs_too_large_reads_around_its_span(
    long_scenario: Path, long_analysis: dict, tmp_path: Path,
) -> None:
    fingerprint = next(f["fingerprint"] for f in long_analysis["findings"] if f["harmful"])
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    whole = run_cli("trace", "--finding", fingerprint[:10], str(long_scenario), "--format", "json", "--no-cache")
    windowed = ["--memory-limit", "253MB", "--window-overlap", "5m"]
    analysed = run_cli("analyze", str(long_scenario), "--format", "json", *windowed, env=env)
    assert analysed.returncode == 0
    around = run_cli("trace", "--finding", fingerprint[:10], str(long_scenario), "--format", "json", *windowed, env=env)
    assert around.returncode == whole.returncode == 0, around.stderr
    assert around.stdout == whole.stdout
    said = around.stderr.decode()
    assert "from the cache" in said and "window 1/" not in said  # the stored windowed analysis named the span
    assert f"reading around finding {fingerprint}" in said


def test_a_trace_of_ids_after_analyze_in_windows_searches_the_records_it_kept_or_the_files_holding_their_text(
    long_scenario: Path, long_analysis: dict, tmp_path: Path,
) -> None:
    """With the analysis in windows stored, the ids are searched in the records it kept and the read
    around them takes its records from there. Without those (lost), every file's span is known:
    the survey reads only the files whose bytes hold an id queried, the read around only those
    with records then. Either way, the bytes a whole read prints."""
    finding = next(f for f in long_analysis["findings"] if f["harmful"])
    job, order = finding["ids"]["job_id"][0], finding["ids"]["order_id"][0]
    cache = tmp_path / "cache"
    env = {"DUPFIND_CACHE_DIR": str(cache)}
    windowed = ["--memory-limit", "253MB", "--window-overlap", "5m"]
    assert run_cli("analyze", str(long_scenario), "--format", "json", *windowed, env=env).returncode == 0
    queries = ([job], [f"order_id={order}"], ["--id", job, "--id", f"order_id={order}"])
    wholes = [run_cli("trace", *query, str(long_scenario), "--format", "json", "--no-cache") for query in queries]
    for query, whole in zip(queries, wholes):
        for _ in range(2):  # the second run's trace is the stored one
            around = run_cli("trace", *query, str(long_scenario), "--format", "json", *windowed, env=env)
            assert around.returncode == whole.returncode == 0, around.stderr
            assert around.stdout == whole.stdout
            said = around.stderr.decode()
            assert "were found in the records the analysis in windows of time kept" in said
            assert "time kept, not parsed from the files again" in said and "files with records" not in said
    missing = run_cli("trace", "no-such-id-anywhere", str(long_scenario), *windowed, env=env)
    assert missing.returncode == 2 and b"no record carries 'no-such-id-anywhere'" in missing.stderr
    (kept,) = cache.glob("sets/*/spill")
    shutil.rmtree(kept)
    for out in cache.glob("sets/*/analyses/*.out"):  # the traces made again ...
        out.unlink()
    for query, whole in zip(queries, wholes):  # ... without the records kept
        around = run_cli("trace", *query, str(long_scenario), "--format", "json", *windowed, env=env)
        assert around.returncode == 0, around.stderr
        assert around.stdout == whole.stdout and b"the analysis in windows of time kept" not in around.stderr
        surveyed, held = map(int, re.search(rb"is in (\d+) of the (\d+) files with records", around.stderr).groups())
        assert 0 < surveyed < held
    missing = run_cli("trace", "no-such-id-anywhere", str(long_scenario), *windowed, env=env)
    assert missing.returncode == 2 and b"no record carries 'no-such-id-anywhere'" in missing.stderr
    # A value a format may write escaped is looked for by parsing every file, as without the analysis.
    slashed = run_cli("trace", "a/b", str(long_scenario), *windowed, env=env)
    assert slashed.returncode == 2 and b"files with records" not in slashed.stderr


def test_reads_around_a_span_after_analyze_in_windows_take_the_records_it_kept(
    long_scenario: Path, long_analysis: dict, tmp_path: Path,
) -> None:
    """`trace --finding`, the Markdown ticket's worst incident and `timeline --deploy/--around`
    read their span from the records the stored analysis in windows kept: the bytes reading those
    of the files gives (--no-cache), the first time and from the cache."""
    fingerprint = next(f["fingerprint"] for f in long_analysis["findings"] if f["harmful"])
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    windowed = ["--memory-limit", "253MB", "--window-overlap", "5m"]
    kept_note = b"time kept, not parsed from the files again"
    ticket = run_cli("analyze", str(long_scenario), "--format", "markdown", *windowed, env=env)
    files_ticket = run_cli("analyze", str(long_scenario), "--format", "markdown", *windowed, "--no-cache")
    assert ticket.returncode == files_ticket.returncode == 0, ticket.stderr
    assert kept_note in ticket.stderr and kept_note not in files_ticket.stderr
    assert b"## Worst incident" in ticket.stdout
    def without_command(text: bytes) -> list[bytes]:
        return [line for line in text.split(b"\n") if not line.startswith(b"dupfind analyze")]

    assert without_command(ticket.stdout) == without_command(files_ticket.stdout)
    for command in (
        ["trace", "--finding", fingerprint[:10], "--format", "json"],
        ["timeline", "--deploy", "v4.26.0", "--format", "json"],
        ["timeline", "--around", "2026-07-21T10:16:00Z", "--window", "4m"],
    ):
        files = run_cli(*command, str(long_scenario), *windowed, "--no-cache")
        assert files.returncode == 0 and kept_note not in files.stderr, files.stderr
        for _ in range(2):
            kept = run_cli(*command, str(long_scenario), *windowed, env=env)
            assert kept.returncode == 0 and kept_note in kept.stderr, kept.stderr
            assert kept.stdout == files.stdout
        # --rejects is of every line: the files are read then
        rejected = run_cli(*command, str(long_scenario), *windowed, "--rejects", str(tmp_path / "rejects.ndjson"), env=env)
        assert rejected.returncode == 0 and kept_note not in rejected.stderr and rejected.stdout == files.stdout


@pytest.mark.parametrize(("query", "message"), [
    ("no-such-id-anywhere", "dupfind: error: no record carries 'no-such-id-anywhere' in any id column"),
])
def test_a_trace_of_inputs_too_large_fails_in_one_sentence(long_scenario: Path, query: str, message: str) -> None:
    done = run_cli("trace", query, str(long_scenario), "--no-cache", "--memory-limit", "253MB")
    assert done.returncode == 2
    said = done.stderr.decode().strip()
    assert said.startswith(message) and said.count("\n") == 0 and "Traceback" not in said


def test_an_id_whose_records_span_most_of_inputs_too_large_is_refused(long_scenario: Path, long_analysis: dict) -> None:
    """A user id of many orders spans most of the export: its read would be killed as a whole one."""
    users = [f["ids"].get("user_id", [None])[0] for f in long_analysis["findings"]]
    counts = {u: users.count(u) for u in users if u}
    query = max(counts, key=counts.get)
    done = run_cli("trace", f"user_id={query}", str(long_scenario), "--no-cache", "--memory-limit", "253MB",
                   "--window-overlap", "15m")
    assert done.returncode == 2, done.stdout
    said = done.stderr.decode()
    assert f"the records of user_id={query} span" in said and "narrow the read with --since/--until" in said


def _views(document: bytes) -> list[dict]:
    return orjson.loads(document)["windows"]


def _drawn(view: dict) -> dict:
    """Each worker's executions, end and stop in a timeline view (an execution's `id` numbers it
    within the records read)."""
    return {
        (g["generation"], w["worker"]): ([{k: v for k, v in e.items() if k != "id"} for e in w["executions"]],
                                         w["end"], w["end_kind"], w["stop"])
        for g in view["generations"] for w in g["workers"]
    }


@pytest.mark.parametrize("focus", [["--around", "2026-07-21T10:16:00Z", "--window", "4m"], ["--deploy", "v4.26.0"]])
def test_a_timeline_of_inputs_too_large_reads_around_its_view(long_scenario: Path, tmp_path: Path, focus: list) -> None:
    """The executions drawn and the view's own counts are those of a whole read; the counts
    outside the view are of the records read, as stderr says."""
    whole = run_cli("timeline", str(long_scenario), *focus, "--format", "json", "--no-cache")
    around = run_cli("timeline", str(long_scenario), *focus, "--format", "json", "--memory-limit", "253MB",
                     "--window-overlap", "5m", env={"DUPFIND_CACHE_DIR": str(tmp_path / "cache")})
    assert around.returncode == whole.returncode == 0, around.stderr
    said = around.stderr.decode()
    assert "too large to read whole: reading around" in said and "counts outside its window are of those records" in said
    (one,), (other,) = _views(whole.stdout), _views(around.stdout)
    assert one["start"] == other["start"] and one["end"] == other["end"]
    drawn = _drawn(one)
    assert sum(len(e[0]) for e in drawn.values()) > 20 and _drawn(other) == drawn
    for count in ("executions", "interrupted", "taken_after_stop", "duplicates_in_window"):
        assert one["summary"][count] == other["summary"][count]
    assert other["summary"]["duplicates_total"] <= one["summary"]["duplicates_total"]


def test_a_timeline_of_every_deploy_of_inputs_too_large_draws_them_from_one_read_a_window(long_scenario: Path) -> None:
    """The deploys come from the analysis in windows of time; their views are drawn from one read
    a window that owns some (not one read a deploy: a 5M-line export has 1,384 deploys). With an
    overlap longer than a generation's life (12m here, deploys 5 minutes apart), each view is the
    one a whole read draws."""
    whole = run_cli("timeline", str(long_scenario), "--format", "json", "--no-cache")
    parts = run_cli("timeline", str(long_scenario), "--format", "json", "--no-cache", "--memory-limit", "253MB",
                    "--window-overlap", "12m")
    assert parts.returncode == whole.returncode == 0, parts.stderr
    said = parts.stderr.decode()
    windows = int(re.search(r"analysing them in (\d+) windows", said).group(1))
    reads = re.findall(r"read (\d+)/(\d+), .* draws (\d+) deploys?;", said)
    assert 1 < len(reads) <= windows and sum(int(n) for *_, n in reads) == 6
    one, other = _views(whole.stdout), _views(parts.stdout)
    assert len(one) == 6 and [v["title"] for v in one] == [v["title"] for v in other]
    # Written a read at a time, the document is laid out as a whole one is (entries one line each).
    assert parts.stdout == orjson.dumps(entries_on_one_line(orjson.loads(parts.stdout)),
                                        option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    for view, drawn in zip(one, other):
        assert view["deploy"] == drawn["deploy"] and _drawn(view) == _drawn(drawn)
        assert view["summary"]["duplicates_in_window"] == drawn["summary"]["duplicates_in_window"]
    terminal = run_cli("timeline", str(long_scenario), "--no-cache", "--memory-limit", "253MB", "--window-overlap", "12m")
    assert terminal.returncode == 0 and terminal.stdout.count(b"dupfind timeline: deploy v4.") == 6
    # Its bars worked out for each read (cells) draw what the views' entries draw.
    console = Console(file=io.StringIO(), width=100, color_system=None, highlight=False, soft_wrap=False)
    render_timeline(orjson.loads(parts.stdout), console)
    assert terminal.stdout.decode() == console.file.getvalue()


def test_a_redacted_and_an_html_timeline_of_every_deploy_of_inputs_too_large(long_scenario: Path, tmp_path: Path) -> None:
    """Redacted, each read's views are those of a redacted whole read (entries redacted before they
    become JSON text), and --html draws every deploy."""
    page = tmp_path / "timeline.html"
    done = run_cli("timeline", str(long_scenario), "--format", "json", "--redact", "--html", str(page), "--no-cache",
                   "--memory-limit", "253MB", "--window-overlap", "12m")
    assert done.returncode == 0, done.stderr
    views = _views(done.stdout)
    assert len(views) == 6 and page.read_text().count('<section id="tl-') == 6
    whole = run_cli("timeline", str(long_scenario), "--format", "json", "--redact", "--no-cache")
    assert [_drawn(v) for v in views] == [_drawn(v) for v in _views(whole.stdout)]


def _island(page: Path) -> list[dict]:
    text = page.read_text()
    start = text.index('<script id="timeline-data" type="application/json">') + len('<script id="timeline-data" type="application/json">')
    return orjson.loads(text[start:text.index("</script>", start)])["windows"]


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_page_of_every_deploy_in_windows_embeds_what_a_whole_read_draws(long_scenario: Path, tmp_path: Path,
                                                                          fmt: str) -> None:
    """The page and the other output come from one pass over the reads; the page's data is the
    whole read's (its entries held as JSON text, as --format json holds them)."""
    whole = run_cli("timeline", str(long_scenario), "--html", str(tmp_path / "whole.html"), "--no-cache")
    parts = run_cli("timeline", str(long_scenario), "--format", fmt, "--html", str(tmp_path / "parts.html"),
                    "--no-cache", "--memory-limit", "253MB", "--window-overlap", "12m")
    assert whole.returncode == parts.returncode == 0, parts.stderr
    reads = re.findall(rb"read (\d+)/(\d+),", parts.stderr)
    assert reads and len(reads) == int(reads[0][1])  # each read once for both outputs
    one, other = _island(tmp_path / "whole.html"), _island(tmp_path / "parts.html")
    assert len(one) == 6 and [_drawn(v) for v in one] == [_drawn(v) for v in other]
    assert (tmp_path / "parts.html").read_text().count('<section id="tl-') == 6
    if fmt == "json":
        assert [_drawn(v) for v in _views(parts.stdout)] == [_drawn(v) for v in one]
    else:
        assert parts.stdout.count(b"dupfind timeline: deploy v4.") == 6


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_the_same_timeline_of_every_deploy_again_reads_nothing(long_scenario: Path, tmp_path: Path, fmt: str) -> None:
    """The views are stored beside the analysis in windows (which the reads do not push out of the
    cache): the same timeline again is those bytes, with no read."""
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    args = ("timeline", str(long_scenario), "--format", fmt, "--memory-limit", "253MB", "--window-overlap", "12m")
    first, again = run_cli(*args, env=env), run_cli(*args, env=env)
    assert first.returncode == again.returncode == 0, again.stderr
    assert b"read 1/" in first.stderr and b"read 1/" not in again.stderr
    assert b"analysis in windows of time of these unchanged inputs comes from the cache" in again.stderr
    assert again.stdout == first.stdout and first.stdout.count(b"v4.") >= 6
    other = run_cli(*args, "--window", "20m", env=env)  # another view width: drawn again
    assert other.returncode == 0 and b"read 1/" in other.stderr


def test_a_timeline_of_every_deploy_in_windows_writes_every_rejected_line_once(long_scenario: Path,
                                                                              tmp_path: Path) -> None:
    whole = run_cli("timeline", str(long_scenario), "--format", "json", "--no-cache", "--rejects", str(tmp_path / "a"))
    parts = run_cli("timeline", str(long_scenario), "--format", "json", "--no-cache", "--rejects", str(tmp_path / "b"),
                    "--memory-limit", "253MB", "--window-overlap", "12m")
    assert whole.returncode == parts.returncode == 0, parts.stderr
    rejected = (tmp_path / "a").read_bytes()
    assert rejected.count(b"\n") > 0 and (tmp_path / "b").read_bytes() == rejected
    strict = run_cli("timeline", str(long_scenario), "--no-cache", "--strict", "--memory-limit", "253MB")
    assert strict.returncode != 0 and b"read 1/" not in strict.stderr


def test_a_read_around_a_span_reads_only_the_files_with_records_in_it() -> None:
    from dupfind.ingest import FileReport
    from dupfind.windows_views import files_for_read

    def at(minute: int) -> datetime:
        return T0 + timedelta(minutes=minute)

    files = [FileReport("a.log", first_ts=at(0), last_ts=at(10)), FileReport("b.log", first_ts=at(20), last_ts=at(30)),
             FileReport("c.log", first_ts=at(5), last_ts=at(40)), FileReport("empty.log")]
    assert files_for_read(["logs"], files, at(12), at(18)) == ["c.log"]
    assert files_for_read(["logs"], files, "2026-07-21T10:10:00.000Z", at(20)) == ["a.log", "b.log", "c.log"]
    assert files_for_read(["logs"], files, None, at(4)) == ["a.log"]
    assert files_for_read(["logs"], files, at(41), None) == ["logs"]  # no file holds a record then: as given
    assert files_for_read(["logs"], [], at(0), at(1)) == ["logs"]  # spans unknown
    assert files_for_read(["-"], [FileReport("-", first_ts=at(0), last_ts=at(1))], at(5), at(6)) == ["-"]


def test_the_files_whose_bytes_hold_an_id(tmp_path: Path) -> None:
    from dupfind.ingest import FileReport
    from dupfind.windows_views import files_mentioning

    held = {"a.log": b'{"job_id": "job-1"}\n', "b.log": b'{"job_id": "job-2"}\n', "empty.log": b""}
    for name, text in held.items():
        (tmp_path / name).write_bytes(text)
    files = [FileReport(str(tmp_path / n), first_ts=T0, last_ts=T0) for n in ("a.log", "b.log")]
    files.append(FileReport(str(tmp_path / "empty.log")))  # no record: not looked at
    assert files_mentioning(files, ["job-2"]) == [str(tmp_path / "b.log")]
    assert files_mentioning(files, ["job-1", "job-2"]) == [str(tmp_path / n) for n in ("a.log", "b.log")]
    assert files_mentioning(files, ["job-3"]) == []
    assert files_mentioning(files, ["a/b"]) is None  # JSON may write it "a\\/b"
    assert files_mentioning([*files, FileReport("c.log.gz", compression="gzip", first_ts=T0, last_ts=T0)],
                            ["job-1"]) is None
    assert files_mentioning([FileReport(str(tmp_path / "gone.log"), first_ts=T0, last_ts=T0)], ["job-1"]) is None


def test_a_read_fits_by_the_share_of_records_its_time_holds(tmp_path: Path) -> None:
    from dupfind.ingest import FileReport
    from dupfind.memory_check import part_needed_bytes
    from dupfind.windows_views import read_fits

    log = tmp_path / "a.log"
    log.write_bytes(b"x" * 100_000_000)
    files = [FileReport(str(log), records=1000, first_ts=T0, last_ts=T0 + timedelta(hours=10))]
    fits = read_fits([str(log)], files, part_needed_bytes(50_000_000))  # half the file's bytes
    assert fits(T0, T0 + timedelta(hours=4)) and fits(None, T0 + timedelta(hours=5))
    assert not fits(T0 + timedelta(hours=2), None) and not fits(None, None)
    assert read_fits([str(log)], files, part_needed_bytes(0)) is None  # reading alone takes that: no read fits


def test_a_timeline_whose_temporary_file_cannot_be_written_fails_in_one_sentence(monkeypatch, tmp_path: Path) -> None:
    import errno
    import io

    from dupfind.commands import timeline

    class Full(io.BytesIO):
        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(timeline, "_scratch_file", lambda: (Full(), tmp_path))
    views = [({"schema": "s", "verdict": "v", "windows": [{"title": "a"}]}, None)]
    with pytest.raises(DupfindError, match=r"cannot write the timeline's views to a temporary file in .*: No space left"):
        timeline._json_of_views("v", iter(views))
    monkeypatch.undo()
    data, masked = timeline._json_of_views("v", iter([({"schema": "s", "verdict": "x", "windows": [{"title": "a"}]},
                                                        "masked 1")]))
    assert orjson.loads(data) == {"schema": "s", "verdict": "v", "windows": [{"title": "a"}]} and masked == "masked 1"


def test_the_timeline_reads_the_records_the_analysis_in_windows_kept(long_scenario: Path, tmp_path: Path) -> None:
    """With the cache on, the windowed analysis keeps its survey's spill beside it: the timeline's
    reads take their records from it (in the same run, or after `analyze`) and draw what reading
    the files draws; a damaged spill is given up for the files."""
    windowed = ["--memory-limit", "253MB", "--window-overlap", "12m"]
    args = ("timeline", str(long_scenario), "--format", "json", *windowed)
    files = run_cli(*args, "--no-cache")
    assert files.returncode == 0 and b"of the files" in files.stderr
    same_run = run_cli(*args, env={"DUPFIND_CACHE_DIR": str(tmp_path / "a")})
    assert same_run.returncode == 0 and b"of the records the analysis kept" in same_run.stderr
    assert same_run.stdout == files.stdout
    cache = tmp_path / "b"
    assert run_cli("analyze", str(long_scenario), "--format", "json", *windowed,
                   env={"DUPFIND_CACHE_DIR": str(cache)}).returncode == 0
    (kept,) = cache.glob("sets/*/spill")
    assert (kept / "batches.json").is_file() and not list(cache.glob(".spill-*"))
    after = run_cli(*args, env={"DUPFIND_CACHE_DIR": str(cache)})
    assert after.returncode == 0 and b"of the records the analysis kept" in after.stderr and after.stdout == files.stdout
    for out in cache.glob("sets/*/analyses/*.out"):  # the timeline drawn again ...
        out.unlink()
    next(kept.glob("*.parquet")).unlink()  # ... from a spill that lost a batch: the files instead
    damaged = run_cli(*args, env={"DUPFIND_CACHE_DIR": str(cache)})
    assert damaged.returncode == 0 and b"of the files" in damaged.stderr and damaged.stdout == files.stdout


def test_the_reads_of_every_deploy_follow_the_windows_and_reach_their_deploys_tails() -> None:
    from dupfind.commands.timeline import deploy_reads
    from dupfind.deploy_concentration import MAX_TAIL_S

    def row(name: str, start: str, end: str) -> dict:
        return {"deploy": name, "start": f"2026-07-21T{start}Z", "end": f"2026-07-21T{end}Z"}

    def text(ts: datetime) -> str:
        return ts.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    rows = [row("a", "10:00:00", "10:02:00"), row("b", "11:10:00", "11:12:00"), row("c", "11:55:00", "11:58:00"),
            row("d", "14:00:00", "14:01:00")]
    bounds = [[None, "2026-07-21T11:00:00.000Z"], ["2026-07-21T11:00:00.000Z", "2026-07-21T12:00:00.000Z"],
              ["2026-07-21T12:00:00.000Z", "2026-07-21T13:00:00.000Z"], ["2026-07-21T13:00:00.000Z", None]]
    tail, overlap = timedelta(seconds=MAX_TAIL_S), timedelta(minutes=30)
    at = datetime(2026, 7, 21, tzinfo=UTC)
    reads = deploy_reads(rows, ["a", "b", "c", "d"], bounds, 1800, None, None)
    assert [names for *_, names in reads] == [["a"], ["b", "c"], ["d"]]  # the third window owns none
    # A read spans its deploys' views (the last one's redelivery tail past its end) with the overlap.
    assert reads[0][:2] == (text(at + timedelta(hours=10) - overlap),
                            text(at + timedelta(hours=10, minutes=2) + tail + overlap))
    assert reads[1][:2] == (text(at + timedelta(hours=11, minutes=10) - overlap),
                            text(at + timedelta(hours=11, minutes=58) + tail + overlap))
    # --since/--until bound every read.
    since, until = at + timedelta(hours=10, minutes=45), at + timedelta(hours=12, minutes=5)
    clamped = deploy_reads(rows, ["b", "c"], bounds, 1800, since, until)
    assert clamped == [("2026-07-21T10:45:00.000Z", "2026-07-21T12:05:00.000Z", ["b", "c"])]
    assert [n for *_, n in deploy_reads(rows, ["a"], [], 1800, None, None)] == [["a"]]
    # Where a window's deploys together do not fit, they are drawn in as few reads as do.
    shorter = deploy_reads(rows, ["a", "b", "c", "d"], bounds, 1800, None, None,
                           fits=lambda a, b: b - a <= timedelta(hours=1, minutes=30))
    assert [names for *_, names in shorter] == [["a"], ["b"], ["c"], ["d"]]
    assert deploy_reads(rows, ["b", "c"], bounds, 1800, None, None, fits=lambda a, b: True)[0][2] == ["b", "c"]


def test_formats_of_inputs_too_large_reads_every_line_and_keeps_no_record(long_scenario: Path, tmp_path: Path) -> None:
    whole = run_cli("formats", str(long_scenario), "--format", "json", "--no-cache", "--rejects", str(tmp_path / "a"))
    surveyed = run_cli("formats", str(long_scenario), "--format", "json", "--no-cache", "--memory-limit", "253MB",
                       "--rejects", str(tmp_path / "b"))
    assert surveyed.returncode == whole.returncode == 0, surveyed.stderr
    assert b"no record is kept" in surveyed.stderr
    assert surveyed.stdout == whole.stdout and (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    assert orjson.loads(surveyed.stdout)["totals"]["rejected_total"] > 0
    strict = run_cli("formats", str(long_scenario), "--no-cache", "--memory-limit", "253MB", "--strict")
    assert strict.returncode == 2 and b"--strict is set" in strict.stderr


def test_stats_of_inputs_too_large_counts_each_window_own_and_equals_one_read(long_scenario: Path) -> None:
    whole = run_cli("stats", str(long_scenario), "--format", "json", "--no-cache")
    windowed = run_cli("stats", str(long_scenario), "--format", "json", "--no-cache", "--memory-limit", "253MB",
                       "--window-overlap", "5m")
    assert windowed.returncode == whole.returncode == 0, windowed.stderr
    assert b"window 3/" in windowed.stderr
    one, many = orjson.loads(whole.stdout), orjson.loads(windowed.stdout)
    assert sum(q["redelivered"] for q in one["queues"]) > 0 and one["timeouts"]
    assert many["warnings"][0].startswith("The inputs were analysed in") and many["warnings"][1:] == one["warnings"]
    assert {**many, "warnings": one["warnings"]} == one


def test_windows_read_their_records_back_from_the_spill_or_parse_again_without_one(
    long_scenario: Path, tmp_path: Path, monkeypatch,
) -> None:
    """The survey writes its normalised records to a spill in the cache directory that each window
    reads back; without room for one, each window parses its files again: the same report. The
    spill is removed when the analysis ends, and a killed run's spill by the next one."""
    from dupfind import windows

    cache = tmp_path / "cache"
    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(cache))
    cache.mkdir()
    orphan = cache / ".spill-999999999-x"  # no such process
    orphan.mkdir()
    config = load_config(None, None, None)
    rules = load_rules(config, None, ())
    args = ([str(long_scenario)], config, rules, 0.5, {}, 25, None, None, 253 * 10**6, timedelta(minutes=5))
    created: list = []
    real_create = windows.Spill.create

    def create(size: int):
        spill = real_create(size)
        created.append(spill)
        return spill

    monkeypatch.setattr(windows.Spill, "create", staticmethod(create))
    spilled, _, _ = windows.analyze_in_windows(*args)
    assert created[0] is not None and created[0].batches and not created[0].folder.exists()
    assert not orphan.exists() and not list(cache.glob(".spill-*"))
    monkeypatch.setattr(windows.Spill, "create", staticmethod(lambda size: None))
    parsed, _, _ = windows.analyze_in_windows(*args)
    assert orjson.dumps(spilled.to_dict()) == orjson.dumps(parsed.to_dict())
    assert spilled.summary["windows"]["count"] >= 5
    # a spill whose disk fills up mid-survey is given up: the windows parse their files
    monkeypatch.setattr(windows.Spill, "create", staticmethod(create))
    real_write = pl.DataFrame.write_parquet
    writes: list[int] = []

    def write_parquet(frame, path, **options):
        writes.append(1)
        if len(writes) == 1:  # this scenario is one batch
            raise OSError(28, "No space left on device")
        return real_write(frame, path, **options)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
    full, _, _ = windows.analyze_in_windows(*args)
    assert created[-1].failed and not created[-1].folder.exists() and writes == [1]
    assert orjson.dumps(full.to_dict()) == orjson.dumps(parsed.to_dict())
    # a spill that cannot be read back (removed meanwhile) is given up the same way
    monkeypatch.setattr(pl.DataFrame, "write_parquet", real_write)
    monkeypatch.setattr(pl, "scan_parquet", lambda path, **options: (_ for _ in ()).throw(OSError(2, "gone")))
    unreadable, _, _ = windows.analyze_in_windows(*args)
    assert created[-1].failed and orjson.dumps(unreadable.to_dict()) == orjson.dumps(parsed.to_dict())


def test_stats_of_inputs_too_large_comes_from_the_cache_after_analyze(long_scenario: Path, tmp_path: Path) -> None:
    env = {"DUPFIND_CACHE_DIR": str(tmp_path / "cache")}
    windowed = ["--memory-limit", "253MB", "--window-overlap", "5m"]
    alone = run_cli("stats", str(long_scenario), "--format", "json", *windowed,
                    env={"DUPFIND_CACHE_DIR": str(tmp_path / "other")})
    analysed = run_cli("analyze", str(long_scenario), "--format", "json", *windowed, env=env)
    assert analysed.returncode == alone.returncode == 0
    first = run_cli("stats", str(long_scenario), "--format", "json", *windowed, env=env)
    second = run_cli("stats", str(long_scenario), "--format", "json", *windowed, env=env)
    assert first.returncode == second.returncode == 0, second.stderr
    # analyze's windows counted what stats shows too: stats reads nothing, and shows what it would
    # have counted itself
    for done in (first, second):
        assert b"window 1/" not in done.stderr and b"from the cache" in done.stderr
    assert second.stdout == first.stdout == alone.stdout
    # analyze again takes the stored analysis whatever stats stored beside it
    again = run_cli("analyze", str(long_scenario), "--format", "json", *windowed, env=env)
    assert b"window 1/" not in again.stderr and again.stdout == analysed.stdout
    other_bucket = run_cli("stats", str(long_scenario), "--format", "json", "--bucket", "2m", *windowed, env=env)
    assert b"window 1/" in other_bucket.stderr and orjson.loads(other_bucket.stdout)["timeline"]["bucket_s"] == 120


def test_standard_input_with_a_memory_limit_is_read_whole_and_stderr_says_so() -> None:
    logs = (FIXTURES / "synth" / "deploy-overlap" / "logs" / "deploy.log").read_bytes()
    done = run_cli("analyze", "-", "--format", "json", "--no-cache", "--memory-limit", "1MB", stdin=logs)
    assert done.returncode == 0 and orjson.loads(done.stdout)["inputs"]["totals"]["lines"] == logs.count(b"\n")
    assert done.stderr.decode().strip() == (
        "dupfind: standard input cannot be read twice: these inputs are read whole, whatever --memory-limit says."
    )


@pytest.mark.parametrize("seed", range(20))
def test_the_reads_of_every_deploy_are_those_adding_deploys_one_by_one_would_make(seed: int) -> None:
    """deploy_reads finds each read's deploys by a binary search (a read of more deploys spans at
    least as much): the reads that adding them one at a time until one does not fit makes, with a
    few questions a read."""
    import random

    from dupfind.commands.timeline import deploy_reads
    from dupfind.timefmt import iso

    rng = random.Random(seed)
    t0 = datetime(2026, 7, 21, tzinfo=UTC)
    rows, at = [], t0
    for i in range(rng.randrange(1, 40)):
        at += timedelta(minutes=rng.randrange(0, 90))
        rows.append({"deploy": f"d{i}", "start": iso(at), "end": iso(at + timedelta(minutes=rng.randrange(1, 30)))})
    chosen = [r["deploy"] for r in rows if rng.random() < 0.8] or [rows[0]["deploy"]]
    cut = t0 + timedelta(hours=rng.randrange(1, 30))
    bounds = [[None, iso(cut)], [iso(cut), None]]
    limit = timedelta(minutes=rng.randrange(30, 600))
    asked: list[int] = []

    def fits(a, b) -> bool:
        asked.append(1)
        return b - a <= limit

    reads = deploy_reads(rows, chosen, bounds, 600, None, None, fits=fits)

    def fits_alone(group: list[str]) -> bool:  # the read of these deploys together (one read, no window)
        (start, end, _), = deploy_reads(rows, group, [], 600, None, None)
        return datetime.fromisoformat(end) - datetime.fromisoformat(start) <= limit

    # the reference: each window's deploys added one at a time, a read closed when the next one does not fit
    expected = []
    for *_, owned in deploy_reads(rows, chosen, bounds, 600, None, None):
        group: list[str] = []
        for name in owned:
            if group and not fits_alone([*group, name]):
                expected.append(group)
                group = []
            group.append(name)
        expected.append(group)
    assert [names for *_, names in reads] == expected
    assert len(asked) <= len(reads) * (len(chosen).bit_length() + 1)


def test_a_damaged_record_kept_by_analyze_in_windows_is_not_trusted(
    long_scenario: Path, long_analysis: dict, tmp_path: Path,
) -> None:
    """A batch of the kept records that cannot be read (cut short on disk) sends the reads back to
    the files: the bytes a whole read prints."""
    finding = next(f for f in long_analysis["findings"] if f["harmful"])
    cache = tmp_path / "cache"
    env = {"DUPFIND_CACHE_DIR": str(cache)}
    windowed = ["--memory-limit", "253MB", "--window-overlap", "5m"]
    assert run_cli("analyze", str(long_scenario), "--format", "json", *windowed, env=env).returncode == 0
    for batch in cache.glob("sets/*/spill/*.parquet"):
        batch.write_bytes(batch.read_bytes()[:100])
    for query in (["trace", finding["ids"]["job_id"][0]], ["trace", "--finding", finding["fingerprint"]]):
        whole = run_cli(*query, str(long_scenario), "--format", "json", "--no-cache")
        damaged = run_cli(*query, str(long_scenario), "--format", "json", *windowed, env=env)
        assert damaged.returncode == whole.returncode == 0, damaged.stderr
        assert damaged.stdout == whole.stdout
        assert b"not parsed from the files again" not in damaged.stderr


def test_records_read_back_from_the_spill_hold_their_labels_in_one_pool_of_two_byte_codes(
    long_scenario: Path, tmp_path: Path, monkeypatch,
) -> None:
    """A window's records read back from the spill assemble as a read of the files does: labels in
    one pool of the table's own with 2-byte codes, the same values as a read gives."""
    from dupfind import windows
    from dupfind.ingest import ingest
    from dupfind.schema import LABEL_COLUMNS

    monkeypatch.setenv("DUPFIND_CACHE_DIR", str(tmp_path / "cache"))
    config = load_config(None, None, None)
    read = ingest([str(long_scenario)], config)
    spill = windows.Spill.create(10**9)
    assert spill is not None
    try:
        # Written as the survey writes its batches (normalised, labels as text), in two batches.
        records = read.texts.decoded(read.table).with_columns(pl.col(LABEL_COLUMNS).cast(pl.String))
        half = records.height // 2
        spill.write(records.slice(0, half))
        spill.write(records.slice(half))
        back = spill.read(None, None, config)
    finally:
        spill.remove()
    assert back is not None and back.table.height == read.table.height
    labels = {back.table.schema[c] for c in LABEL_COLUMNS}
    assert len(labels) == 1
    (label,) = labels
    assert label.categories.physical() == pl.UInt16 and not label.categories.is_global()
    for column in ("kind", "worker_id", "source", "queue"):
        assert back.table[column].cast(pl.String).equals(read.table[column].cast(pl.String)), column

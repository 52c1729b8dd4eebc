"""Inputs larger than memory: read and analysed one window of time at a time, the findings merged."""

from __future__ import annotations

import bisect
import gc
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from dupfind.copies import copies_warning, merged_copies, without_copies
from dupfind.crashes import with_crashes
from dupfind.file_workers import naming_report, naming_reports, naming_state, with_file_workers
from dupfind.malloc_tuning import trim_heap
from dupfind.memory_check import PART_PEAK_FIXED_BYTES, PART_PEAK_PER_LOG_BYTE, log_size, needed_bytes
from dupfind.pipeline import ingest_with_progress
from dupfind.read_plan import PLANNED_SHARE, WHOLE_READ_SHARE, say
from dupfind.sources import expand_inputs
from dupfind.timefmt import iso

# What a command takes of each window besides its analysis: called with the window's report, the
# window, its own actions and the offsets that make its action and execution ids the merged run's.
Collector = Callable[["AnalysisReport", "Window", "pl.Series", int, int], Any]

if TYPE_CHECKING:
    from rich.console import Console

    from dupfind.analyze import AnalysisReport
    from dupfind.config import Config
    from dupfind.findings import Finding
    from dupfind.ingest import FileReport, IngestResult
    from dupfind.rules_registry import Rule

# Inputs read in windows are parsed in blocks this long (8 MB for one read): memory is short, and
# the blocks in flight are most of what reading holds. 1M lines with --memory-limit 400MB peaked
# at 423-447 MiB with 16 MB blocks, 325-342 MiB with 4 MB, for about 10 % more time.
WINDOW_BLOCK_BYTES = 4 << 20
# `stats` also gathers what it counts while a window's analysis is in memory (about a quarter more
# at its peak, measured at 5M lines with --memory-limit 1GB: 1131 MiB at 0.85).
STATS_PLANNED_SHARE = 0.7
# Disk a spill of the survey's records asks for, per byte of log text (LZ4 Parquet of the canonical
# columns: 0.09 at 5M lines), with room to spare.
SPILL_ROOM_PER_LOG_BYTE = 0.5
# Rows of a spilled batch's row groups. A batch holds records of whole files, which may span the
# whole export: sorted by time, a read of a time decodes only the row groups whose time reaches
# into it (at 5M lines, a 2-hour read 0.16 s against 2.3 s reading the batches whole as Arrow IPC).
SPILL_ROW_GROUP = 16_384
# Spilled batches read at once (in parallel) by a read of a time.
SPILL_READ_FILES = 8
# The survey counts records per second; a longer span is planned on coarser steps.
MAX_STEPS = 200_000


def spans_into(first: datetime, last: datetime, read_from: datetime | None, read_to: datetime | None) -> bool:
    """Whether records from `first` to `last` reach into a read of [read_from, read_to] (None: unbounded)."""
    return not ((read_from is not None and last < read_from) or (read_to is not None and first > read_to))


@dataclass(frozen=True)
class Window:
    """One read of the inputs: the records of [read_from, read_to]; the findings, actions and
    counts of [start, end) are this window's (None: unbounded)."""

    start: datetime | None
    end: datetime | None
    read_from: datetime | None
    read_to: datetime | None
    records: int  # records read, from the survey

    def holds(self, column: str) -> pl.Expr:
        expr = pl.col(column)
        held = pl.lit(True)
        if self.start is not None:
            held &= expr >= self.start
        if self.end is not None:
            held &= expr < self.end
        return held

    def owns(self, ts: datetime | None) -> bool:
        if ts is None:
            return True
        return (self.start is None or ts >= self.start) and (self.end is None or ts < self.end)

    def reads_file(self, report: FileReport) -> bool:
        if report.first_ts is None:
            return False  # no record to read
        return spans_into(report.first_ts, report.last_ts, self.read_from, self.read_to)

    def describe(self) -> str:
        return f"{iso(self.start) if self.start else 'the first record'} to {iso(self.end) if self.end else 'the last'}"


def plan_windows(
    time_counts: pl.DataFrame, max_records: int, overlap: timedelta,
    since: datetime | None = None, until: datetime | None = None,
) -> list[Window]:
    """Consecutive windows whose reads (each window plus `overlap` before and after) hold at
    most `max_records` records by the survey's counts (`second`, `records`); where even one step
    with the overlap holds more, windows as long as the overlap (each then over the budget). The
    first and last windows are open-ended (down to `since` and up to `until`), so every record is
    some window's."""
    if time_counts.height == 0:
        return [Window(None, None, since, until, 0)]
    steps = time_counts.select(pl.col("second").dt.epoch("us").alias("us"), "records").sort("us")
    span = steps["us"][-1] - steps["us"][0]
    if steps.height > MAX_STEPS:
        width = max(1_000_000, math.ceil(span / MAX_STEPS / 1_000_000) * 1_000_000)
        steps = (
            steps.group_by((pl.col("us") - steps["us"][0]) // width * width + steps["us"][0])
            .agg(pl.col("records").sum()).sort("us")
        )
    times: list[int] = steps["us"].to_list()
    cumulative = [0, *accumulate(steps["records"].to_list())]
    n = len(times)
    margin = int(overlap.total_seconds() * 1_000_000)

    def read(i: int, j: int) -> int:
        """Records a window of the steps from i to j reads: from step i's start less the margin to
        the next step's start (the window's end) plus the margin."""
        upper = n if j + 1 >= n else bisect.bisect_right(times, times[j + 1] + margin)
        return cumulative[upper] - cumulative[bisect.bisect_left(times, times[i] - margin)]

    def at(us: int) -> datetime:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)

    def within(ts: datetime) -> datetime:  # a read never reaches past --since/--until
        return min(max(ts, since or ts), until or ts)

    windows: list[Window] = []
    i = 0
    while i < n:
        # The last step j whose read from i fits (reads grow with j); at least step i itself.
        j = i + bisect.bisect_right(range(i, n), max_records, key=lambda k: read(i, k)) - 1
        if j <= i:
            # The overlap alone holds more than fits: windows at least as long as the overlap, or
            # each record would be read again for every step it lies within the overlap of.
            j = max(i, bisect.bisect_left(times, times[i] + margin) - 1)
        last = j == n - 1
        windows.append(Window(
            start=None if i == 0 else at(times[i]),
            end=None if last else at(times[j + 1]),
            read_from=since if i == 0 else within(at(times[i] - margin)),
            read_to=until if last else within(at(times[j + 1] + margin)),
            records=read(i, j),
        ))
        i = j + 1
    return windows


@dataclass
class WindowPart:
    """What one window's analysis contributes: its findings and the counts of what it owns."""

    findings: list[Finding]
    records: int
    actions: int
    executions: int
    workers: set
    deployments: set
    repeated: int
    side_effect_requests: int
    timeouts: dict[str, float]
    deploys: Any  # deploy_concentration.DeployFacts of what the window owns (and its records' span)
    warnings: list[str]
    protected: list[str] = field(default_factory=list)
    action_ids: int = 0  # how many action ids the window numbered (the next window's start)
    exec_ids: int = 0  # and execution ids
    copies: list = field(default_factory=list)  # its read's records counted once (dupfind.copies)


def owned_actions(report: AnalysisReport, window: Window) -> pl.Series:
    """The actions of a window's analysis whose first record is in the window."""
    table = report.context.columns("ts", "action_id")
    return (
        table.filter(pl.col("action_id").is_not_null() & pl.col("action_id").is_first_distinct())
        .filter(window.holds("ts"))["action_id"]
    )


def window_part(report: AnalysisReport, window: Window, owned: pl.Series, action_offset: int,
                protect: bool) -> WindowPart:
    """The part of a window's analysis that is the window's own: its findings whose first record
    is in it (their action ids moved past the earlier windows'), the actions whose first record is
    in it (`owned`) with their executions, and the records in it."""
    from dupfind.deploy_concentration import deploy_facts

    ctx = report.context
    held = ctx.columns("ts", "deployment_id").filter(window.holds("ts"))
    executions = ctx.executions.filter(pl.col("action_id").is_in(owned.implode()))
    facts = deploy_facts(ctx)
    facts.windows = [w for w in facts.windows if window.owns(w["start"])]
    facts.duplicates = _held(facts.duplicates, window)
    facts.redeliveries = _held(facts.redeliveries, window)
    facts.first = held["ts"].min() if held.height else None
    facts.last = held["ts"].max() if held.height else None
    findings = [f for f in report.findings if window.owns(f.first_ts)]
    for finding in findings:
        if finding.action_id is not None:
            finding.action_id += action_offset
    protected: list[str] = []
    if protect:
        from dupfind.pipeline import protected_ids

        protected = protected_ids(ctx, ctx.config)
    effects = ctx.side_effects
    copied = copies_warning(report.inputs.copies)
    return WindowPart(
        findings=findings,
        records=held.height,
        actions=owned.len() - ctx.told_again_among(owned),
        executions=executions.height,
        workers=set(executions["worker_id"].unique().to_list()),
        deployments=set(held["deployment_id"].unique().to_list()),
        repeated=executions.group_by("action_id").len().filter(pl.col("len") > 1).height,
        side_effect_requests=effects.filter(window.holds("ts")).height if effects.height else 0,
        timeouts=dict(ctx.known_timeouts),
        deploys=facts,
        # Its count of the records counted once is the window's: said once for all of them, merged.
        warnings=[w for w in report.warnings if w != copied],
        protected=protected,
        action_ids=int(ctx.actions["action_id"].max() or 0) + 1 if ctx.actions.height else 0,
        exec_ids=int(ctx.executions["exec_id"].max() or 0) + 1 if ctx.executions.height else 0,
        copies=report.inputs.copies,
    )


def _held(times: pl.Series, window: Window) -> pl.Series:
    return times.to_frame("ts").filter(window.holds("ts"))["ts"]


def merge_deploy_facts(parts: list[WindowPart]):
    """One DeployFacts of the windows' own: deploy windows and times concatenated, generations
    (which windows see in turn) merged by name."""
    from dupfind.deploy_concentration import DeployFacts

    generations: dict[tuple, dict[str, Any]] = {}
    for part in parts:
        for gen in part.deploys.generations:
            known = generations.get((gen["generation"], gen["service"]))
            if known is None:
                generations[(gen["generation"], gen["service"])] = {**gen, "workers": list(gen["workers"])}
                continue
            known["workers"] = sorted(set(known["workers"]) | set(gen["workers"]))
            for key, pick in (("first_start", min), ("deploy_start", min), ("last_end", max), ("deploy_finish", max)):
                values = [v for v in (known.get(key), gen.get(key)) if v is not None]
                known[key] = pick(values) if values else None
            if known["source"] == "deploy_record":
                known["source"] = gen["source"]
    far = datetime.max.replace(tzinfo=UTC)

    def began(gen: dict[str, Any]) -> tuple:
        starts = [t for t in (gen.get("deploy_start"), gen.get("first_start")) if t is not None]
        return (min(starts) if starts else far, gen["generation"], gen["service"] is not None, gen["service"] or "")

    def times(name: str) -> pl.Series:
        series = [getattr(p.deploys, name) for p in parts]
        return pl.concat(series).sort() if series else pl.Series("ts", [], dtype=pl.Datetime("us", "UTC"))

    firsts = [p.deploys.first for p in parts if p.deploys.first is not None]
    lasts = [p.deploys.last for p in parts if p.deploys.last is not None]
    return DeployFacts(
        windows=sorted((w for p in parts for w in p.deploys.windows), key=lambda w: w["start"]),
        generations=sorted(generations.values(), key=began),
        tail_s=max((p.deploys.tail_s for p in parts), default=0.0),
        duplicates=times("duplicates"),
        redeliveries=times("redeliveries"),
        first=min(firsts) if firsts else None,
        last=max(lasts) if lasts else None,
    )


def merged_report(
    survey: IngestResult, parts: list[WindowPart], rules: list[Rule], plan: list[Window], overlap: timedelta, budget: int,
) -> AnalysisReport:
    """One report of the windows: each finding once (by fingerprint, from the window its first
    record is in), the summary summed over what each window owns, the inputs' accounting from
    the survey (every line of every file)."""
    from dupfind.analyze import AnalysisReport, finding_order, summary_of, verdict_of
    from dupfind.deploy_concentration import summarise_deploys

    by_fingerprint: dict[str, Finding] = {}
    for part in parts:
        for finding in part.findings:
            by_fingerprint.setdefault(finding.fingerprint, finding)
    findings = sorted(by_fingerprint.values(), key=finding_order)
    timeouts: dict[str, float] = {}
    for part in parts:
        for queue, seconds in part.timeouts.items():
            timeouts[queue] = max(seconds, timeouts.get(queue, seconds))
    deploys = merge_deploy_facts(parts)
    summary = summary_of(
        findings,
        records=sum(p.records for p in parts),
        first_ts=deploys.first,
        last_ts=deploys.last,
        actions=sum(p.actions for p in parts),
        executions=sum(p.executions for p in parts),
        workers=len(set().union(*(p.workers for p in parts))),
        deployments=set().union(*(p.deployments for p in parts)),
        repeated=sum(p.repeated for p in parts),
        side_effect_requests=sum(p.side_effect_requests for p in parts),
        timeouts=timeouts,
        deploys=summarise_deploys(deploys),
    )
    summary["windows"] = {
        "count": len(plan),
        "overlap_s": overlap.total_seconds(),
        "memory_limit_bytes": budget,
        "bounds": [[iso(w.start), iso(w.end)] for w in plan],
    }
    verdict, reason = verdict_of(
        findings, summary["actions"], lambda: summary["side_effect_requests"] > 0,
        lambda: summary["actions_with_repeated_executions"], summary["executions"],
    )
    note = (
        f"The inputs were analysed in {_windows(plan)} of time to stay within {gigabytes(budget)} of memory, each read with "
        f"{duration_text(overlap)} of records before and after it: repeats of one action further apart than that are "
        "not linked, and an action longer than that may be counted in two windows (--window-overlap sets it)."
    )
    warnings = [note, *dict.fromkeys(w for p in parts for w in p.warnings)]
    copied = copies_warning(merged_copies([p.copies for p in parts]))
    if copied is not None:
        warnings.append(copied)
    return AnalysisReport(survey, findings, rules, verdict, reason, summary, warnings, None)


def _windows(plan: list[Window]) -> str:
    return f"{len(plan)} window{'s' if len(plan) != 1 else ''}"


def gigabytes(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e9:.2f} GB"


def duration_text(span: timedelta) -> str:
    seconds = span.total_seconds()
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def analyze_in_windows(
    paths: list[str], config: Config, rules: list[Rule], skew_s: float, timeouts: dict[str, float],
    max_jobs_per_value: int, since: datetime | None, until: datetime | None, budget: int, overlap: timedelta,
    stderr: Console | None = None, protect: bool = False, collect: Collector | None = None,
    share: float = PLANNED_SHARE, keep_spill: Callable[[Spill], None] | None = None,
) -> tuple[AnalysisReport, list[str], list[Any]]:
    """Analyse inputs too large to read whole: a survey (every line read and accounted for, the
    records counted per second, none kept), then one read and analysis per planned window, each
    reading only the files whose records reach into it; the report merged. With `protect`, also
    the ids a redactor must leave alone; what `collect` took of each window (see run_windows).
    The survey's spill is removed at the end, or handed to `keep_spill` when the run succeeded."""
    sources = expand_inputs(paths)
    size = log_size(sources)
    spill = Spill.create(size.bytes)
    done = False
    try:
        result = _survey_and_windows(paths, config, rules, skew_s, timeouts, max_jobs_per_value, since, until, budget,
                                     overlap, stderr, protect, collect, share, size, spill)
        done = True
        return result
    finally:
        if spill is not None:
            if done and keep_spill is not None and not spill.failed:
                keep_spill(spill)
            else:
                spill.remove()


def _survey_and_windows(paths, config, rules, skew_s, timeouts, max_jobs_per_value, since, until, budget, overlap,
                        stderr, protect, collect, share, size, spill):
    surveyed = survey_inputs(paths, config, since, until, stderr, spill)
    counts = surveyed.time_counts
    total = int(counts["records"].sum()) if counts is not None and counts.height else 0
    per_record = size.bytes / max(total, 1)
    max_records = max(1, int((share * budget - PART_PEAK_FIXED_BYTES) / (PART_PEAK_PER_LOG_BYTE * per_record)))
    plan = plan_windows(counts, max_records, overlap, since, until)
    say(
        f"these inputs need about {gigabytes(needed_bytes(size))} of memory to be read whole, more than "
        f"{WHOLE_READ_SHARE:.0%} of the {gigabytes(budget)} they may use: "
        f"analysing them in {_windows(plan)} of time, each read with {duration_text(overlap)} before and after."
    )
    if any(window.records > max_records for window in plan):
        say(f"some windows hold more records than fit in {gigabytes(budget)} with an overlap of {duration_text(overlap)}; "
             "a shorter --window-overlap makes them smaller.")
    return run_windows(paths, config, rules, skew_s, timeouts, max_jobs_per_value, surveyed, plan, budget, overlap,
                       stderr, protect, collect, spill)


def run_windows(
    paths: list[str], config: Config, rules: list[Rule], skew_s: float, timeouts: dict[str, float],
    max_jobs_per_value: int, survey: IngestResult, plan: list[Window], budget: int, overlap: timedelta,
    stderr: Console | None = None, protect: bool = False, collect: Collector | None = None,
    spill: Spill | None = None,
) -> tuple[AnalysisReport, list[str], list[Any]]:
    """Read and analyse each window of `plan` in turn (its records from `spill`, else by parsing
    the files the survey says reach into it), then merge: the report, with `protect` the ids a redactor leaves alone, and what
    `collect` took of each window (report, window, owned actions, action and execution offsets)."""
    from dupfind.analyze import analyze

    sources = expand_inputs(paths)
    parts: list[WindowPart] = []
    collected: list[Any] = []
    offset = exec_offset = 0
    for number, window in enumerate(plan, 1):
        files = [src.path for src, report in zip(sources, survey.files, strict=True) if window.reads_file(report)]
        if not files:
            continue
        source = "read back from the survey's spill" if spill is not None and not spill.failed \
            else f"from {len(files)} file(s)"
        say(f"window {number}/{len(plan)}: {window.describe()}, about {window.records:,} records {source}.")
        result = spill.read(window.read_from, window.read_to, config) if spill is not None else None
        if result is None:  # its workers named as a read of every file names them
            result = ingest_with_progress(files, config, window.read_from, window.read_to, stderr,
                                          block_bytes=WINDOW_BLOCK_BYTES, naming=naming_reports(survey.files))
        report = analyze(result, config, rules, skew_s, timeouts, max_jobs_per_value)
        owned = owned_actions(report, window)
        if collect is not None:  # before window_part moves the findings' action ids
            collected.append(collect(report, window, owned, offset, exec_offset))
        part = window_part(report, window, owned, offset, protect)
        offset += part.action_ids
        exec_offset += part.exec_ids
        parts.append(part)
        del report, result, part, owned
        release_memory()
    protected = sorted(set().union(*(p.protected for p in parts))) if protect else []
    return merged_report(survey, parts, rules, plan, overlap, budget), protected, collected


def survey_inputs(paths: list[str], config: Config, since, until, stderr: Console | None = None,
                  spill: Spill | None = None) -> IngestResult:
    """Every line of the inputs read and accounted for, the records counted per second, none kept
    (but written to `spill`). Inputs are surveyed when they are too large to read whole: in
    small blocks."""
    surveyed = ingest_with_progress(paths, config, since, until, stderr, survey=True,
                                    spill=spill.write if spill is not None else None, block_bytes=WINDOW_BLOCK_BYTES)
    if spill is not None:
        spill.naming = naming_reports(surveyed.files)
    return surveyed


SPILL_INDEX = "batches.json"


class Spill:
    """The survey's normalised batches on disk, so that each window reads its records back
    instead of parsing its files again; removed when the analysis is done, or kept beside the
    stored analysis for later reads of a time (keep, stored)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.batches: list[tuple[Path, datetime, datetime]] = []  # file, first and last record time
        self.failed = False  # a write failed (a full disk): the windows parse their files instead
        # The survey's reports that name workers (file_workers.naming_reports): a read of a time
        # names the workers of its records as a read of every file does.
        self.naming: list[FileReport] = []

    @classmethod
    def create(cls, size: int) -> Spill | None:
        """A spill in the cache directory (a temporary directory may be memory) when it has room
        for about `size` bytes of log text; None otherwise: the windows then parse their files."""
        from dupfind.cache import default_cache_dir

        try:
            root = default_cache_dir()
            root.mkdir(parents=True, exist_ok=True)
            cls._remove_orphans(root)
            if shutil.disk_usage(root).free < SPILL_ROOM_PER_LOG_BYTE * size:
                return None
            return cls(Path(tempfile.mkdtemp(prefix=f".spill-{os.getpid()}-", dir=root)))
        except OSError:
            return None

    @staticmethod
    def _remove_orphans(root: Path) -> None:
        """Spills of runs that were killed (their process is gone)."""
        for folder in root.glob(".spill-*-*"):
            pid = folder.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists() and Path("/proc/self").exists():
                shutil.rmtree(folder, ignore_errors=True)

    def write(self, batch: pl.DataFrame) -> None:
        if self.failed:
            return
        path = self.folder / f"{len(self.batches):06d}.parquet"
        try:
            batch.sort("ts").write_parquet(path, compression="lz4", row_group_size=SPILL_ROW_GROUP, statistics=True)
        except OSError:
            self.failed = True
            self.batches.clear()
            self.remove()
            return
        self.batches.append((path, batch["ts"].min(), batch["ts"].max()))

    def read(self, since: datetime | None, until: datetime | None, config: Config) -> IngestResult | None:
        """The canonical table of the spilled records within [since, until], as a read of them would
        give; None when the spill failed or cannot be read (the files are parsed instead)."""
        from dupfind.assembly import LabelPool, assemble, held_for_assembly, rows_within
        from dupfind.ingest import IngestResult, empty_rejects
        from dupfind.textcodes import coded_columns

        if self.failed:
            return None
        reached = self._reaching(since, until)
        tables = []
        labels = LabelPool()  # the batches' labels held in the table's pool, as a read holds them
        try:
            for at in range(0, len(reached), SPILL_READ_FILES):
                scans = [rows_within(pl.scan_parquet(path), since, until) for path in reached[at:at + SPILL_READ_FILES]]
                found = [batch for batch in pl.collect_all(scans) if batch.height]
                if found:  # held for assembly together: one cast of each column, not one a batch
                    batch = pl.concat(found, how="diagonal_relaxed")
                    tables.append(held_for_assembly(batch, coded_columns(config.business_keys), labels))
        except (OSError, pl.exceptions.PolarsError):
            self.failed = True
            return None
        table, texts = assemble(tables, config, labels)
        table, copies = without_copies(table)
        return IngestResult(with_crashes(with_file_workers(table, self.naming), texts), [], empty_rejects(), texts=texts,
                            copies=copies)

    def scan(self, condition: Callable[[list[str]], pl.Expr | None]) -> pl.DataFrame | None:
        """The time, source and line of the spilled records that meet `condition` (given the
        columns a batch has: the test, or None when none can), as a survey keeping those would
        give them; None when the spill failed or cannot be read. One parallel scan of each
        layout's batches."""
        groups = self._layouts()
        if groups is None:
            return None
        scans = []
        for columns, paths in groups.items():
            test = condition(list(columns))
            if test is not None:
                scans.append(pl.scan_parquet(paths).filter(test).select("ts", "source", "line"))
        try:
            found = pl.collect_all(scans) if scans else []
        except (OSError, pl.exceptions.PolarsError):
            self.failed = True
            return None
        return pl.concat(found, how="vertical_relaxed") if found else pl.DataFrame(
            schema={"ts": pl.Datetime("us", "UTC"), "source": pl.String, "line": pl.UInt32})

    def records_between(self, since: datetime | None, until: datetime | None) -> int | None:
        """How many spilled records are within [since, until] (None: unbounded); None when the
        spill cannot be read."""
        from dupfind.assembly import rows_within

        groups = self._layouts()
        if groups is None:
            return None
        reached = set(self._reaching(since, until))
        scans = [rows_within(pl.scan_parquet(held).select("ts"), since, until).select(pl.len())
                 for held in ([p for p in paths if p in reached] for paths in groups.values()) if held]
        try:
            return sum(frame.item() for frame in pl.collect_all(scans)) if scans else 0
        except (OSError, pl.exceptions.PolarsError):
            self.failed = True
            return None

    def _reaching(self, since: datetime | None, until: datetime | None) -> list[Path]:
        """The batches with records in [since, until] (None: unbounded), by their time spans."""
        return [path for path, first, last in self.batches if spans_into(first, last, since, until)]

    def _layouts(self) -> dict[tuple[str, ...], list[Path]] | None:
        """The batches grouped by their columns (a scan reads files of one layout), or None."""
        if self.failed:
            return None
        groups: dict[tuple[str, ...], list[Path]] = {}
        try:
            for path, _, _ in self.batches:
                groups.setdefault(tuple(pl.read_parquet_schema(path)), []).append(path)
        except (OSError, pl.exceptions.PolarsError):
            self.failed = True
            return None
        return groups

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def keep(self, folder: Path) -> None:
        """Move the spill to `folder` (beside a stored analysis), with the index of its batches, for
        later reads of a time (stored); removed when that fails."""
        index = {
            "batches": [{"name": path.name, "first": first.isoformat(), "last": last.isoformat()}
                        for path, first, last in self.batches],
            "naming": [naming_state(r) for r in self.naming],
        }
        try:
            (self.folder / SPILL_INDEX).write_bytes(orjson.dumps(index))
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(self.folder, folder)
        except OSError:
            self.remove()
            return
        self.folder = folder
        self.batches = [(folder / path.name, first, last) for path, first, last in self.batches]

    @classmethod
    def stored(cls, folder: Path) -> Spill | None:
        """A spill kept in `folder`, or None (none, or an index or batch missing)."""
        try:
            index = orjson.loads((folder / SPILL_INDEX).read_bytes())
            spill = cls(folder)
            spill.batches = [(folder / b["name"], datetime.fromisoformat(b["first"]), datetime.fromisoformat(b["last"]))
                             for b in index["batches"]]
            spill.naming = [naming_report(state) for state in index["naming"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return spill if all(path.is_file() for path, _, _ in spill.batches) else None


def release_memory() -> None:
    """Hand the memory of the window just analysed back before the next is read: Python's
    objects collected, and glibc's free heap pages returned (it keeps them otherwise, and
    windows would grow one after another)."""
    gc.collect()
    trim_heap()

"""`trace`: every record of the actions an id belongs to, in time order, with the story's turns."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from dupfind import schema, textcodes
from dupfind.analysis import AnalysisContext, id_value_hash
from dupfind.analyze import AnalysisReport
from dupfind.config import Config
from dupfind.effects import COUNTED
from dupfind.errors import DupfindError
from dupfind.findings import Finding
from dupfind.record_ids import GROUP_OPEN, SERVICE_OPEN, is_record
from dupfind.schema import as_strings
from dupfind.textcodes import Texts
from dupfind.timefmt import iso_us
from dupfind.trace_notes import annotate

# Fields shown beside each record when set, in this order (ids are added when they vary).
DETAIL_FIELDS = (
    "status", "result", "error", "stack_trace", "action", "provider", "lock_key", "lock_owner", "ttl_s", "exit_code",
    "duration_ms", "visibility_timeout_s", "message",
)
STOP_LOOKBACK = timedelta(minutes=10)


@dataclass
class ActionTrace:
    """One action's records in time order, with annotations and a summary of its runs."""

    action_id: int | None
    identity: str
    matched: list[str]
    ids: dict[str, list[str]]
    # The records shown, in time order: each a row of the canonical table (its texts decoded) with
    # its `rid`, `exec_label` and `attempt_shown` (plain data: a trace keeps in the result cache).
    records: list[dict[str, Any]]
    notes: dict[int, list[str]]
    executions: list[dict[str, Any]]
    side_effects: list[dict[str, Any]]
    detail_columns: list[str]
    total_records: int
    finding: Finding | None = None

    @property
    def first_ts(self) -> datetime | None:
        return min(r["ts"] for r in self.records) if self.records else None

    @property
    def last_ts(self) -> datetime | None:
        return max(r["ts"] for r in self.records) if self.records else None

    @property
    def files(self) -> list[str]:
        return sorted({r["source"] for r in self.records})

    def state(self) -> dict[str, Any]:
        """The trace as plain data (exact_json), but its finding."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "finding"}

    @classmethod
    def from_state(cls, state: dict[str, Any], finding: Finding | None = None) -> ActionTrace:
        return cls(**state, finding=finding)

    def details(self, row: dict[str, Any]) -> list[tuple[str, str]]:
        """The record's key fields worth showing: (column, value) pairs."""
        shown = []
        for column in self.detail_columns:
            value = row.get(column)
            if value is None or value == "" or (column == "message" and value == row.get("name")):
                continue
            shown.append((column, f"{value:g}" if isinstance(value, float) else str(value)))
        return shown

    def to_dict(self) -> dict[str, Any]:
        first = self.first_ts
        records = []
        for row in self.records:
            records.append({
                "ts": iso_us(row["ts"]),
                "delta_s": round((row["ts"] - first).total_seconds(), 6),
                "source": row["source"],
                "line": row["line"],
                "worker": row["worker_id"],
                "deployment": row["deployment_id"],
                "attempt": row["attempt_shown"],
                "execution": row["exec_label"],
                "kind": row["kind"],
                "name": row["name"],
                "fields": dict(self.details(row)),
                "notes": self.notes.get(row["rid"], []),
            })
        return {
            "identity": self.identity,
            "matched": self.matched,
            "ids": self.ids,
            "first_ts": iso_us(first),
            "last_ts": iso_us(self.last_ts),
            "duration_s": round((self.last_ts - first).total_seconds(), 6) if first else None,
            "files": self.files,
            "records_total": self.total_records,
            "records_shown": len(self.records),
            "executions": [{**e, "start": iso_us(e["start"]), "end": iso_us(e["end"])} for e in self.executions],
            "side_effects": self.side_effects,
            "finding": None if self.finding is None else {
                "fingerprint": self.finding.fingerprint, "rule": self.finding.rule, "name": self.finding.name,
                "severity": self.finding.severity, "summary": self.finding.summary, "cause": self.finding.cause,
            },
            "records": records,
        }


@dataclass
class TraceReport:
    """What `dupfind trace` shows: one trace per action found, and the ids that found nothing."""

    queries: list[str]
    traces: list[ActionTrace]
    not_found: list[str] = field(default_factory=list)
    omitted_actions: int = 0
    finding: str | None = None
    context: AnalysisContext | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "1.0",
            "queries": self.queries,
            "finding": self.finding,
            "not_found": self.not_found,
            "actions": len(self.traces) + self.omitted_actions,
            "omitted_actions": self.omitted_actions,
            "traces": [t.to_dict() for t in self.traces],
        }


def correlation_context(table: pl.DataFrame, config: Config, skew_s: float = 0.5,
                        timeouts: dict[str, float] | None = None, max_jobs_per_value: int = 25,
                        texts: Texts | None = None) -> AnalysisContext:
    """Correlate a canonical table as every command does (no rules run): enough to trace any id
    (`texts`: the dictionary of its coded columns)."""
    from dupfind.pipeline import correlate_inputs

    return AnalysisContext(correlate_inputs(table, config, max_jobs_per_value, texts), config, skew_s, timeouts or {})


def parse_query(query: str, columns: list[str]) -> tuple[str | None, str]:
    """`order_id=ord_1` searches one column; anything else is a value searched in every id column."""
    column, sep, value = query.partition("=")
    if sep and column.strip() in columns and value.strip():
        return column.strip(), value.strip()
    return None, query.strip()


def find_records(ctx: AnalysisContext, queries: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """Records carrying any queried id: (rid, action_id, query, match) rows, and the queries that found nothing."""
    columns = ctx.id_columns()
    # A Kafka record's coordinates find its message in every consumer group that read it too.
    parsed = [(query, *parse_query(query, columns)) for query in queries]
    parsed += [(query, column, held) for query, column, value in parsed if column in (None, "job_id") and is_record(value)
               for opening in (GROUP_OPEN, SERVICE_OPEN) for held in ctx.texts.starting_with(value + opening)]
    # Only the columns that may hold a queried value are read (ctx.id_values: a cached analysis
    # stores their values' hashes; every id column read cost a warm trace 0.22 s at 1M lines).
    hashes = id_value_hash(pl.Series([value for _, _, value in parsed], dtype=pl.String)).implode()
    holding = set(ctx.id_values.filter(pl.col("hashes").list.eval(pl.element().is_in(hashes)).list.any())["column"].to_list())
    searched = [c for c in columns if c in holding and any(column in (None, c) for _, column, _ in parsed)]
    table = ctx.columns("rid", "action_id", *searched)
    hits = []
    for query, column, value in parsed:
        code = ctx.texts.find([value])  # the value as the coded columns hold it (none: not there)
        for col in ([column] if column else columns):
            if col not in searched:
                continue
            if table.schema[col] == textcodes.CODE_TYPE:
                if not code:
                    continue
                test = pl.col(col) == code[0]
            else:
                test = pl.col(col) == value
            found = table.filter(test).select(
                "rid", "action_id", pl.lit(query).alias("query"), pl.lit(f"{col}={value}").alias("match")
            )
            if found.height:
                hits.append(found)
    frame = pl.concat(hits) if hits else pl.DataFrame(
        schema={"rid": pl.UInt32, "action_id": schema.ID_TYPE, "query": pl.String, "match": pl.String}
    )
    found_queries = set(frame["query"].to_list())
    return frame, [q for q in queries if q not in found_queries]


def _exec_labels(execs: pl.DataFrame) -> dict[int, str]:
    """`attempt N` when each run logged a distinct attempt number, otherwise `run K` in start order."""
    attempts = execs["attempt"].to_list()
    distinct = None not in attempts and len(set(attempts)) == len(attempts)
    return {
        e: (f"attempt {a}" if distinct else f"run {k}")
        for k, (e, a) in enumerate(zip(execs["exec_id"].to_list(), attempts), start=1)
    }


def _execution_summary(ctx: AnalysisContext, execs: pl.DataFrame, labels: dict[int, str]) -> list[dict[str, Any]]:
    ends = ctx.exec_killed.filter(pl.col("exec_id").is_in(list(labels)))
    killed = dict(ends.select("exec_id", "kill_kind").rows())
    effects = ctx.side_effects.filter(pl.col("exec_id").is_in(list(labels))) if ctx.side_effects.height else None
    summary = []
    for row in execs.iter_rows(named=True):
        if row["exec_id"] in killed:
            # A connection the broker saw end without a close, no kill logged.
            outcome = "connection lost" if killed[row["exec_id"]] == "connection_lost" else "worker killed"
        elif row["guarded"]:
            outcome = "stopped by a guard"
        elif row["failed"] and not row["completed"]:
            outcome = "failed"
        elif row["completed"]:
            outcome = "completed"
        else:
            outcome = "no ack"
        requests = 0 if effects is None else effects.filter(
            (pl.col("exec_id") == row["exec_id"]) & pl.col("outcome").is_in(COUNTED)
        ).height
        summary.append({
            "label": labels[row["exec_id"]], "worker": row["identity"], "deployment": row["deployment_id"],
            "attempt": row["attempt"], "start": row["start"], "end": row["end"], "outcome": outcome,
            "side_effect_requests": requests, "job_ids": row["job_ids"],
        })
    return summary


def _side_effect_summary(ctx: AnalysisContext, action_id: int | None) -> list[dict[str, Any]]:
    if action_id is None or ctx.effect_counts.height == 0:
        return []
    rows = ctx.effect_counts.filter(pl.col("action_id") == action_id)
    return [
        {"effect": r["effect"], "requests": r["requests"], "succeeded": r["success"], "uncertain": r["uncertain"],
         "replayed": r["replayed"], "rejected": r["rejected"], "duplicate": r["confidence"]}
        for r in rows.iter_rows(named=True)
    ]


def _related_rids(ctx: AnalysisContext, action_id: int, records: pl.DataFrame, execs: pl.DataFrame) -> list[int]:
    """Records outside the action that belong to its story: per-action ids without a link key,
    its workers' stop signals and kills while it ran, the lease expiries they logged while it ran
    (no job named), and deploys during it."""
    unlinked = ctx.unlinked_ids
    rids: list[int] = []
    for column in unlinked.columns[1:]:
        values = records[column].drop_nulls().unique()
        if values.len():
            wanted = ctx.texts.find(values.cast(pl.String).to_list()) if unlinked.schema[column] == textcodes.CODE_TYPE else values.to_list()
            rids += unlinked.filter(pl.col(column).is_in(wanted))["rid"].to_list()
    if execs.height:
        kills = ctx.exec_killed.filter(pl.col("exec_id").is_in(execs["exec_id"].implode()))
        rids += [int(r) for r in kills["kill_rid"].to_list()]
        windows = execs.select("worker_id", (pl.col("start") - STOP_LOOKBACK).alias("from"), pl.col("end").alias("to"))
        stops = ctx.worker_events.filter(pl.col("kind") == "stop_signal").join(windows, on="worker_id").filter(
            pl.col("ts").is_between(pl.col("from"), pl.col("to"))
        )
        rids += stops["rid"].unique().to_list()
        for worker, start, end in execs.select("worker_id", "start", "end").iter_rows():
            rids += ctx.worker_lease_expiry(worker, start, end, end)
    first, last = records["ts"].min(), records["ts"].max()
    rids += ctx.deploy_records.filter(pl.col("ts").is_between(first, last))["rid"].to_list()
    return rids


# What a trace uses of an analysis context, in the order it does (AnalysisContext.read_ahead).
TRACE_READS = ("executions", "unlinked_ids", "exec_killed", "worker_events", "deploy_records", "actions",
               "action_attributes", "timeout_statements", "pairs", "side_effects", "effect_counts")


def build_trace(ctx: AnalysisContext, action_id: int | None, matched: list[str] | None = None,
                extra_rids: list[int] | None = None, max_records: int = 1000) -> ActionTrace:
    """The trace of one action (or, with action_id None, of records no action holds)."""
    ctx.read_ahead(*TRACE_READS)
    own = ctx.records_of(action_id) if action_id is not None else ctx.texts.decoded(as_strings(ctx.rows([])))
    execs = (ctx.executions_of(action_id) if action_id is not None else ctx.executions.clear()).sort("start", "exec_id")
    rids = set(extra_rids or [])
    if own.height:
        rids |= set(_related_rids(ctx, action_id, own, execs))
    records = pl.concat([own, ctx.texts.decoded(as_strings(ctx.rows(sorted(rids)).filter(pl.col("action_id").is_null())))]) \
        if rids else own
    records = records.unique("rid").sort("ts", "source", "line")
    total = records.height
    if total > max_records:
        records = records.head(max_records)
    labels = _exec_labels(execs)
    exec_attempts = dict(zip(execs["exec_id"].to_list(), execs["attempt"].to_list()))
    records = records.with_columns(
        exec_label=pl.col("exec_id").replace_strict(labels, default=None, return_dtype=pl.String),
        attempt_shown=pl.coalesce(
            "attempt", pl.col("exec_id").replace_strict(exec_attempts, default=None, return_dtype=pl.Int32)
        ),
    )
    ids = ctx.action_ids(action_id) if action_id is not None else {}
    varying = [c for c in ctx.id_columns() if records[c].drop_nulls().n_unique() > 1]
    detail_columns = [*varying, *(c for c in DETAIL_FIELDS if c in records.columns)]
    if "provider_message_id" in records.columns and "provider_message_id" not in varying:
        detail_columns.insert(len(varying), "provider_message_id")
    return ActionTrace(
        action_id=action_id,
        identity=ctx.action_identity(action_id) if action_id is not None else "records outside any action",
        matched=matched or [],
        ids={k: v for k, v in ids.items() if v},
        records=records.rows(named=True),
        notes=annotate(ctx, action_id, records, execs, labels) if action_id is not None else {},
        executions=_execution_summary(ctx, execs, labels),
        side_effects=_side_effect_summary(ctx, action_id),
        detail_columns=detail_columns,
        total_records=total,
    )


def trace_ids(ctx: AnalysisContext, queries: list[str], max_actions: int = 20, max_records: int = 1000) -> TraceReport:
    """Traces of every action any of the ids belongs to (records without an action traced together)."""
    ctx.read_ahead("id_values", *TRACE_READS)
    hits, not_found = find_records(ctx, queries)
    if hits.height == 0:
        listed = ", ".join(repr(q) for q in queries)
        raise DupfindError(
            f"no record carries {listed} in any id column ({', '.join(ctx.id_columns())}); "
            "check the value, or map the field that holds it with [aliases] in dupfind.toml."
        )
    linked = hits.filter(pl.col("action_id").is_not_null())
    per_action = linked.group_by("action_id").agg(pl.col("match").unique().sort(), pl.col("rid").min().alias("first"))
    per_action = per_action.join(
        ctx.columns("rid", "ts"), left_on="first", right_on="rid"
    ).sort("ts", "action_id")
    traces = [
        build_trace(ctx, row["action_id"], row["match"], max_records=max_records)
        for row in per_action.head(max_actions).iter_rows(named=True)
    ]
    loose = hits.filter(pl.col("action_id").is_null())
    covered = {r["rid"] for t in traces for r in t.records}
    loose = loose.filter(~pl.col("rid").is_in(list(covered)))
    if loose.height:
        matched = sorted(set(loose["match"].to_list()))
        traces.append(build_trace(ctx, None, matched, loose["rid"].to_list(), max_records))
    return TraceReport(queries, traces, not_found, max(0, per_action.height - max_actions), context=ctx)


def finding_to_trace(report: AnalysisReport, fingerprint: str) -> Finding:
    """The one finding of `report` whose fingerprint starts with `fingerprint`, about one action;
    of a cached report, only the findings of that prefix are decoded."""
    wanted = fingerprint.strip().lower()
    if len(wanted) < 6:
        raise DupfindError(f"--finding {fingerprint!r} is too short: give at least 6 characters of the fingerprint.")
    matches = report.findings_where(lambda _, fp: fp.startswith(wanted))
    if not matches:
        raise DupfindError(
            f"no finding has the fingerprint {fingerprint!r} in these logs ({report.finding_count} finding(s)); "
            "run `dupfind analyze` with the same inputs and options to list them."
        )
    if len({f.fingerprint for f in matches}) > 1:
        raise DupfindError(f"--finding {fingerprint!r} matches {len(matches)} findings: give more characters.")
    finding = matches[0]
    if finding.action_id is None:
        raise DupfindError(
            f"finding {finding.fingerprint} ({finding.rule}) is not about one action, so it has no trace."
        )
    return finding


def finding_trace(ctx: AnalysisContext, report: AnalysisReport, finding: Finding, max_records: int = 1000) -> ActionTrace:
    """The trace of the action behind `finding` (of `report`, whose context is `ctx`), as its cached
    analysis keeps it (TRACE_VALUE: the Markdown ticket `analyze` draws traces the worst finding),
    else built now and kept for the next trace."""
    from dupfind.pipeline import TRACE_VALUE, cached_value

    def build() -> dict[str, Any]:
        return build_trace(ctx, finding.action_id, [f"finding {finding.fingerprint}"], max_records=max_records).state()

    params = {"finding": finding.fingerprint, "max_records": max_records}
    return ActionTrace.from_state(cached_value(report, TRACE_VALUE, params, build), finding)


def trace_finding(ctx: AnalysisContext, report: AnalysisReport, fingerprint: str,
                  max_records: int = 1000) -> TraceReport:
    """The trace of the action behind one finding of `report`, chosen by its fingerprint (or a
    unique prefix of it); of a cached report, only the findings of that prefix are decoded."""
    finding = finding_to_trace(report, fingerprint)
    trace = finding_trace(ctx, report, finding, max_records)
    return TraceReport([], [trace], finding=finding.fingerprint, context=ctx)

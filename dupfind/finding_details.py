"""Per-finding details (ids, workers, attempts, time span, evidence) filled for all findings at once.

Detectors create thousands of findings on a large incident; asking polars for each finding's
details one by one costs more than the detection itself. Detectors register what each finding
needs (DetailRequest) and `fill_details` answers every request in a few vectorised passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from dupfind import schema
from dupfind.findings import Evidence, Finding
from dupfind.schema import ID_COLUMNS

if TYPE_CHECKING:
    from dupfind.analysis import AnalysisContext

EXECUTION_ID_KEYS = ("job_id", "event_id", "idempotency_key")  # the JSON contract always carries these
EVIDENCE_COLUMNS = ("ts", "source", "line", "worker_id", "kind", "name", "attempt")
EVIDENCE_LIMIT = 14
EVIDENCE_TEXT_CHARS = 120  # of a nameless record's message, its first line, shown as its name


@dataclass
class DetailRequest:
    """What one finding needs filled: from its action, its executions and/or its evidence records."""

    finding: Finding
    action_id: int | None = None  # ids and time span from every record of the action
    exec_ids: list[int] = field(default_factory=list)  # workers, attempts, deployments from these executions
    worker: str | None = None  # a finding about one worker: its generation, its jobs' ids, its executions' span
    rids: list[int] = field(default_factory=list)  # evidence: these records
    notes: dict[int, str] = field(default_factory=dict)
    evidence_execs: list[int] = field(default_factory=list)  # evidence: plus these executions' records ...
    evidence_kinds: tuple[str, ...] = ()  # ... of these kinds
    limit: int = EVIDENCE_LIMIT
    wants_evidence: bool = False


def _frame(pairs: list[tuple[int, int]], names: tuple[str, str]) -> pl.DataFrame:
    a, b = zip(*pairs) if pairs else ((), ())
    types = [schema.ID_TYPE if name in ("action_id", "exec_id") else pl.Int64 for name in names]
    return pl.DataFrame({names[0]: list(a), names[1]: list(b)}, schema=dict(zip(names, types)))


def ids_and_spans(ctx: AnalysisContext, action_ids: set[int],
                  records: pl.DataFrame | None = None) -> dict[int, tuple[dict, object, object]]:
    """Per action: its ids (link keys and entity ids on its records) and first/last record time.
    `records`, when given, are every record of these actions (no column of the table is read)."""
    if not action_ids:
        return {}
    columns = ctx.present_columns(*ID_COLUMNS, *ctx.config.business_keys)
    if records is None:
        records = ctx.columns(*dict.fromkeys(("action_id", "ts", *columns)))
    records = records.filter(pl.col("action_id").is_in(list(action_ids)))
    rows = records.group_by("action_id").agg(
        *[pl.col(c).drop_nulls().unique().sort().alias(f"id:{c}") for c in columns],
        pl.col("ts").min().alias("first_ts"), pl.col("ts").max().alias("last_ts"),
    )
    rows = ctx.texts.decoded_lists(rows, *(f"id:{c}" for c in columns))
    facts = {}
    for row in rows.iter_rows():
        ids = {c: list(v) for c, v in zip(columns, row[1:1 + len(columns)]) if v or c in EXECUTION_ID_KEYS}
        facts[row[0]] = (ids, row[-2], row[-1])
    return facts


def _execution_facts(ctx: AnalysisContext, requests: list[DetailRequest]) -> dict[int, dict]:
    """Per request: workers and deployments (in start order), attempts and span of its executions."""
    pairs = [(i, e) for i, r in enumerate(requests) for e in dict.fromkeys(r.exec_ids) if e is not None]
    wanted = _frame(pairs, ("req", "exec_id"))
    execs = ctx.executions.with_row_index("_order").select(
        "_order", "exec_id", "identity", "deployment_id", "attempt", "start", "end"
    )
    rows = wanted.join(execs, on="exec_id").sort("req", "start", "_order").group_by("req", maintain_order=True).agg(
        pl.col("identity").unique(maintain_order=True),
        pl.col("deployment_id").drop_nulls().unique(maintain_order=True),
        pl.col("attempt").drop_nulls().unique().sort(),
        pl.col("start").min(), pl.col("end").max(),
    )
    return {
        req: {"workers": list(workers), "deployments": list(deployments), "attempts": list(attempts),
              "start": start, "end": end}
        for req, workers, deployments, attempts, start, end in rows.iter_rows()
    }


def execution_ids_of(ctx: AnalysisContext, groups: dict[int, list[int]]) -> dict[int, dict[str, list[str]]]:
    """Per group of executions: the job, event and idempotency ids their records carry."""
    pairs = [(g, e) for g, exec_ids in groups.items() for e in set(exec_ids) if e is not None]
    wanted = _frame(pairs, ("group", "exec_id"))
    # Only the records of the executions asked about are collected (not every action's record).
    records = ctx.action_records("exec_id", *EXECUTION_ID_KEYS).select("exec_id", *EXECUTION_ID_KEYS).filter(
        pl.col("exec_id").is_in(wanted["exec_id"].unique().implode())
    ).collect()
    rows = wanted.join(records, on="exec_id").group_by("group").agg(
        *[pl.col(k).drop_nulls().unique().sort() for k in EXECUTION_ID_KEYS]
    )
    rows = ctx.texts.decoded_lists(rows, *EXECUTION_ID_KEYS)
    found = {row[0]: {k: list(v) for k, v in zip(EXECUTION_ID_KEYS, row[1:])} for row in rows.iter_rows()}
    return {g: found.get(g) or {k: [] for k in EXECUTION_ID_KEYS} for g in groups}


def _evidence(ctx: AnalysisContext, requests: list[DetailRequest]) -> dict[int, list[Evidence]]:
    """Per request: its evidence records in time order, at most `limit`, with their notes."""
    explicit = _frame([(i, int(rid)) for i, r in enumerate(requests) if r.wants_evidence for rid in r.rids
                       if rid is not None], ("req", "rid"))
    kinds_ids: dict[tuple[str, ...], int] = {}
    by_execs = []
    for i, r in enumerate(requests):
        if r.wants_evidence and r.evidence_execs:
            k = kinds_ids.setdefault(tuple(r.evidence_kinds), len(kinds_ids))
            by_execs.extend((i, int(e), k) for e in dict.fromkeys(r.evidence_execs) if e is not None)
    parts = [explicit]
    if by_execs:
        req, exe, kid = zip(*by_execs)
        wanted = pl.DataFrame({"req": req, "exec_id": exe, "kinds": kid},
                              schema={"req": pl.Int64, "exec_id": schema.ID_TYPE, "kinds": pl.Int64})
        allowed = pl.DataFrame(
            [(k, kind) for kinds, k in kinds_ids.items() for kind in kinds],
            schema={"kinds": pl.Int64, "kind": pl.String}, orient="row",
        )
        records = ctx.action_records("exec_id", "kind", "rid").select("exec_id", "kind", "rid").filter(
            pl.col("exec_id").is_in(wanted["exec_id"].unique().implode())
        ).collect()
        matched = (wanted.join(records.with_columns(pl.col("kind").cast(pl.String)), on="exec_id")
                   .join(allowed, on=["kinds", "kind"], how="semi"))
        parts.append(matched.select("req", pl.col("rid").cast(pl.Int64)))
    pairs = pl.concat(parts).unique()
    if pairs.height == 0:
        return {}
    message = ctx.present_columns("message")
    columns = ctx.table.select(*EVIDENCE_COLUMNS, *message)[pairs["rid"]]
    rows = pl.concat([pairs, columns], how="horizontal").sort("req", "ts", "source", "line")
    # The first `limit` of each request's records only, before they become Python objects.
    limits = pl.Series([r.limit for r in requests], dtype=pl.Int64)
    rows = rows.filter(pl.int_range(pl.len()).over("req") < limits.gather(rows["req"]))
    if message:  # a record without a name (a free-text line, an exception's event) shows its message
        rows = ctx.texts.decoded(rows, "message").with_columns(name=pl.coalesce(
            pl.col("name").cast(pl.String),
            pl.col("message").cast(pl.String).str.replace(r"\r?\n[\s\S]*$", "").str.slice(0, EVIDENCE_TEXT_CHARS),
        )).drop("message")
    evidence: dict[int, list[Evidence]] = {}
    # Each row's texts are new objects: one of each distinct text is kept (a few paths, workers
    # and kinds repeated on a quarter of a million records at 5M lines).
    texts: dict[str, str] = {}
    for req, rid, ts, source, line, worker, kind, name, attempt in rows.iter_rows():
        evidence.setdefault(req, []).append(Evidence(
            ts, texts.setdefault(source, source), line, worker and texts.setdefault(worker, worker),
            texts.setdefault(kind, kind), name and texts.setdefault(name, name), attempt, requests[req].notes.get(rid),
        ))
    return evidence


def fill_details(ctx: AnalysisContext, requests: list[DetailRequest]) -> None:
    """Answer every request; a field a detector already set is left as it is."""
    if not requests:
        return
    actions = ids_and_spans(ctx, {r.action_id for r in requests if r.action_id is not None})
    execs = _execution_facts(ctx, requests)
    worker_ids = execution_ids_of(ctx, {i: r.exec_ids for i, r in enumerate(requests) if r.worker is not None})
    evidence = _evidence(ctx, requests)
    generations = ctx.generation_of if any(r.worker is not None for r in requests) else {}
    for i, r in enumerate(requests):
        f = r.finding
        facts = execs.get(i, {"workers": [], "deployments": [], "attempts": [], "start": None, "end": None})
        if not f.attempts:
            f.attempts = facts["attempts"]
        if r.worker is not None:
            ids = {"worker_id": [r.worker], **worker_ids[i]}
            workers, generation = [r.worker], generations.get(r.worker)
            deployments = [generation] if generation else []
            first_ts, last_ts = facts["start"], facts["end"]
        else:
            ids, first_ts, last_ts = actions.get(r.action_id, ({}, None, None))
            workers, deployments = facts["workers"], facts["deployments"]
        f.ids = {**ids, **f.ids}
        f.workers = f.workers or workers
        f.deployments = f.deployments or deployments
        f.first_ts = f.first_ts if f.first_ts is not None else first_ts
        f.last_ts = f.last_ts if f.last_ts is not None else last_ts
        if r.wants_evidence:
            f.evidence = evidence.get(i, [])

"""`dupfind stats`: queue health per queue and job type and per deployment, a time-bucketed view, timeout advice."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import polars as pl

from dupfind import schema, textcodes
from dupfind.analysis import AnalysisContext
from dupfind.analyze import AnalysisReport
from dupfind.effects import repeated_requests
from dupfind.errors import DupfindError
from dupfind.findings import Finding
from dupfind.handlers import FAN_OUT
from dupfind.queue_health import QUANTILES, queue_advice, timeout_units
from dupfind.render.formats_report import file_entries, totals_to_dict
from dupfind.schema import as_strings
from dupfind.timefmt import iso_us

SCHEMA = "dupfind.stats/1"
NONE = "-"  # group label for records that name no queue, job type or deployment
DEAD_LETTER = r"dead[_ -]?letter|(?:^|[_ ])dlq(?:$|[_ ])"
# Rules about queue and lock health, shown by `stats` (the duplicate rules belong to `analyze`).
HEALTH_RULES = ("DF3", "DF4")
BUCKET_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
TARGET_BUCKETS = 30
MAX_BUCKETS = 500
COUNTERS = (
    "published",
    "received",
    "started",
    "finished",
    "failed",
    "retried",
    "redelivered",
    "lease_expired_logged",
    "dead_lettered",
    "lost",
    "duplicate_side_effects",
)


@dataclass
class StatsReport:
    """Everything `dupfind stats` prints."""

    analysis: AnalysisReport
    queues: list[dict[str, Any]]
    deployments: list[dict[str, Any]]
    timeline: dict[str, Any]
    timeouts: list[dict[str, Any]]
    findings: list[Finding]

    def to_dict(self, as_written: bool = False) -> dict[str, Any]:
        """The JSON document (`as_written`: see AnalysisReport.to_dict)."""
        inputs = self.analysis.inputs
        summary = self.analysis.summary
        return {
            "schema": SCHEMA,
            "inputs": {"files": file_entries(inputs, 2, as_written), "totals": totals_to_dict(inputs)},
            "summary": {k: summary[k] for k in ("records", "first_ts", "last_ts", "actions", "executions", "workers")},
            "queues": self.queues,
            "deployments": self.deployments,
            "timeline": self.timeline,
            "timeouts": self.timeouts,
            "findings": [f.to_dict() for f in self.findings],
            "warnings": self.analysis.warnings,
        }


def _labelled(frame: pl.DataFrame, ctx: AnalysisContext) -> pl.DataFrame:
    """Queue, job type and deployment of each row: the action's queue and job type (else the
    record's own), the deployment of the execution it belongs to (else the record's own). Labels
    stay in the type of the record's own (the table's label pool for the table's rows: no row is
    coded again), String elsewhere."""
    attrs = ctx.action_attributes.rename({"queue": "_aq", "job_type": "_aj"})
    deploys = ctx.executions.select("exec_id", pl.col("deployment_id").alias("_ed"))
    own_type = frame.schema.get("queue")
    label_type = own_type if isinstance(own_type, pl.Categorical) else pl.String
    attrs = attrs.with_columns(pl.col("_aq", "_aj").cast(label_type))
    deploys = deploys.with_columns(pl.col("_ed").cast(label_type))
    frame = frame.join(attrs, on="action_id", how="left").join(deploys, on="exec_id", how="left")
    own = lambda c: pl.col(c).cast(label_type) if c in frame.columns else pl.lit(None, dtype=label_type)
    return frame.with_columns(
        queue=pl.coalesce("_aq", own("queue")).fill_null(NONE),
        job_type=pl.coalesce("_aj", own("job_type")).fill_null(NONE),
        deployment=pl.coalesce("_ed", own("deployment_id")).fill_null(NONE),
    ).drop("_aq", "_aj", "_ed")


def _dist(column: str, prefix: str) -> list[pl.Expr]:
    values = pl.col(column).drop_nulls()
    exprs = [values.len().alias(f"{prefix}n")]
    exprs += [values.quantile(q, "linear").round(3).alias(f"{prefix}{name}") for name, q in QUANTILES.items()]
    return exprs + [values.max().round(3).alias(f"{prefix}max")]


def _count_frames(ctx: AnalysisContext, lost_actions: list[int]) -> list[pl.DataFrame]:
    """Labelled rows, one frame per source of counts (records, executions, redeliveries, ...)."""
    cols = ["ts", "kind", "action_id", "exec_id", "queue", "job_type", "deployment_id"]
    table = ctx.columns(*cols, "name", "echo")
    # The event names that mean a dead-letter queue, matched once each rather than once a row.
    names = table["name"].unique().drop_nulls()
    dead_names = names.filter(names.cast(pl.String).str.to_lowercase().str.contains(DEAD_LETTER))
    dead = pl.col("name").is_in(dead_names.implode())
    # A run another log of the same worker already tells counts once.
    counted = (pl.col("kind").is_in(["publish", "receive", "start", "retry", "lease_expired"]) | dead) & ~pl.col("echo")
    # A record of no job, queue or job type says nothing of a queue (a service's `started` line).
    counted = counted & _of_a_queue()
    if dead_names.len():  # the message a dead-letter record names: its job id, else its action
        table = table.with_columns(ctx.columns("job_id"))
        job = pl.col("job_id")
        job = ctx.texts.values_of(pl.when(dead).then(job)) if table.schema["job_id"] == textcodes.CODE_TYPE else job.cast(pl.String)
        message = pl.coalesce(job, pl.col("action_id").cast(pl.String))
        dead_letter = pl.when(dead).then(message)
    else:
        dead_letter = pl.lit(None, dtype=pl.String)
    rows = table.filter(counted).select(
        *cols,
        published=pl.col("kind") == "publish",
        received=_received(),
        started=pl.col("kind") == "start",
        retried=pl.col("kind") == "retry",
        lease_expired_logged=pl.col("kind") == "lease_expired",
        dead_letter=dead_letter,
    )
    handlers = _other_handlers(ctx)
    if handlers.height:  # a fan-out's publish was one to each of its handlers
        published = rows.filter("published").join(handlers, left_on="action_id", right_on="origin")
        rows = pl.concat([rows, published.with_columns(action_id=pl.col("handler")).select(rows.columns)])
    # Labels stay Categorical over these rows (a few per action); groups are cast to String.
    records = _labelled(rows, ctx)
    del rows
    del table
    execs = _labelled(ctx.execution_durations.drop("queue", "job_type", "deployment_id"), ctx).with_columns(
        finished=pl.col("completed"),
        failed=pl.col("failed"),
    )
    gaps = _labelled(ctx.redelivery_gaps.with_columns(queue=pl.col("queue").replace("", None)), ctx)
    extra = pl.DataFrame(schema={"action_id": schema.ID_TYPE, "exec_id": schema.ID_TYPE})
    if ctx.side_effects.height:
        extra = repeated_requests(ctx.side_effects, ctx.effect_counts).select("action_id", "exec_id")
    extra = _labelled(extra, ctx)
    lost = _labelled(
        ctx.action_attributes.filter(pl.col("action_id").is_in(lost_actions)).select(
            "action_id", exec_id=pl.lit(None, dtype=schema.ID_TYPE)
        ),
        ctx,
    ).with_columns(lost=pl.lit(True))
    return [records, execs, gaps, extra, lost]


def _of_a_queue() -> pl.Expr:
    """A record of a job, a queue or a job type: one that says something of a queue."""
    return pl.any_horizontal(pl.col("action_id", "queue", "job_type").is_not_null())


def _received() -> pl.Expr:
    """A delivery of a message: its receive record, or where its consumers log none (Sidekiq logs
    a job's `start` only) its start records; over rows of counted kinds with their `action_id`."""
    kind = pl.col("kind")
    logged = (kind == "receive").any().over("action_id")
    # A run's receives of its first receive's name: a consumer that tells one delivery in two steps
    # (Dramatiq's consumer thread's `Pushing message ...`, then its worker thread's `Received
    # message ...`) received it once; two receives of one name in a run are two deliveries.
    first_name = pl.col("name").filter(kind == "receive").first().over("exec_id", order_by="ts")
    again = pl.col("exec_id").is_not_null() & (pl.col("name") != first_name).fill_null(False)
    return ((kind == "receive") & ~again) | ((kind == "start") & ~logged & pl.col("action_id").is_not_null())


def _other_handlers(ctx: AnalysisContext) -> pl.DataFrame:
    """(handler, origin): each action a fan-out's split gave a handler of its own, and the action
    that kept the publishes (handlers.FAN_OUT); none where no action was split."""
    actions = ctx.actions
    if FAN_OUT not in actions.columns:
        return pl.DataFrame(schema={"handler": schema.ID_TYPE, "origin": schema.ID_TYPE})
    return actions.filter(pl.col(FAN_OUT).is_not_null() & (pl.col(FAN_OUT) != pl.col("action_id"))).select(
        pl.col("action_id").alias("handler"), pl.col(FAN_OUT).alias("origin"),
    )


def _delivery_times(ctx: AnalysisContext) -> pl.DataFrame:
    """Per action: its first publish and first receive/start (labelled); a fan-out's handler's
    first publish is that of the action that kept its publishes."""
    per_action = (
        ctx.action_records("kind", "ts").filter(pl.col("kind").is_in(["publish", "receive", "start"]))
        .group_by("action_id")
        .agg(
            pl.col("ts").filter(pl.col("kind") == "publish").min().alias("published_at"),
            pl.col("ts").filter(pl.col("kind") != "publish").min().alias("delivered_at"),
        )
        .collect()
    )
    handlers = _other_handlers(ctx)
    if handlers.height:
        origin = handlers.join(per_action.select(pl.col("action_id").alias("origin"), pl.col("published_at").alias("_sent")),
                               on="origin").select(pl.col("handler").alias("action_id"), "_sent")
        per_action = per_action.join(origin, on="action_id", how="left").with_columns(
            published_at=pl.coalesce("published_at", "_sent"),
        ).drop("_sent")
    per_action = per_action.filter(pl.col("published_at").is_not_null())
    return _labelled(per_action.with_columns(exec_id=pl.lit(None, dtype=schema.ID_TYPE)), ctx)


def _waits(deliveries: pl.DataFrame, end_of_logs) -> pl.DataFrame:
    """First publish to first receive/start, and how long a never-delivered message waited."""
    wait = (pl.col("delivered_at") - pl.col("published_at")).dt.total_microseconds() / 1e6
    age = (pl.coalesce("delivered_at", pl.lit(end_of_logs)) - pl.col("published_at")).dt.total_microseconds() / 1e6
    return deliveries.with_columns(wait_s=wait.clip(lower_bound=0), age_s=age.clip(lower_bound=0))


def _grouped(keys: list[str], frames: list[pl.DataFrame], waits: pl.DataFrame | None) -> list[dict[str, Any]]:
    records, execs, gaps, extra, lost = frames
    with_waits = waits is not None
    parts = [
        records.group_by(keys).agg(
            *[pl.col(c).sum() for c in ("published", "received", "started", "retried", "lease_expired_logged")],
            pl.col("dead_letter").drop_nulls().n_unique().alias("dead_lettered"),
        ).pipe(as_strings),
        execs.group_by(keys).agg(pl.col("finished").sum(), pl.col("failed").sum(), *_dist("duration_s", "d_")),
        gaps.group_by(keys).agg(pl.len().alias("redelivered")),
        extra.group_by(keys).agg(pl.len().alias("duplicate_side_effects")),
        lost.group_by(keys).agg(pl.len().alias("lost")),
    ]
    if with_waits:
        parts.append(
            waits.group_by(keys).agg(
                *_dist("wait_s", "w_"), pl.col("age_s").max().round(3).alias("oldest_message_age_s")
            )
        )
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.join(part, on=keys, how="full", coalesce=True)
    counters = [c for c in COUNTERS if c in merged.columns]
    merged = merged.with_columns(pl.col(counters).fill_null(0).cast(pl.Int64)).sort(keys)
    rows = []
    for row in merged.iter_rows(named=True):
        out = {k: (None if row[k] == NONE else row[k]) for k in keys}
        out.update({c: row[c] for c in counters})
        if keys == ["deployment"]:
            # Producers' releases and the broker are not worker generations; lost is a property of an action.
            for name in ("published", "lost", "lease_expired_logged"):
                out.pop(name, None)
            if not any(out[c] for c in counters if c in out) and not row["d_n"]:
                continue
        out["duration_s"] = {k[2:]: row[k] for k in row if k.startswith("d_")}
        out["duration_s"]["n"] = out["duration_s"]["n"] or 0
        if with_waits:
            out["queue_wait_s"] = {k[2:]: row[k] for k in row if k.startswith("w_")}
            out["queue_wait_s"]["n"] = out["queue_wait_s"]["n"] or 0
            out["oldest_message_age_s"] = row["oldest_message_age_s"]
        rows.append(out)
    return rows


def bucket_size(span_s: float, requested_s: float | None = None) -> int:
    """The bucket of the receives-vs-publishes view: as asked, else a round size giving ~30 buckets."""
    if requested_s is not None:
        if requested_s < 1:
            raise DupfindError("--bucket must be at least one second.")
        if span_s / requested_s > MAX_BUCKETS:
            raise DupfindError(
                f"--bucket {requested_s:g}s gives more than {MAX_BUCKETS} buckets over {span_s:.0f} s of logs."
            )
        return int(requested_s)
    for step in BUCKET_STEPS_S:
        if span_s / step <= TARGET_BUCKETS:
            return step
    return BUCKET_STEPS_S[-1]


def _timeline(events: pl.DataFrame, redelivered: pl.DataFrame, requested_s: float | None) -> dict[str, Any]:
    if events.height == 0:
        return {"bucket_s": None, "buckets": []}
    first, last = events["ts"].min(), events["ts"].max()
    size = bucket_size((last - first).total_seconds(), requested_s)
    every = f"{size}s"
    bucket = pl.col("ts").dt.truncate(every).alias("bucket")
    counts = pl.concat([events.select("ts", "kind"), redelivered.select("ts", kind=pl.lit("redelivery"))]).group_by(
        bucket
    ).agg(
        (pl.col("kind") == "publish").sum().alias("published"),
        (pl.col("kind") == "receive").sum().alias("received"),
        (pl.col("kind") == "redelivery").sum().alias("redelivered"),
    )
    # Deploy starts and finishes named apart: a text for each of the few, not for every row.
    deploys = events.filter(pl.col("kind").str.starts_with("deploy_")).group_by(bucket, maintain_order=True).agg(
        pl.concat_str(
            pl.col("kind").str.replace("deploy_", "deploy "), pl.lit(" "), pl.col("deployment_id").fill_null("")
        ).unique(maintain_order=True).alias("deploys"),
    )
    counts = counts.join(deploys, on="bucket", how="left")
    # From the first event's bucket to the last's: a range from the first event itself, a step at a
    # time, could stop short of the last event's bucket (and its counts were lost).
    edges = pl.select(pl.lit(first).dt.truncate(every).alias("a"), pl.lit(last).dt.truncate(every).alias("b")).row(0)
    buckets = pl.DataFrame({"bucket": pl.datetime_range(edges[0], edges[1], every, eager=True, time_zone="UTC")})
    joined = (
        buckets.unique("bucket")
        .join(counts, on="bucket", how="left")
        .sort("bucket")
        .with_columns(pl.col("published", "received", "redelivered").fill_null(0), pl.col("deploys").fill_null([]))
    )
    return {
        "bucket_s": size,
        "buckets": [
            {
                "start": iso_us(r["bucket"]),
                "published": r["published"],
                "received": r["received"],
                "redelivered": r["redelivered"],
                "deploys": [d.strip() for d in r["deploys"]],
            }
            for r in joined.iter_rows(named=True)
        ],
    }


@dataclass
class TimeoutFacts:
    """What the timeout advice reads (an AnalysisContext has the same names): the configured
    timeouts, the records stating one, execution durations, redelivery gaps, lease extensions."""

    timeouts: dict[str, float]
    timeout_statements: pl.DataFrame
    execution_durations: pl.DataFrame
    redelivery_gaps: pl.DataFrame
    lease_extensions: dict[str, int]

    # Worked out from those exactly as an AnalysisContext works them out.
    queue_timeouts = AnalysisContext.queue_timeouts
    stated_timeouts = AnalysisContext.stated_timeouts
    service_timeouts = AnalysisContext.service_timeouts
    service_statements = AnalysisContext.service_statements
    known_timeouts = AnalysisContext.known_timeouts
    inferred_timeouts = AnalysisContext.inferred_timeouts
    timeout_source = AnalysisContext.timeout_source
    stated_timeout_names = AnalysisContext.stated_timeout_names
    timeout_name = AnalysisContext.timeout_name
    _timeout_name = AnalysisContext._timeout_name


@dataclass
class StatsFacts:
    """What `stats` counts, row by row, before grouping: of one analysis, or of windows of time
    merged (dupfind.windows)."""

    counts: list[pl.DataFrame]  # labelled rows: counted records, executions, redeliveries, repeats, lost
    deliveries: pl.DataFrame  # per action: first publish and first delivery, labelled
    events: pl.DataFrame  # publishes, receives, deploy starts and finishes: ts, kind, name, deployment_id
    redelivered: pl.DataFrame  # each redelivery: action_id, ts, kind
    end_of_logs: Any
    timeouts: TimeoutFacts


def stats_facts(ctx: AnalysisContext, lost_actions: list[int]) -> StatsFacts:
    gaps = ctx.redelivery_gaps
    redelivered = (
        as_strings(ctx.columns("ts", "kind")[gaps["rid"].cast(pl.Int64).to_list()]).with_columns(gaps["action_id"])
        if gaps.height
        else pl.DataFrame(schema={"ts": ctx.columns("ts").schema["ts"], "kind": pl.String, "action_id": schema.ID_TYPE})
    )
    deploy = pl.col("kind").is_in(["deploy_start", "deploy_finish"])
    events = as_strings(  # the deployment only of a deploy's records, as a window keeps them
        ctx.columns("ts", "kind", "deployment_id", "action_id", "exec_id", "name", "echo", "queue", "job_type")
        .filter(pl.col("kind").is_in(["publish", "receive", "start", "deploy_start", "deploy_finish"]) & ~pl.col("echo"))
        # As the counts count them: a receive of no job, queue or job type (aiosmtpd's `('127.0.0.1',
        # 58744) EOF received`) is no queue's.
        .filter(~pl.col("kind").is_in(["receive", "start"]) | (_received() & _of_a_queue()))
        .select("ts", pl.col("kind").cast(pl.String).replace("start", "receive"), pl.lit(None, dtype=pl.String).alias("name"),
                pl.when(deploy).then(pl.col("deployment_id")))
    )
    return StatsFacts(
        counts=_count_frames(ctx, lost_actions),
        deliveries=_delivery_times(ctx),
        events=events,
        redelivered=redelivered,
        end_of_logs=ctx.columns("ts")["ts"].max(),
        timeouts=TimeoutFacts(ctx.timeouts, ctx.timeout_statements, ctx.execution_durations, gaps, ctx.lease_extensions),
    )


def _timeouts(ctx: AnalysisContext | TimeoutFacts) -> list[dict[str, Any]]:
    queues = (
        set(ctx.execution_durations["queue"].fill_null("").to_list())
        | set(ctx.inferred_timeouts)
        | set(ctx.known_timeouts)
    )
    if len(queues) > 1:
        queues.discard("")  # the any-queue value already answers for every named queue
    out = []
    for queue, service in timeout_units(ctx, sorted(queues)):
        advice = queue_advice(ctx, queue, service).to_dict()
        inferred = ctx.inferred_timeouts.get(queue)
        own = ctx.service_statements(queue, service)
        advice.update(
            queue=queue or None,
            inferred=inferred.to_dict() if inferred else None,
            configured_s=ctx.timeouts.get(queue),
            logged_s=own[0][0] if own else ctx.stated_timeouts.get(queue),
        )
        out.append(advice)
    return out


def stats_state(report: AnalysisReport, bucket_s: float | None = None) -> dict[str, dict[str, Any]]:
    """build_stats as the result cache keeps it: each StatsReport field's value, but the analysis
    (`{"analysis": True}`) and its health findings (`{"findings_of": rules}`), which come back
    from the analysis itself."""
    stats = build_stats(report, bucket_s)
    out: dict[str, dict[str, Any]] = {}
    for field in fields(StatsReport):
        value = getattr(stats, field.name)
        if value is report:
            out[field.name] = {"analysis": True}
        elif field.name == "findings":
            out[field.name] = {"findings_of": list(HEALTH_RULES)}
        else:
            out[field.name] = {"value": value}
    return out


def build_stats(report: AnalysisReport, bucket_s: float | None = None) -> StatsReport:
    """Queue health from an analysis: counters, durations, waits, a timeline, timeout advice, health findings."""
    ctx = report.context
    ctx.read_ahead("action_attributes", "executions", "execution_durations", "redelivery_gaps", "side_effects",
                   "effect_counts", "timeout_statements")
    return stats_from(report, stats_facts(ctx, lost_actions(report)), bucket_s)


def lost_actions(report: AnalysisReport) -> list[int]:
    return [f.action_id for f in report.findings_where(lambda rule, _: rule == "DF107") if f.action_id is not None]


def stats_from(report: AnalysisReport, facts: StatsFacts, bucket_s: float | None = None) -> StatsReport:
    """The stats of an analysis from its facts (labelled once, grouped two ways)."""
    return StatsReport(
        analysis=report,
        queues=_grouped(["queue", "job_type"], facts.counts, _waits(facts.deliveries, facts.end_of_logs)),
        deployments=_grouped(["deployment"], facts.counts, None),
        timeline=_timeline(facts.events, facts.redelivered.select("ts", "kind"), bucket_s),
        timeouts=_timeouts(facts.timeouts),
        findings=report.findings_of(*HEALTH_RULES),
    )

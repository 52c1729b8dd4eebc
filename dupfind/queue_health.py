"""Queue health facts shared by `dupfind stats` and rule DF401: durations, lease extensions, timeout advice."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from typing import TYPE_CHECKING

import polars as pl

from dupfind.schema import TIMEOUT_NAME

if TYPE_CHECKING:
    from dupfind.analysis import AnalysisContext

QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
# Values a person would set; the SQS maximum is 12 h.
ROUND_TIMEOUTS_S = (
    1,
    2,
    3,
    5,
    10,
    15,
    20,
    30,
    45,
    60,
    90,
    120,
    180,
    240,
    300,
    450,
    600,
    900,
    1200,
    1800,
    2700,
    3600,
    5400,
    7200,
    10800,
    14400,
    21600,
    43200,
)
HEADROOM = 1.25  # recommended timeout = p99 x headroom, rounded up to a value from ROUND_TIMEOUTS_S


def action_attributes(records: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Queue and job type of each action: the first value any of its records states; in action
    order (a group_by's own order changes from run to run)."""
    return records.lazy().group_by("action_id").agg(
        pl.col("queue").drop_nulls().first().alias("queue"),
        pl.col("job_type").drop_nulls().first().alias("job_type"),
    ).sort("action_id").collect()


def execution_durations(executions: pl.DataFrame, attributes: pl.DataFrame) -> pl.DataFrame:
    """Per execution: queue, job type, deployment, and how long it held the message: from its
    receive (else start) to its ack/finish or failure. `duration_s` is null for a run that never
    logged an end (killed, cut off)."""
    entry = pl.coalesce("receive_ts", "entry_ts", "start")
    end = pl.coalesce("done_ts", "fail_ts")
    return executions.join(attributes, on="action_id", how="left", maintain_order="left").select(
        "exec_id",
        "action_id",
        "queue",
        "job_type",
        "deployment_id",
        "completed",
        "failed",
        entry.alias("entry"),
        end.alias("end_ts"),
        duration_s=pl.when(end.is_not_null()).then((end - entry).dt.total_microseconds() / 1e6),
    )


def distribution(values: pl.Series) -> dict[str, float | int | None]:
    """n, p50/p90/p95/p99 and max of some durations (seconds)."""
    values = values.drop_nulls()
    out: dict[str, float | int | None] = {"n": values.len()}
    for name, q in QUANTILES.items():
        out[name] = round(float(values.quantile(q, "linear")), 3) if values.len() else None
    out["max"] = round(float(values.max()), 3) if values.len() else None
    return out


def round_up_timeout(seconds: float) -> int:
    for value in ROUND_TIMEOUTS_S:
        if value >= seconds:
            return value
    return math.ceil(seconds)


@dataclass
class TimeoutAdvice:
    """What the measured durations say about one queue's visibility timeout."""

    queue: str
    timeout_s: float | None
    timeout_source: str | None  # configured | logged | inferred
    durations: dict[str, float | int | None]
    share_over_timeout: float | None
    lease_extensions: int
    redeliveries: int  # deliveries no failure or retry asked for
    recommended_s: int | None = None
    avoided: int | None = None  # observed redeliveries the recommended timeout would have prevented
    crashed: int = 0  # redeliveries after a run that never ended: they still happen, later
    failover_delay_s: float | None = None  # extra wait for a crashed worker's message
    advice: list[str] = field(default_factory=list)
    timeout_name: str = TIMEOUT_NAME  # as the logs stating it call it (a Kafka consumer's max.poll.interval.ms)
    service: str | None = None  # the service of the queue's consumers advised, where they state timeouts of their own

    def to_dict(self) -> dict:
        return asdict(self)


def advise(
    queue: str, timeout: tuple[float, str] | None, durations: pl.DataFrame, gaps: pl.DataFrame, extensions: int,
    name: str = TIMEOUT_NAME,
) -> TimeoutAdvice:
    """Recommend a timeout from the duration distribution and replay the observed redeliveries
    against it: a redelivery is avoided when the run it interrupted finished within the new timeout."""
    measured = durations["duration_s"].drop_nulls()
    stats = distribution(measured)
    timeout_s, source = timeout if timeout else (None, None)
    share = round(float((measured >= timeout_s).mean()), 4) if timeout_s and measured.len() else None
    replay = gaps.join(
        durations.select(pl.col("exec_id").alias("prev_exec_id"), pl.col("duration_s").alias("prev_duration_s")),
        on="prev_exec_id",
        how="left",
    )
    advice = TimeoutAdvice(
        queue,
        timeout_s,
        source,
        stats,
        share,
        extensions,
        gaps.height,
        crashed=int(replay["prev_duration_s"].is_null().sum()),
        timeout_name=name,
    )
    where = f"queue {queue!r}" if queue else "the queue"
    if extensions:
        text = (
            f"Workers extend the lease while they run ({extensions} extensions logged): "
            "a longer timeout is not the fix."
        )
        if gaps.height:
            text += (
                f" {gaps.height} redeliveries happened anyway: look for runs that stopped extending "
                "(killed, blocked event loop, extension errors)."
            )
        advice.advice.append(text)
        return advice
    if stats["p99"] is None:
        advice.advice.append(f"No finished executions on {where}: nothing to measure.")
        return advice
    recommended = round_up_timeout(stats["p99"] * HEADROOM)
    if timeout_s is not None and recommended <= timeout_s:
        advice.advice.append(
            f"The {timeout_s:g} s timeout ({source}) already covers p99 {stats['p99']:.1f} s with headroom; keep it."
        )
        if advice.crashed:
            advice.advice.append(
                f"{advice.crashed} redeliveries followed runs that never logged an end (killed or crashed workers): "
                "the timeout is what brought those messages back, not their cause."
            )
        return advice
    advice.recommended_s = recommended
    finished = replay["prev_duration_s"].is_not_null()
    advice.avoided = int((finished & (replay["prev_duration_s"] < recommended)).sum())
    text = f"Recommended {name} for {where}: {recommended} s (p99 {stats['p99']:.1f} s x {HEADROOM:g})"
    if timeout_s is not None:
        advice.failover_delay_s = round(recommended - timeout_s, 3)
        text += (
            f", instead of {timeout_s:g} s ({source}). It would have avoided {advice.avoided} of the "
            f"{gaps.height} observed redeliveries. The cost: a message whose worker dies waits {recommended} s "
            f"instead of {timeout_s:g} s before another worker gets it (+{advice.failover_delay_s:g} s failover"
        )
        text += f"; {advice.crashed} such redeliveries were seen)." if advice.crashed else ")."
    else:
        text += "; the current timeout is unknown (pass --timeout QUEUE=SECONDS)."
    advice.advice.append(text)
    advice.advice.append(
        "A longer timeout trades redeliveries for slower failover; it is not a fix. Extend the lease while "
        "the job runs (heartbeat) and keep the side effect idempotent."
    )
    return advice


def queue_advice(ctx: AnalysisContext, queue: str, service: str | None = None) -> TimeoutAdvice:
    """The advice for one queue ('' = records that name no queue) from an analysis context; for
    the consumers of one `service` only, where given (timeout_units)."""
    durations = ctx.execution_durations.filter(pl.col("queue").fill_null("") == queue)
    gaps = ctx.redelivery_gaps.filter(pl.col("queue") == queue)
    if service is not None:
        durations = durations.filter(pl.col("service") == service)
        gaps = gaps.join(durations.select(pl.col("exec_id").alias("prev_exec_id")), on="prev_exec_id", how="semi")
    advice = advise(queue, ctx.timeout_source(queue or None, service), durations, gaps, ctx.lease_extensions.get(queue, 0),
                    ctx.timeout_name(queue or None, service))
    advice.service = service
    return advice


def timeout_units(ctx: AnalysisContext, queues: list[str]) -> list[tuple[str, str | None]]:
    """What timeout advice is given for: each queue ('' = no queue named), or each service consuming
    it where its services state timeouts of their own (two consumer groups of one Kafka topic, a
    notifier's max.poll.interval.ms of 30 s and an indexer's of 300 s: one figure for both would
    be the wrong one for one of them)."""
    units: list[tuple[str, str | None]] = []
    durations = ctx.execution_durations
    for queue in queues:
        runs = durations.filter(pl.col("queue").fill_null("") == queue)
        services = sorted(runs["service"].drop_nulls().unique().to_list())
        own = {ctx.timeout_source(queue or None, service) for service in services}
        if len(services) > 1 and len(own) > 1:
            units += [(queue, service) for service in services]
        else:
            units.append((queue, None))
    return units

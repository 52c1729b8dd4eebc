"""Visibility timeouts: redelivery gaps, and the timeout they imply when none is stated."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import polars as pl

from dupfind import schema, textcodes
from dupfind.textcodes import Texts

# A redelivery after one of these was asked for (a retry, a nack, a lock denial), not a lease expiry.
REQUESTED_REDELIVERY_KINDS = ("fail", "retry", "lock_denied")


def gap_schema() -> dict:
    """The columns of redelivery_gaps' frame and their types."""
    return {
        "queue": pl.String,
        "message": pl.String,
        "action_id": schema.ID_TYPE,
        "gap_s": pl.Float64,
        "prev_rid": pl.UInt32,
        "rid": pl.UInt32,
        "prev_exec_id": schema.ID_TYPE,
        "exec_id": schema.ID_TYPE,
    }


@dataclass
class InferredTimeout:
    """A timeout estimated from redelivery gaps: the lower edge of their densest cluster."""

    queue: str
    estimate_s: float
    support: int  # gaps in the cluster
    gaps: int  # all redelivery gaps of the queue
    spread_s: float  # p90 - p10 of the cluster
    low_s: float
    high_s: float

    @property
    def reliable(self) -> bool:
        return self.support >= 3

    def to_dict(self) -> dict:
        return {**asdict(self), "reliable": self.reliable}


def _message() -> pl.Expr:
    return pl.coalesce(pl.col("job_id").cast(pl.String), pl.concat_str(pl.lit("action:"), pl.col("action_id").cast(pl.String)))


# Per-message values over rows sorted by message (each message a contiguous run of rows).
def _run_start() -> pl.Expr:
    return (pl.col("message") != pl.col("message").shift(1)).fill_null(True)


def _run_end() -> pl.Expr:
    return _run_start().shift(-1).fill_null(True)


def _row() -> pl.Expr:
    return pl.int_range(pl.len(), dtype=pl.Int64)


def _run_shift(column: str) -> pl.Expr:
    """The previous row's value within the message (null on its first row)."""
    return pl.when(_run_start()).then(None).otherwise(pl.col(column).shift(1))


def _run_cum_sum(values: pl.Expr) -> pl.Expr:
    """The running sum within the message."""
    total = values.cum_sum()
    return total - pl.when(_run_start()).then(total - values).forward_fill()


def _run_sum(values: pl.Expr) -> pl.Expr:
    """The message's sum, on every one of its rows."""
    ends = pl.when(_run_end()).then(_run_cum_sum(values))
    return ends.backward_fill()


def _run_fill(column: str) -> pl.Expr:
    """Nulls filled forward, then backward, within the message."""
    start = pl.when(_run_start()).then(_row()).forward_fill()
    end = pl.when(_run_end()).then(_row()).backward_fill()
    known = pl.col(column).is_not_null()
    before = pl.when(known).then(_row()).forward_fill()
    after = pl.when(known).then(_row()).backward_fill()
    value = pl.col(column)
    return pl.coalesce(
        pl.when(before >= start).then(value.gather(before.fill_null(0))),
        pl.when(after <= end).then(value.gather(after.fill_null(0))),
    )


def _message_order(rows: pl.DataFrame, texts: Texts) -> pl.DataFrame:
    """`rows` (with `job` codes and `message_action`) with `message`: an integer that sorts as the
    message's text (the job id, else "action:N") would, without writing that text a row."""
    actions = (
        rows.filter(pl.col("job").is_null()).select(pl.concat_str(pl.lit("action:"), pl.col("message_action").cast(pl.String)))
        .to_series().unique().sort()
    )
    below = texts.values.search_sorted(actions).cast(pl.Int64)  # dictionary texts before each action text
    known = texts.lookup(actions).is_not_null()
    added = below.filter(~known)  # action texts the dictionary lacks, in order
    job_rank = pl.col("job").cast(pl.Int64) + pl.lit(added).search_sorted(pl.col("job").cast(pl.Int64), side="right").cast(pl.Int64)
    ranks = pl.DataFrame({"text": actions, "below": below, "known": known}).with_columns(
        rank=pl.when("known").then(pl.col("below") + pl.lit(added).search_sorted(pl.col("below"), side="right").cast(pl.Int64))
        .otherwise(pl.col("below") + (~pl.col("known")).cast(pl.Int64).cum_sum() - 1)
    )
    action_rank = pl.concat_str(pl.lit("action:"), pl.col("message_action").cast(pl.String)).replace_strict(
        ranks["text"], ranks["rank"], default=None, return_dtype=pl.Int64
    )
    return rows.with_columns(message=pl.when(pl.col("job").is_not_null()).then(job_rank).otherwise(action_rank))


def redelivery_gaps(table: pl.DataFrame, action_queue: pl.DataFrame | None = None, texts: Texts | None = None) -> pl.DataFrame:
    """Deliveries of one message after the first that no failure, retry or lock denial asked for
    (`action_queue`: action_id, queue of each action, for deliveries that do not name their queue).

    A delivery is a receive record of the message (job id, else action); messages whose consumers
    log no receive count their start records instead. `gap_s` is this delivery minus the previous one.
    """
    coded = texts is not None and table.schema.get("job_id") == textcodes.CODE_TYPE
    # Codes: a copy of each record's job id as text, then sorted, held 0.3 GB at 5M lines, after the
    # table's own texts. Messages are ordered as their texts, as the text would order them.
    message = {"job": pl.col("job_id"), "message_action": pl.col("action_id")} if coded else {
        "message": _message().cast(pl.Categorical)
    }
    rows = (
        table.lazy().filter(pl.col("job_id").is_not_null() | pl.col("action_id").is_not_null())
        .filter(~pl.col("echo") if "echo" in table.columns else pl.lit(True))  # one log's account per run
        .filter(pl.col("kind").is_in(["receive", "start", *REQUESTED_REDELIVERY_KINDS]))
        .select("rid", "ts", "kind", "queue", "action_id", "exec_id",
                pl.col("name").cast(pl.String) if "name" in table.columns else pl.lit(None, dtype=pl.String).alias("name"),
                **message)
        .collect()
    )
    if coded:
        rows = _message_order(rows, texts)
    if rows.height == 0:
        return pl.DataFrame(schema=gap_schema())
    # Each message's records in time order, requested redeliveries before a delivery logged at the
    # same instant. Messages are then contiguous runs of rows: per-message values come from running
    # sums and fills bounded by the run's first row, not from window functions over a group key
    # (1.53 s -> 0.38 s at 5M lines).
    rows = rows.with_columns(is_delivery=pl.col("kind").is_in(["receive", "start"])).sort(
        "message", "ts", "is_delivery", "rid"
    )
    receives = (pl.col("kind") == "receive").cast(pl.Int32)
    rows = rows.with_columns(has_receive=_run_sum(receives) > 0)
    delivery = pl.when(pl.col("has_receive")).then(pl.col("kind") == "receive").otherwise(pl.col("kind") == "start")
    rows = rows.filter(delivery | pl.col("kind").is_in(REQUESTED_REDELIVERY_KINDS))
    rows = rows.with_columns(
        requests=_run_cum_sum((~pl.col("is_delivery")).cast(pl.Int32)),
        queue=_run_fill("queue"),
        action_id=_run_fill("action_id"),
    )
    # A receive of another name right after one in the same run is the same delivery told by its
    # next step (Dramatiq's consumer thread's `Pushing message`, then its worker thread's
    # `Received message`), not a redelivery; one of the same name is (a Lambda log stream's two
    # invocations of one message).
    deliveries = rows.filter(pl.col("is_delivery"))
    deliveries = deliveries.filter(
        pl.col("exec_id").is_null() | (pl.col("exec_id") != _run_shift("exec_id")).fill_null(True)
        | (pl.col("name") == _run_shift("name")).fill_null(True)
    )
    deliveries = (
        deliveries
        .with_columns(
            prev_ts=_run_shift("ts"),
            prev_rid=_run_shift("rid"),
            prev_exec_id=_run_shift("exec_id"),
            asked=pl.col("requests") - _run_shift("requests"),
        )
        .filter(pl.col("prev_ts").is_not_null() & (pl.col("asked") == 0))
    )
    if action_queue is not None and action_queue.height:
        queues = action_queue.select("action_id", pl.col("queue").alias("_action_queue"))
        deliveries = deliveries.join(queues, on="action_id", how="left", maintain_order="left").with_columns(
            queue=pl.coalesce(pl.col("queue").cast(pl.String), "_action_queue")
        )
    if coded:
        deliveries = deliveries.with_columns(message=pl.coalesce(
            texts.text("job"), pl.concat_str(pl.lit("action:"), pl.col("message_action").cast(pl.String))
        ))
    return deliveries.select(
        pl.col("queue").fill_null(""),
        "message",
        "action_id",
        gap_s=(pl.col("ts") - pl.col("prev_ts")).dt.total_microseconds() / 1e6,
        prev_rid=pl.col("prev_rid"),
        rid=pl.col("rid"),
        prev_exec_id=pl.col("prev_exec_id"),
        exec_id=pl.col("exec_id"),
    ).cast(gap_schema())


def infer_timeout(
    queue: str, gaps: pl.Series, width_s: float = 1.0, width_share: float = 0.1, min_gap_s: float = 1.0
) -> InferredTimeout | None:
    """A lease expires after the timeout and the next delivery follows after a poll interval, a
    broker sweep or a free worker: gaps sit just above the timeout, never much below it. Take the
    window [g, g + max(width_s, width_share * g)] holding the most gaps, and its 10th percentile.
    Sub-second gaps are two consumers getting one message at once (fan-out), not a lease expiry."""
    gaps = gaps.drop_nulls()
    gaps = gaps.filter(gaps >= min_gap_s).sort()
    if gaps.len() == 0:
        return None
    upper = pl.Series((gaps + (gaps * width_share).clip(lower_bound=width_s)).to_list(), dtype=pl.Float64)
    ends = gaps.search_sorted(upper, side="right")
    counts = ends - pl.Series(range(gaps.len()), dtype=ends.dtype)
    best = int(counts.arg_max())
    cluster = gaps.slice(best, int(counts[best]))
    low, high = float(cluster.quantile(0.1, "linear")), float(cluster.quantile(0.9, "linear"))
    return InferredTimeout(
        queue=queue,
        estimate_s=round(low, 3),
        support=cluster.len(),
        gaps=gaps.len(),
        spread_s=round(high - low, 3),
        low_s=round(float(cluster.min()), 3),
        high_s=round(float(cluster.max()), 3),
    )


# A message its broker took back the moment its consumer's connection closed (a worker killed on
# RabbitMQ: redelivered 9-137 ms after the SIGKILL in fixtures/real/dramatiq_rabbitmq_*) comes
# again within this long of the kill: its gap tells when it was first received, not a lease.
KILL_HANDBACK_S = 2.0


def infer_timeouts(gaps: pl.DataFrame) -> dict[str, InferredTimeout]:
    """One estimate per queue that had unrequested redeliveries (but those right after their
    worker's kill, `after_kill`)."""
    if "after_kill" in gaps.columns:
        gaps = gaps.filter(~pl.col("after_kill"))
    found: dict[str, InferredTimeout] = {}
    for (queue,), group in gaps.group_by("queue", maintain_order=True):
        estimate = infer_timeout(queue, group["gap_s"])
        if estimate is not None:
            found[queue] = estimate
    return dict(sorted(found.items()))

"""Scheduled sends: publishes a scheduler logs without a message id, and those two schedulers sent at once."""

from __future__ import annotations

import polars as pl

from dupfind.schema import as_strings

# Two schedulers' sends of one entry closer than half its period are two sends of one due
# occurrence: two schedulers sending one entry each period always have a send of the other within
# half a period. Capped: a daily entry sent by two schedulers is doubled at the same minute, not
# hours apart (a replacement scheduler's first send can be hours after the old one's last).
HALF_PERIOD_CAP_S = 300.0
# An entry sent once by each (no period in the logs): two sends this close are one occurrence.
SINGLE_SEND_WINDOW_S = 2.0
# A run of the task follows the send that made it within this long (a queue with a backlog).
RUN_AFTER_SEND_S = 60.0

PAIR_COLUMNS = ("rid", "ts", "publisher", "job_type", "entry", "other_rid", "other_ts", "other_publisher", "gap_s")


# Event names of a scheduler's send of an entry, whether or not it names the message it sends.
SCHEDULED_EVENTS = ("scheduled_send", "scheduled_run", "periodic_task_enqueued")


def scheduled_sends(records: pl.DataFrame) -> pl.DataFrame:
    """A scheduler's sends: publishes named a scheduler's (SCHEDULED_EVENTS: celery beat's `Sending
    due task`, APScheduler's `Running job`, Huey's `Enqueueing periodic task`), or that name no
    message and belong to no action, from records with rid, ts, kind, name, job_id, job_type,
    object_name, worker_id, source, line and action_id (labels as texts or Categorical, ids as
    texts or codes): rid, ts, job_type, entry (the schedule entry, else the task), publisher (the
    scheduler: its worker id, else its file)."""
    unnamed = pl.col("job_id").is_null() & pl.col("action_id").is_null()
    sends = as_strings(records.filter(
        (pl.col("kind") == "publish") & pl.col("ts").is_not_null()
        & (pl.col("job_type").is_not_null() | pl.col("object_name").is_not_null())
        & (pl.col("name").cast(pl.String).is_in(SCHEDULED_EVENTS) | unnamed)
    ))
    return sends.select(
        "rid", "ts", pl.col("job_type").fill_null(""),
        pl.coalesce("object_name", "job_type").alias("entry"),
        pl.coalesce("worker_id", "source").alias("publisher"), "source", "line",
    ).sort("ts", "rid")


def doubled_sends(sends: pl.DataFrame) -> pl.DataFrame:
    """Each scheduled send whose nearest send of the same entry by another scheduler is within the
    entry's half period (see HALF_PERIOD_CAP_S, SINGLE_SEND_WINDOW_S): PAIR_COLUMNS, the other
    send in `other_*`, in time order. A pair appears once from each side."""
    if sends.is_empty() or sends["publisher"].n_unique() < 2:
        return pl.DataFrame(schema={
            "rid": sends.schema["rid"], "ts": sends.schema["ts"], "publisher": pl.String, "job_type": pl.String,
            "entry": pl.String, "other_rid": sends.schema["rid"], "other_ts": sends.schema["ts"],
            "other_publisher": pl.String, "gap_s": pl.Float64,
        })
    keyed = sends.with_columns(key=pl.concat_str("job_type", "entry", separator="\x1f")).sort("key", "ts", "rid")
    periods = (
        keyed.with_columns(step=pl.col("ts").diff().over("key", "publisher").dt.total_microseconds() / 1e6)
        .group_by("key", "publisher").agg(pl.col("step").median())
        .group_by("key").agg(period=pl.col("step").min())
    )
    tolerance = (
        pl.when(pl.col("period").is_not_null())
        .then(pl.min_horizontal(pl.col("period") / 2, pl.lit(HALF_PERIOD_CAP_S)))
        .otherwise(pl.lit(SINGLE_SEND_WINDOW_S))
    )
    keyed = keyed.join(periods, on="key", how="left").with_columns(tolerance=tolerance)
    # Consecutive sends of one key by one scheduler form a run; the nearest send of another
    # scheduler is the last of the run before or the first of the run after.
    new_run = (pl.col("publisher") != pl.col("publisher").shift()) | (pl.col("key") != pl.col("key").shift())
    keyed = keyed.with_columns(run=new_run.fill_null(True).cum_sum())
    runs = keyed.group_by("run").agg(
        pl.col("key").first(), pl.col("publisher").first(),
        pl.col("rid").first().alias("first_rid"), pl.col("ts").first().alias("first_ts"),
        pl.col("rid").last().alias("last_rid"), pl.col("ts").last().alias("last_ts"),
    )
    before = runs.select(
        (pl.col("run") + 1).alias("run"), pl.col("key").alias("before_key"), pl.col("publisher").alias("before_publisher"),
        pl.col("last_rid").alias("before_rid"), pl.col("last_ts").alias("before_ts"),
    )
    after = runs.select(
        (pl.col("run") - 1).alias("run"), pl.col("key").alias("after_key"), pl.col("publisher").alias("after_publisher"),
        pl.col("first_rid").alias("after_rid"), pl.col("first_ts").alias("after_ts"),
    )
    near = keyed.join(before, on="run", how="left").join(after, on="run", how="left").with_columns(
        before_gap=pl.when(pl.col("before_key") == pl.col("key")).then(
            (pl.col("ts") - pl.col("before_ts")).dt.total_microseconds() / 1e6),
        after_gap=pl.when(pl.col("after_key") == pl.col("key")).then(
            (pl.col("after_ts") - pl.col("ts")).dt.total_microseconds() / 1e6),
    )
    take_after = pl.col("after_gap").is_not_null() & (pl.col("before_gap").is_null() | (pl.col("after_gap") < pl.col("before_gap")))
    pairs = near.with_columns(
        other_rid=pl.when(take_after).then("after_rid").otherwise("before_rid"),
        other_ts=pl.when(take_after).then("after_ts").otherwise("before_ts"),
        other_publisher=pl.when(take_after).then("after_publisher").otherwise("before_publisher"),
        gap_s=pl.when(take_after).then("after_gap").otherwise("before_gap"),
    )
    return pairs.filter(pl.col("gap_s") <= pl.col("tolerance")).select(PAIR_COLUMNS).sort("ts", "rid")


def scheduler_pairs(doubled: pl.DataFrame) -> pl.DataFrame:
    """The doubled sends once per pair, ordered by scheduler name: publisher_a, publisher_b, rid_a,
    ts_a, rid_b, ts_b, job_type, entry (publisher_a's send first in name order, not in time)."""
    a_first = pl.col("publisher") < pl.col("other_publisher")
    return doubled.select(
        pl.when(a_first).then("publisher").otherwise("other_publisher").alias("publisher_a"),
        pl.when(a_first).then("other_publisher").otherwise("publisher").alias("publisher_b"),
        pl.when(a_first).then("rid").otherwise("other_rid").alias("rid_a"),
        pl.when(a_first).then("ts").otherwise("other_ts").alias("ts_a"),
        pl.when(a_first).then("other_rid").otherwise("rid").alias("rid_b"),
        pl.when(a_first).then("other_ts").otherwise("ts").alias("ts_b"),
        "job_type", "entry",
    ).unique(["rid_a", "rid_b"], keep="first").sort(pl.min_horizontal("ts_a", "ts_b"), "rid_a")

"""The canonical event table: its columns, their types, and the lifecycle kinds."""

from __future__ import annotations

import polars as pl

KINDS = (
    "publish", "receive", "start", "side_effect", "side_effect_result", "commit", "ack",
    "finish", "fail", "retry", "lease_expired", "lease_extended", "claim", "claim_lost", "dedup_hit",
    "lock_acquire", "lock_release", "lock_denied", "lock_expired", "deploy_start",
    "deploy_finish", "worker_start", "stop_signal", "worker_exit", "worker_killed", "process_killed", "other",
)

# Identifier columns that can link records into one business action (see correlation).
ID_COLUMNS = (
    "job_id", "event_id", "idempotency_key", "notification_id", "delivery_id", "order_id",
    "user_id", "tenant_id", "request_id", "provider_message_id",
)

# Columns whose alias values are read as numbers after mapping (Int32 and Float64).
INT_COLUMNS = ("attempt", "exit_code")
FLOAT_COLUMNS = ("duration_ms", "ttl_s", "visibility_timeout_s", "grace_period_s")

# Where the log pipeline collected the record, as its export names it (Filebeat's `log.offset`,
# Cloud Logging's `insertId`, the journal's `__CURSOR`, CloudWatch's `eventId`): one record
# delivered twice by the pipeline holds it twice, two records a service wrote alike two of them
# (dupfind.echoes). Provenance: never an id that links records.
ORIGIN_COLUMN = "origin_id"

# Text columns fed by field aliases (rules/fields.toml), in display order.
TEXT_COLUMNS = (
    "name", "level", "message", *ID_COLUMNS, "worker_id", "process_id", "deployment_id",
    "queue", "job_type", "service", "action", "provider", "provider_idempotency", "status", "result", "lock_key", "lock_owner",
    "error", "stack_trace", "stream", "object_kind", "object_name", ORIGIN_COLUMN, "timeout_name",
)

# A queue's lease as each platform states it and names it: alias target -> (its name in a
# finding's words, seconds per unit). Each feeds `visibility_timeout_s` (the first stated, in this
# order) and `timeout_name` (a Kafka consumer's max.poll.interval.ms is not a visibility timeout).
STATED_TIMEOUTS = {
    "visibility_timeout_s": ("visibility timeout", 1.0),
    "visibility_timeout_ms": ("visibility timeout", 0.001),
    "ack_deadline_s": ("ack deadline", 1.0),
    "ack_deadline_ms": ("ack deadline", 0.001),
    "ack_wait_s": ("ack wait", 1.0),
    "consumer_timeout_ms": ("consumer_timeout", 0.001),
    "max_poll_interval_ms": ("max.poll.interval.ms", 0.001),
}
# A Kafka record's coordinates and the consumer group that read it (dupfind.record_ids): a job id.
RECORD_COORDINATES = ("kafka_partition", "kafka_offset", "consumer_group")
TIMEOUT_NAME = "visibility timeout"  # a timeout configured, or inferred from redelivery gaps

# Alias targets that are not columns themselves but feed one.
DERIVED_ALIAS_TARGETS = {
    "ts", "duration_s", "retry_count", *STATED_TIMEOUTS, *RECORD_COORDINATES,
} - {"visibility_timeout_s"}


def _ts_type() -> pl.DataType:
    return pl.Datetime("us", "UTC")


def __getattr__(name: str):
    # TS_TYPE, the type of `ts`, and ID_TYPE, the type of `action_id` and `exec_id`, are made when
    # first used, not at import: a command answered from the cache never loads polars.
    if name == "TS_TYPE":
        return _ts_type()
    if name == "ID_TYPE":
        # 4 bytes: two billion actions or executions is far beyond any export, and at 8 the two
        # columns held 15 MiB of the table at 1M lines where they now hold 7.6.
        return pl.Int32
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def canonical_schema(business_keys: tuple[str, ...] = ()) -> dict[str, pl.DataType]:
    """Column name -> dtype of the canonical table, including configured business keys."""
    schema: dict[str, pl.DataType] = {"ts": _ts_type(), "kind": pl.String}
    for col in TEXT_COLUMNS:
        schema[col] = pl.String
    for col in business_keys:
        schema.setdefault(col, pl.String)
    schema.update(dict.fromkeys(INT_COLUMNS, pl.Int32))
    schema.update(dict.fromkeys(FLOAT_COLUMNS, pl.Float64))
    schema["ts_naive"] = pl.Boolean
    # Where each record comes from. Line numbers in 4 bytes (a file of four billion lines is
    # terabytes): at 8 they held 7.6 MiB of the table at 1M lines where they now hold 3.8.
    schema.update({"source": pl.String, "line": pl.UInt32, "format": pl.String})
    return schema


def alias_targets(business_keys: tuple[str, ...] = ()) -> set[str]:
    """Every name a field alias may map to."""
    return (
        set(TEXT_COLUMNS) | set(business_keys) | set(INT_COLUMNS) | set(FLOAT_COLUMNS)
        | DERIVED_ALIAS_TARGETS
    )


# Text columns are held as Categorical in the assembled table: 4 bytes a row instead of a
# 16-byte string view, and each distinct text once. The ids and messages, which name as many
# things as there are actions or lines, are held as codes into a dictionary of the table's own
# instead (dupfind.textcodes).
def stored_dtype(dtype: pl.DataType) -> pl.DataType:
    """The dtype a canonical column other than the coded ones is held in once the table is assembled."""
    return pl.Categorical if dtype == pl.String else dtype


# Text columns that name a few things each (kinds, workers, deploys, queues, files...), against
# the ids and messages, which name as many things as there are actions or lines, and the free
# text of errors and results (which often carry an id). Once the table is assembled they share
# one pool of their own with 2-byte codes (`label_dtype`).
LABEL_COLUMNS = (
    "kind", "name", "level", "worker_id", "process_id", "deployment_id", "queue", "job_type", "service", "action",
    "provider", "status", "lock_owner", "stream", "object_kind", "object_name", "timeout_name", "source", "format",
)
LABEL_TEXTS_MAX = 60_000  # distinct texts over every label column; 2-byte codes hold 65,536


def label_dtype() -> pl.DataType:
    """A Categorical with 2-byte codes over a pool of its own, for the label columns of one table."""
    return pl.Categorical(pl.Categories.random(physical=pl.UInt16))


# Below this many rows an eager frame's Categorical columns are cast: the texts a cast copies take
# less than shared_strings' steps cost in time (a trace's records, 21 such columns: 2-3 ms each).
SHARED_STRINGS_MIN_ROWS = 4096


def as_strings(frame: pl.DataFrame | pl.LazyFrame):
    """`frame` with its Categorical columns as String: for small derived frames that meet
    string literals, string functions or frames built from Python values."""
    cats = [c for c, t in frame.collect_schema().items() if isinstance(t, pl.Categorical)]
    if not cats:
        return frame
    if isinstance(frame, pl.LazyFrame) or frame.height < SHARED_STRINGS_MIN_ROWS:
        return frame.with_columns(pl.col(c).cast(pl.String) for c in cats)
    return frame.with_columns(shared_strings(frame.get_column(c)) for c in cats)


def shared_strings(column: pl.Series) -> pl.Series:
    """A Categorical column as String whose rows point at one copy of each distinct text: a cast
    copies each row's text (a worker's 32-byte name on each of 97k executions: 5.5 MiB of pages
    where this takes 1.5, a 16-byte view a row)."""
    distinct = column.drop_nulls().unique()
    codes = distinct.to_physical()
    order = codes.arg_sort()
    codes, texts = codes.gather(order), distinct.cast(pl.String).gather(order)
    physical = column.to_physical()
    at = pl.select(pl.when(physical.is_not_null()).then(codes.search_sorted(physical))).to_series()
    return texts.gather(at).alias(column.name)

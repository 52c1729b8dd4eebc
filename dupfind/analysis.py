"""The analysis context detectors read from: correlated tables and derived facts, computed once."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import cached_property

import polars as pl

from dupfind import textcodes
from dupfind.config import Config
from dupfind.correlate import Correlation, GlueWarning
from dupfind.deploys import DEPLOY_KINDS, DeployModel, build_deploy_model
from dupfind.effects import COUNTED, duplicate_effects, duplicated_actions, repeated_requests, side_effect_requests
from dupfind.finding_details import EVIDENCE_LIMIT, EXECUTION_ID_KEYS, DetailRequest, fill_details, ids_and_spans
from dupfind.findings import Finding
from dupfind.locks import lock_events, lock_holds, orphan_releases
from dupfind.queue_health import action_attributes, execution_durations
from dupfind.schedules import RUN_AFTER_SEND_S, doubled_sends, scheduled_sends, scheduler_pairs
from dupfind.schema import ID_COLUMNS, TIMEOUT_NAME, as_strings
from dupfind.stack_lines import CRASH_HEADER
from dupfind.textcodes import Texts
from dupfind.timeouts import KILL_HANDBACK_S, InferredTimeout, infer_timeouts, redelivery_gaps

EVIDENCE_KINDS = (
    "publish", "receive", "start", "side_effect", "side_effect_result", "commit", "ack", "finish",
    "fail", "retry", "lease_expired", "claim", "claim_lost", "dedup_hit", "lock_acquire",
    "lock_release", "lock_denied", "lock_expired",
)
# A Celery node is named `<name>@<host>`: two nodes of one host read one clock.
_NODE_HOST = r"@([^@\s]+)$"


def other_hosts(a: str, b: str) -> pl.Expr:
    """Whether the workers of columns `a` and `b` run on different hosts, whose clocks may differ
    by the skew tolerance: different workers, but not two `<name>@<host>` nodes of one host."""
    def host(column: str) -> pl.Expr:
        name = pl.col(column).cast(pl.String)
        return pl.coalesce(name.str.extract(_NODE_HOST, 1), name)
    return (pl.col(a).cast(pl.String) != pl.col(b).cast(pl.String)) & (host(a) != host(b))


WORKER_END_KINDS = ("worker_killed", "worker_exit", "stop_signal", "process_killed")
# A broker's line: a client's connection ended without a close (presets/rabbitmq.toml).
CONNECTION_LOST = "consumer_connection_lost"
TIMELINE_ID_KEYS = ("job_id", "event_id", "idempotency_key", "notification_id", "order_id")
# Ids that belong to one action only but are not link keys: a record carrying one of the action's
# values but no link key (an HTTP access line with the request id, a provider webhook) is part of
# its trace.
PER_ACTION_IDS = ("request_id", "provider_message_id")


def id_value_hash(values: pl.Series) -> pl.Series:
    """A text's hash as AnalysisContext.id_values keeps it (stable for one polars version, which
    the result cache's keys cover)."""
    return values.cast(pl.String).hash(seed=0)


# Rows checked for order at a time (`_in_order`): its shifted copies stay small.
ORDER_CHECK_ROWS = 1 << 20


def _in_order(frame: pl.DataFrame, order: tuple[str, ...]) -> bool:
    """Whether the rows are sorted by the `order` columns (no nulls in them), as a sort with
    maintain_order would leave them."""
    if not order:
        return True
    if any(frame[c].null_count() for c in order):
        return False
    ordered = None
    for c in reversed(order):
        now, before = pl.col(c), pl.col(c).shift(1)
        ordered = (now >= before) if ordered is None else (now > before) | ((now == before) & ordered)
    for start in range(0, frame.height, ORDER_CHECK_ROWS):
        part = frame.slice(max(start - 1, 0), ORDER_CHECK_ROWS + (start > 0)).select(order)
        if not part.select(ordered.fill_null(True).all()).item():
            return False
    return True


def _narrowed(keys: pl.Series) -> pl.Series:
    """Integer keys as UInt32 when they fit (action ids do): sorting 4-byte keys instead of 8
    takes about 45 MiB less at 5M lines."""
    if keys.dtype in (pl.Int64, pl.UInt64, pl.Int32) and keys.null_count() < keys.len() and keys.min() >= 0 and keys.max() < 1 << 32:
        return keys.cast(pl.UInt32)
    return keys


class _Spans:
    """Key -> (first position, count) of a GroupIndex, for keys in ascending order. Integer keys
    (action ids) are held in 8-byte arrays and found by bisection: a dict of Python ints and
    tuples took 63 MB for the 460k actions of a 5M-line export, and an analysis holds three."""

    def __init__(self, keys: pl.Series, counts: pl.Series) -> None:
        starts = counts.cum_sum() - counts
        self.numeric = keys.dtype in (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)
        if self.numeric:
            self.keys, self.starts, self.counts = (array("q", s.cast(pl.Int64).to_list()) for s in (keys, starts, counts))
        else:
            self.by_key = dict(zip(keys.to_list(), zip(starts.to_list(), counts.to_list())))

    def get(self, value) -> tuple[int, int] | None:
        if not self.numeric:
            return self.by_key.get(value)
        if not isinstance(value, int):
            return None
        i = bisect.bisect_left(self.keys, value)
        if i < len(self.keys) and self.keys[i] == value:
            return self.starts[i], self.counts[i]
        return None


class GroupIndex:
    """Rows of a frame grouped by one key, for lookups per key without a full-table filter.

    Keeps row positions, not a sorted copy of the frame: a lookup gathers its few rows, from
    `frame` or, when given, through `rows` (positions -> rows of a wider frame, such as the
    table's AnalysisContext.rows, of which `frame` holds the key and order columns). The first
    DIRECT_LOOKUPS lookups filter the frame instead: a trace asks for one action, where sorting
    the whole frame would cost a hundred filters."""

    DIRECT_LOOKUPS = 16

    def __init__(self, frame: pl.DataFrame | Callable[..., pl.DataFrame], key: str, order: tuple[str, ...] = (),
                 rows: Callable[[pl.Series], pl.DataFrame] | None = None) -> None:
        """`frame`: the frame, or a function giving its columns by name (such as the table's
        AnalysisContext.columns: a direct lookup then reads only the key column)."""
        self.columns = frame if callable(frame) else frame.select
        self.rows = rows or (lambda positions: frame[positions])
        self.key, self.order = key, order
        self.lookups = 0
        self.spans: _Spans | None = None
        self._keys: pl.Series | None = None

    def _build(self) -> None:
        frame = self.columns(self.key, *self.order)
        if _in_order(frame, self.order):
            # Rows already in order (the table is, by time, file and line): a stable sort by the
            # key alone gives the same positions: +108 MiB at its peak at 5M lines instead of +307.
            keys = _narrowed(frame[self.key])
            positions = keys.to_frame().select(pl.arg_sort_by(self.key, nulls_last=True, maintain_order=True)).to_series()
            self.positions = positions.head(keys.len() - keys.null_count()).cast(pl.UInt32)
            runs = keys.gather(self.positions).rle().struct.unnest()
            self.spans = _Spans(runs["value"], runs["len"])
        else:
            keyed = frame.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_pos"))
            keyed = keyed.filter(pl.col(self.key).is_not_null()).sort(self.key, *self.order, maintain_order=True)
            self.positions = keyed["_pos"]
            counts = keyed.group_by(self.key, maintain_order=True).len()
            self.spans = _Spans(counts[self.key], counts["len"])
        self._keys = None

    def get(self, value) -> pl.DataFrame:
        if self.spans is None and self.lookups < self.DIRECT_LOOKUPS:
            self.lookups += 1
            if self._keys is None:
                self._keys = self.columns(self.key).get_column(self.key)
            # The rows carry the order columns: sorted after they are gathered, in position order
            # first, as a sort of the keyed frame would order them.
            found = self.rows((self._keys == value).arg_true().cast(pl.UInt32))
            return found.sort(*self.order, maintain_order=True) if self.order else found
        if self.spans is None:
            self._build()
        span = self.spans.get(value)
        return self.rows(self.positions.slice(span[0], span[1]) if span else self.positions.clear())


def id_column_names(config: Config) -> tuple[str, ...]:
    """The columns an id may be searched in (`trace ID`): the id, link and business key columns."""
    return (*ID_COLUMNS, *config.link_keys, *config.business_keys)


def stated_timeouts(stated: pl.DataFrame, *by: str) -> dict[tuple, tuple[float, str]]:
    """Timeouts stated in the logs, from the records that state one (`queue`,
    `visibility_timeout_s`, `timeout_name` and the `by` columns), per queue and `by` ('' = any
    queue: all of them): the median of each one's statements, and the name most of them give
    (`max.poll.interval.ms`, `ack deadline`; the first by name of those tied, `visibility timeout`
    where none is given)."""
    if not stated.height:
        return {}
    name = pl.col("timeout_name") if "timeout_name" in stated.columns else pl.lit(None, dtype=pl.String)
    stated = stated.with_columns(pl.col("queue").fill_null(""), name.fill_null(TIMEOUT_NAME).alias("timeout_name"))
    found: dict[tuple, tuple[float, str]] = {}
    for group in (stated, stated.with_columns(queue=pl.lit(""))):
        per = group.group_by("queue", *by).agg(
            pl.col("visibility_timeout_s").median(), pl.col("timeout_name").mode().sort().first(),
        ).sort("queue", *by)
        for *key, value, named in per.rows():
            found.setdefault(tuple(key), (float(value), named))
    return found


# Frames the detectors share that the findings' details do not read (the summary reads some, before
# them): 33 MiB of a 1M-line analysis (execution durations 10.5, side-effect requests 8, each
# action's queue 7.4, side effects counted 5.4, execution pairs 1.5), real pages, about 4x what
# polars estimates.
DETECTOR_FRAMES = ("execution_durations", "side_effects", "action_attributes", "effect_counts", "pairs")


@dataclass
class AnalysisContext:
    """Everything a detector may need; expensive parts are computed lazily and shared."""

    correlation: Correlation
    config: Config
    skew_s: float = 0.5
    timeouts: dict[str, float] = field(default_factory=dict)  # queue -> visibility timeout (s)
    _details: dict[int, DetailRequest] = field(default_factory=dict, init=False, repr=False)
    # What a detector could not judge and says instead of findings (the report's warnings).
    detector_warnings: list[str] = field(default_factory=list, init=False, repr=False)

    @property
    def table(self) -> pl.DataFrame:
        """The correlated table, less the near-empty columns the correlation holds apart (see
        correlate.APART_COLUMNS): `columns`, `rows` and `table_with` give those too."""
        return self.correlation.table

    def table_with(self, *names: str) -> pl.DataFrame:
        """The table with these of the columns held apart (a whole-table reader's copy)."""
        return self.correlation.table_with(*names)

    @property
    def texts(self) -> Texts:
        """The dictionary of the table's coded columns (ids, messages): `texts.decoded(frame)`."""
        return self.correlation.texts

    def present_columns(self, *names: str) -> list[str]:
        return self.correlation.present_columns(*names)

    def columns(self, *names: str) -> pl.DataFrame:
        """Some columns of the table (a cached table reads only these)."""
        return self.correlation.columns(*names)

    def rows(self, rids) -> pl.DataFrame:
        """Rows of the table by rid, in the order given (a cached table reads only the parts that hold them)."""
        return self.correlation.rows(rids)

    def id_columns(self) -> list[str]:
        """The columns an id is searched in (`trace ID`): the id, link and business key columns present."""
        return self.present_columns(*id_column_names(self.config))

    @cached_property
    def id_values(self) -> pl.DataFrame:
        """Per id column (`column`), the hashes of its distinct values (`hashes`, id_value_hash), so
        that a search for an id reads only the columns that may hold it. Prepared when an analysis
        is stored in the cache (pipeline.PREPARED_FACTS): from the cached table it would mean
        reading every id column, what it spares. Hashes rather than the texts: 8 bytes a value,
        worked out a column at a time (the texts of every id column held at once took 130 MB more
        at 5M lines); a collision only means one column read in vain."""
        rows = []
        for column in self.id_columns():
            values = self.texts.as_text(self.columns(column).get_column(column).drop_nulls().unique())
            rows.append((column, id_value_hash(values)))
        return pl.DataFrame(
            {"column": [c for c, _ in rows], "hashes": [h for _, h in rows]},
            schema={"column": pl.String, "hashes": pl.List(pl.UInt64)},
        )

    def read_ahead(self, *names: str) -> None:
        """A view is about to use these frames ("executions", "actions") and derived properties: a
        context the result cache backs starts reading them, in this order, on a thread of its own
        (result_cache.read_ahead); this one derives them when used."""

    @property
    def actions(self) -> pl.DataFrame:
        return self.correlation.actions

    @property
    def executions(self) -> pl.DataFrame:
        return self.correlation.executions

    @cached_property
    def counted_actions(self) -> int:
        """Actions the summary counts: all but those whose every record another format of its file
        tells again (a Sidekiq jid's `start` / `done` beside ActiveJob's lines of its job id)."""
        return self.actions.height - self.told_again_among()

    def told_again_among(self, ids: pl.Series | None = None) -> int:
        """How many of these actions (all, without `ids`) the summary does not count (counted_actions)."""
        actions = self.actions
        if "told_again" not in actions.columns or not actions["told_again"].any():
            return 0
        told = actions.filter("told_again")
        return told.height if ids is None else told.filter(pl.col("action_id").is_in(ids.implode())).height

    @property
    def warnings(self) -> list[GlueWarning]:
        return self.correlation.warnings

    def action_records(self, *columns: str) -> pl.LazyFrame:
        """Records that belong to an action, lazily, with these columns and action_id: each reader
        collects just the rows and columns it needs (a cached table reads only those columns)."""
        return self.columns(*dict.fromkeys(("action_id", *columns))).lazy().filter(pl.col("action_id").is_not_null())

    @cached_property
    def _records_index(self) -> GroupIndex:
        return GroupIndex(self.columns, "action_id", ("ts", "source", "line"), rows=self.rows)

    @cached_property
    def _executions_index(self) -> GroupIndex:
        return GroupIndex(self.executions, "action_id", ("start",))

    @cached_property
    def _effects_index(self) -> GroupIndex:
        return GroupIndex(self.side_effects, "action_id", ("ts",))

    @cached_property
    def _identities(self) -> pl.Series | dict[int, str]:
        """Identity by action id: the actions' identity column, read by position, when action ids
        are positions (as correlation numbers them); a dict otherwise. A dict of every action's
        identity as Python text took 23 MB at 1M lines, for the few thousand findings that ask."""
        ids, identities = self.actions["action_id"], self.actions["identity"]
        if ids.len() and (ids == pl.int_range(0, ids.len(), eager=True)).all():
            return identities
        return dict(zip(ids.to_list(), identities.to_list()))

    def records_of(self, action_id: int) -> pl.DataFrame:
        """Every record of one action, in time order."""
        return self.texts.decoded(as_strings(self._records_index.get(action_id)))

    def executions_of(self, action_id: int) -> pl.DataFrame:
        return self._executions_index.get(action_id)

    def side_effects_of(self, action_id: int) -> pl.DataFrame:
        return self.texts.decoded(self._effects_index.get(action_id))

    @cached_property
    def side_effects(self) -> pl.DataFrame:
        """One row per side-effect request with its outcome (see effects.py)."""
        return side_effect_requests(self.table_with("error"), self.texts)

    @cached_property
    def effect_counts(self) -> pl.DataFrame:
        return duplicate_effects(self.side_effects)

    @cached_property
    def duplicate_requests(self) -> pl.DataFrame:
        """When each extra side effect of a certain or likely duplicate was requested (`ts`, in order)."""
        if self.side_effects.height == 0:
            return pl.DataFrame(schema={"ts": self.table.schema["ts"]})
        return repeated_requests(self.side_effects, self.effect_counts).select(pl.col("ts").sort())

    @cached_property
    def effect_marks(self) -> pl.DataFrame:
        """Per execution with a counted side-effect request (success or uncertain): when its first
        was (`effect_at`), and whether it repeated one of a certain or likely duplicate action that
        another execution made first (`repeat`). What a timeline entry shows of its side effects."""
        duplicated = duplicated_actions(self.effect_counts)
        counted = self.side_effects.filter(pl.col("outcome").is_in(COUNTED)).sort("ts")
        first = counted.group_by("action_id", "effect").agg(pl.col("exec_id").first().alias("_first_exec"))
        repeats = (
            counted.join(first, on=["action_id", "effect"])
            .filter(pl.col("action_id").is_in(duplicated.implode()) & (pl.col("exec_id") != pl.col("_first_exec")))
            .select("exec_id", repeat=pl.lit(True))
            .unique("exec_id")
        )
        return (
            counted.group_by("exec_id").agg(pl.col("ts").min().alias("effect_at")).drop_nulls("exec_id")
            .join(repeats, on="exec_id", how="left").with_columns(pl.col("repeat").fill_null(False))
        )

    @cached_property
    def has_side_effect_records(self) -> bool:
        return self.side_effects.height > 0

    @cached_property
    def timeout_statements(self) -> pl.DataFrame:
        """Queue and visibility timeout of the records that state one."""
        names = self.present_columns("queue", "visibility_timeout_s", "timeout_name", "service")
        return as_strings(self.columns(*names).filter(pl.col("visibility_timeout_s").is_not_null()))

    @cached_property
    def queue_timeouts(self) -> dict[tuple, tuple[float, str]]:
        """Timeouts stated in the logs per queue ('' = any queue): (median, name) by (queue,)."""
        return stated_timeouts(self.timeout_statements)

    @cached_property
    def stated_timeouts(self) -> dict[str, float]:
        """Visibility timeouts stated in the logs (per queue; '' = any queue)."""
        return {queue: value for (queue,), (value, _) in self.queue_timeouts.items()}

    @cached_property
    def stated_timeout_names(self) -> dict[str, str]:
        """What the logs call each queue's stated timeout (per queue; '' = any queue)."""
        return {queue: name for (queue,), (_, name) in self.queue_timeouts.items()}

    @cached_property
    def service_timeouts(self) -> dict[tuple, tuple[float, str]]:
        """Timeouts stated per queue and service ('' = any queue): two consumer groups of one topic
        state their own (a notifier's max.poll.interval.ms of 30 s, an indexer's 300 s)."""
        stated = self.timeout_statements
        if "service" not in stated.columns:
            return {}
        return stated_timeouts(stated.filter(pl.col("service").is_not_null()), "service")

    @cached_property
    def action_service(self) -> dict[int, str]:
        """The service most of each action's records name, where some name one."""
        if not self.present_columns("service"):
            return {}
        rows = as_strings(self.action_records("service").filter(pl.col("service").is_not_null()).collect())
        per = rows.group_by("action_id").agg(pl.col("service").mode().sort().first())
        return dict(per.rows())

    def action_timeout(self, action_id: int) -> tuple[float, str] | None:
        """timeout_source of the action's queue, as its own service states it where it does."""
        return self.timeout_source(self.action_queue.get(action_id), self.action_service.get(action_id))

    def action_timeout_name(self, action_id: int) -> str:
        queue, service = self.action_queue.get(action_id), self.action_service.get(action_id)
        return self._timeout_name(queue, self.timeout_source(queue, service), service)

    def action_timeout_words(self, action_id: int) -> str | None:
        return self.timeout_words(self.action_queue.get(action_id), self.action_service.get(action_id))

    @cached_property
    def known_timeouts(self) -> dict[str, float]:
        """Visibility timeouts stated in the logs, overridden by config and --timeout."""
        return {**self.stated_timeouts, **self.timeouts}

    @cached_property
    def action_attributes(self) -> pl.DataFrame:
        """Queue and job type of each action."""
        return as_strings(action_attributes(self.action_records("queue", "job_type")))

    @cached_property
    def execution_durations(self) -> pl.DataFrame:
        """How long each execution held its message (receive to ack/finish/fail), with its queue
        and its action's service."""
        durations = execution_durations(self.executions, self.action_attributes)
        services = self.action_service
        service = pl.col("action_id").replace_strict(services, default=None, return_dtype=pl.String) if services \
            else pl.lit(None, dtype=pl.String)
        return durations.with_columns(service.alias("service"))

    @cached_property
    def lease_extensions(self) -> dict[str, int]:
        """Lease extensions (heartbeats) logged per queue ('' = unknown queue)."""
        queues = self.action_attributes.select("action_id", pl.col("queue").alias("action_queue"))
        rows = as_strings(self.columns("kind", "action_id", "queue").filter(pl.col("kind") == "lease_extended").drop("kind")).join(
            queues, on="action_id", how="left"
        )
        counts = rows.group_by(pl.coalesce("queue", "action_queue").fill_null("").alias("q")).len()
        return dict(counts.rows())

    @cached_property
    def redelivery_gaps(self) -> pl.DataFrame:
        """Deliveries of a message that no failure or retry asked for, with the gap since the
        previous one; `after_kill`: the previous run's worker was killed just before it."""
        table = self.columns(*self.present_columns("job_id", "action_id", "echo", "kind", "rid", "ts", "queue", "exec_id", "name"))
        gaps = redelivery_gaps(table, self.action_attributes.select("action_id", "queue"), self.texts)
        handed_back: list[int] = []
        if gaps.height and self.exec_killed.height:
            near = gaps.select("rid", "prev_exec_id").join(
                self.exec_killed.select(pl.col("exec_id").alias("prev_exec_id"), "kill_ts"), on="prev_exec_id",
            )
            if near.height:
                after = (self.rows(near["rid"].to_list())["ts"] - near["kill_ts"]).dt.total_microseconds() / 1e6
                handed_back = near.filter(after.is_between(-self.skew_s, KILL_HANDBACK_S))["rid"].to_list()
        return gaps.with_columns(after_kill=pl.col("rid").is_in(handed_back))

    @cached_property
    def inferred_timeouts(self) -> dict[str, InferredTimeout]:
        """Visibility timeouts estimated from the redelivery gaps, per queue."""
        return infer_timeouts(self.redelivery_gaps)

    def timeout_source(self, queue: str | None, service: str | None = None) -> tuple[float, str] | None:
        """The visibility timeout of a queue and where it comes from: 'configured' (config or
        --timeout), 'logged' (by `service` first, where given), or 'inferred' from redelivery gaps
        when nothing states it."""
        for key in ([queue] if queue else []) + [""]:
            if key in self.timeouts:
                return self.timeouts[key], "configured"
            if service is not None and (key, service) in self.service_timeouts:
                return self.service_timeouts[(key, service)][0], "logged"
            if key in self.stated_timeouts:
                return self.stated_timeouts[key], "logged"
        inferred = self.inferred_timeouts.get(queue or "")
        if inferred is None and not queue and len(self.inferred_timeouts) == 1:
            inferred = next(iter(self.inferred_timeouts.values()))
        if inferred is not None and inferred.reliable:
            return inferred.estimate_s, "inferred"
        return None

    def timeout_for(self, queue: str | None) -> float | None:
        found = self.timeout_source(queue)
        return found[0] if found else None

    def timeout_name(self, queue: str | None, service: str | None = None) -> str:
        """What the queue's timeout is called: as the logs that state it call it (a Kafka
        consumer's `max.poll.interval.ms`, Pub/Sub's `ack deadline`), else `visibility timeout`."""
        return self._timeout_name(queue, self.timeout_source(queue, service), service)

    def _timeout_name(self, queue: str | None, found: tuple[float, str] | None, service: str | None = None) -> str:
        if found is None or found[1] != "logged":
            return TIMEOUT_NAME
        for value, name in self.service_statements(queue, service):
            if value == found[0]:
                return name
        names = self.stated_timeout_names
        return names.get(queue or "") or names.get("") or TIMEOUT_NAME

    def service_statements(self, queue: str | None, service: str | None) -> list[tuple[float, str]]:
        """What `service`'s consumers state of the queue's timeout, then of any queue's: (median, name)."""
        if service is None:
            return []
        return [self.service_timeouts[key] for key in ((queue or "", service), ("", service)) if key in self.service_timeouts]

    def timeout_words(self, queue: str | None, service: str | None = None) -> str | None:
        """`visibility timeout 30 s`, `max.poll.interval.ms 30 s` (as the logs stating it name it),
        `inferred visibility timeout 50.879 s` (no configuration nor log states it: an estimate
        from redelivery gaps), None when unknown."""
        found = self.timeout_source(queue, service)
        if found is None:
            return None
        return f"{'inferred ' if found[1] == 'inferred' else ''}{self._timeout_name(queue, found, service)} {found[0]:g} s"

    @cached_property
    def action_queue(self) -> dict[int, str]:
        rows = self.action_attributes.filter(pl.col("queue").is_not_null()).select("action_id", "queue")
        return dict(rows.iter_rows())

    @cached_property
    def pairs(self) -> pl.DataFrame:
        """Ordered pairs (earlier, later) of executions of one action, with overlap and gap."""
        ex = self.executions.select(
            "exec_id", "action_id", "identity", "worker_id", "start", "end", "entry_ts", "receive_ts",
            "fail_ts", "completed", "failed", "attempt", "job_ids", "locks", "guarded", "deployment_id",
        ).filter(pl.col("action_id").is_duplicated())  # an action run once has no pair: 5% of the executions at 1M lines
        left = ex.rename({c: f"{c}_a" for c in ex.columns if c != "action_id"})
        right = ex.rename({c: f"{c}_b" for c in ex.columns if c != "action_id"})
        joined = left.join(right, on="action_id", maintain_order="left_right").filter(
            (pl.col("start_a") < pl.col("start_b"))
            | ((pl.col("start_a") == pl.col("start_b")) & (pl.col("exec_id_a") < pl.col("exec_id_b")))
        )
        overlap_end = pl.min_horizontal("end_a", "end_b")
        overlap_s = (overlap_end - pl.col("start_b")).dt.total_microseconds() / 1e6
        # How far one run's clock must move for the two not to overlap: a short run well inside a
        # long one overlaps it whatever the clocks' skew, though its overlap is short.
        margin_s = pl.min_horizontal(pl.col("end_a") - pl.col("start_b"), pl.col("end_b") - pl.col("start_a")).dt.total_microseconds() / 1e6
        cross_host = other_hosts("worker_id_a", "worker_id_b")
        return joined.with_columns(
            overlap_s=pl.when(overlap_s > 0).then(overlap_s).otherwise(0.0),
            margin_s=margin_s,
            gap_s=(pl.coalesce("receive_ts_b", "entry_ts_b", "start_b") - pl.coalesce("receive_ts_a", "entry_ts_a", "start_a")).dt.total_microseconds() / 1e6,
            cross_host=cross_host,
        ).with_columns(
            overlap=pl.when(pl.col("overlap_s") <= 0).then(pl.lit("none"))
            .when(pl.col("cross_host") & (pl.col("margin_s") < self.skew_s)).then(pl.lit("possible"))
            .otherwise(pl.lit("certain"))
        ).drop("margin_s")

    @cached_property
    def lock_events(self) -> pl.DataFrame:
        """Lock acquire/release/expiry records with the holder they speak for (see locks.py)."""
        return lock_events(self.table)

    @cached_property
    def lock_holds(self) -> pl.DataFrame:
        """One row per lock acquisition with its release, TTL end and guarded execution."""
        return lock_holds(self.lock_events, self.executions)

    @cached_property
    def lock_holders(self) -> set[int]:
        """Executions that acquired a lock."""
        return set(self.lock_holds["exec_id"].drop_nulls().to_list())

    @cached_property
    def lock_holds_of(self) -> dict[int, list[dict]]:
        """Each lock holder's holds as rows, `_pos` their place in lock_holds."""
        holds = self.lock_holds.with_row_index("_pos").filter(pl.col("exec_id").is_not_null())
        return holds.rows_by_key("exec_id", named=True, include_key=True)

    @cached_property
    def orphan_release_times(self) -> dict[str, list]:
        """The times of each key's orphan lock releases, sorted."""
        orphans = self.orphan_lock_releases.filter(pl.col("ts").is_not_null()).sort("ts")
        times = orphans.group_by("key", maintain_order=True).agg("ts")
        return dict(zip(times["key"].to_list(), times["ts"].to_list()))

    def orphan_release_between(self, key: str, low, high) -> bool:
        """Whether a lock release that ended no hold of its holder fell in [low, high]."""
        times = self.orphan_release_times.get(key, [])
        index = bisect.bisect_left(times, low)
        return index < len(times) and times[index] <= high

    @cached_property
    def orphan_lock_releases(self) -> pl.DataFrame:
        """Lock releases that end no hold of their holder."""
        return orphan_releases(self.lock_events)

    @cached_property
    def worker_events(self) -> pl.DataFrame:
        """Stop signals, exits and kills per worker, and the lease expiries a worker logged outside
        any action (records of the worker, not of a job)."""
        return as_strings(self.columns(
            "rid", "ts", "kind", "worker_id", "name", "source", "line", "exit_code", "deployment_id", "action_id"
        ).filter(
            (pl.col("kind").is_in(WORKER_END_KINDS) | ((pl.col("kind") == "lease_expired") & pl.col("action_id").is_null()))
            & pl.col("worker_id").is_not_null()
        ).drop("action_id")).sort("ts")

    @cached_property
    def deploys(self) -> DeployModel:
        """Generations, worker lifetimes, deploy windows, interrupted executions (see deploys.py),
        and the runs a consumer's lost connection ended that only the broker's log tells."""
        model = build_deploy_model(self.table_with("exit_code", "grace_period_s"), self.executions, self.skew_s)
        if self.connection_drops[0]:
            told = self._ends_the_broker_told(model.interrupted)
            if told.height:
                kept = model.interrupted.join(told.select("exec_id"), on="exec_id", how="anti")
                model = replace(model, interrupted=pl.concat([kept, told]).sort("kill_ts", "exec_id"))
        return model

    def _ends_the_broker_told(self, interrupted: pl.DataFrame) -> pl.DataFrame:
        """Runs no kill or exit in the logs ended, that a broker's log tells: unfinished (no ack,
        failure or guard), their last record before a consumer's connection ended without a close
        (connection_drops), their process silent from then on, and one of that process's runs at the
        drop delivered again right after it (KILL_HANDBACK_S): RabbitMQ requeued what the dead
        connection held. kill_kind `connection_lost`, inferred; interrupted's columns. A run a later
        end of its worker seemed to cut (the exit of a process restarted under the worker's name)
        is told by the drop before it."""
        times, rids = self.connection_drops
        skew = timedelta(seconds=self.skew_s)
        runs = self.executions.filter(~pl.col("completed") & ~pl.col("failed") & ~pl.col("guarded")).select(
            "exec_id", "action_id", "worker_id", "work_pid", "start", stopped=pl.coalesce("work_end", "end"),
        ).join(interrupted.select("exec_id", "kill_ts"), on="exec_id", how="left")
        if runs.height == 0:
            return interrupted.clear()
        drops = pl.DataFrame({"drop_ts": times, "drop_rid": rids}, schema={
            "drop_ts": runs.schema["start"], "drop_rid": interrupted.schema["kill_rid"]})
        at = runs.with_columns(probe=pl.col("stopped") - skew).sort("probe").join_asof(
            drops, left_on="probe", right_on="drop_ts", strategy="forward",
        ).filter(
            pl.col("drop_ts").is_not_null() & (pl.col("start") <= pl.col("drop_ts") + skew)
            & (pl.col("kill_ts").is_null() | (pl.col("kill_ts") > pl.col("drop_ts") + skew))
        )
        later = self.executions.select("action_id", pl.col("exec_id").alias("later_id"),
                                       entry=pl.coalesce("entry_ts", "start"))
        back = at.join(later, on="action_id").filter(
            (pl.col("later_id") != pl.col("exec_id"))
            & pl.col("entry").is_between(pl.col("drop_ts") - skew, pl.col("drop_ts") + timedelta(seconds=KILL_HANDBACK_S))
        )["exec_id"]
        process = ["worker_id", "work_pid", "drop_ts"]
        at = at.filter(pl.col("exec_id").is_in(back.implode()).any().over(process)) if back.len() else at.clear()
        silent = [key for key in at.select(process).unique().rows() if self.silent_after(*key)]
        if not silent:
            return interrupted.clear()
        at = at.join(pl.DataFrame(silent, schema=at.select(process).schema, orient="row"), on=process, nulls_equal=True)
        return at.select(
            "exec_id", "worker_id", kill_ts="drop_ts", kill_rid="drop_rid",
            kill_kind=pl.lit("connection_lost"), inferred=pl.lit(True),
        ).select(interrupted.columns).cast(interrupted.schema)

    @cached_property
    def exec_killed(self) -> pl.DataFrame:
        """Executions cut short: their worker was killed, exited, or vanished after a stop signal
        while they were in flight (no ack, failure or guard): exec_id, kill_ts, kill_rid, kill_kind,
        inferred."""
        return self.deploys.interrupted

    def request_details(self, finding: Finding, **what) -> DetailRequest:
        """Register what a finding needs filled (see finding_details); answered by `fill_details`."""
        request = self._details.get(id(finding))
        if request is None:
            request = self._details[id(finding)] = DetailRequest(finding)
        for key, value in what.items():
            setattr(request, key, value)
        return request

    def attach_evidence(
        self, finding: Finding, rids: list[int], notes: dict[int, str] | None = None,
        executions: list[int] = (), kinds: tuple[str, ...] = EVIDENCE_KINDS, limit: int = EVIDENCE_LIMIT,
    ) -> None:
        """Evidence for a finding: these records plus the records of these executions of these kinds,
        in time order, at most `limit` (filled with every other finding's by `fill_details`)."""
        self.request_details(
            finding, rids=[int(r) for r in rids if r is not None], notes=dict(notes or {}),
            evidence_execs=list(executions), evidence_kinds=tuple(kinds), limit=limit, wants_evidence=True,
        )

    def release_detector_frames(self) -> None:
        """Forget the derived frames the detectors share (DETECTOR_FRAMES); a later use derives
        them again. For an analysis whose report is made of its findings alone, with nothing
        stored for later commands."""
        for name in DETECTOR_FRAMES:
            self.__dict__.pop(name, None)

    def fill_details(self) -> None:
        """Fill every registered finding's details in a few vectorised passes."""
        requests, self._details = list(self._details.values()), {}
        fill_details(self, requests)

    @cached_property
    def generation_of(self) -> dict[str, str | None]:
        return self.deploys.generation_of()

    def crash_exception(self, rid: int) -> str | None:
        """The exception of a worker's crash report (dupfind.crashes), when record `rid` is one."""
        if not self.present_columns("stack_trace", "message"):
            return None
        row = as_strings(self.texts.decoded(self.rows([rid]).select("kind", "message", "stack_trace"), "message")).row(0, named=True)
        if row["kind"] != "worker_exit" or not row["stack_trace"] or not CRASH_HEADER.match(row["message"] or ""):
            return None
        return row["stack_trace"]

    def message_of(self, rid: int, limit: int = 80) -> str | None:
        """The text of record `rid`, at most `limit` characters."""
        if not self.present_columns("message"):
            return None
        text = as_strings(self.texts.decoded(self.rows([rid]).select("message"), "message")).item(0, 0)
        return None if text is None else text if len(text) <= limit else text[: limit - 1] + "…"

    @cached_property
    def worker_lease_expiries(self) -> dict[str, tuple[list, list[int]]]:
        """Lease expiries a worker logged outside any action, per worker: (times, rids) in time
        order. The Kafka client's `consumer poll timeout has expired` and Celery's channel error
        on RabbitMQ's consumer timeout name no job: they end the lease of every message the
        worker held."""
        frame = self.worker_events.filter((pl.col("kind") == "lease_expired") & pl.col("ts").is_not_null()).sort("ts", "rid")
        if frame.height == 0:
            return {}
        grouped = frame.group_by("worker_id", maintain_order=True).agg("ts", "rid")
        return {w: (ts, rids) for w, ts, rids in grouped.iter_rows()}

    def worker_lease_expiry(self, worker_id: str | None, start, end, later_entry) -> list[int]:
        """The rids of the lease expiries (worker_lease_expiries) the worker of an execution
        running from `start` to `end` logged while it ran, before a later execution of its action
        began at `later_entry` (within the clock skew)."""
        times, rids = self.worker_lease_expiries.get(worker_id, ([], [])) if worker_id is not None else ([], [])
        skew = timedelta(seconds=self.skew_s)
        first = bisect.bisect_left(times, start - skew)
        return rids[first:bisect.bisect_right(times, min(end, later_entry) + skew)]

    @cached_property
    def connection_drops(self) -> tuple[list, list[int]]:
        """Times and rids, in time order, of a broker logging a client's connection ended without
        a close (RabbitMQ's `client unexpectedly closed TCP connection`, `missed heartbeats from
        client`): what that consumer held unacknowledged was requeued then (the deploy model reads
        them as the ends of the runs they cut: _ends_the_broker_told)."""
        names = self.present_columns("rid", "ts", "kind", "name")
        if "name" not in names:
            return [], []
        named = self.columns("name")["name"]
        if isinstance(named.dtype, pl.Categorical) and not named.dtype.categories.to_series().eq(CONNECTION_LOST).any():
            return [], []  # no record so named (the label pool holds every name): no scan of the rows
        frame = self.columns(*names).filter(
            (pl.col("kind") == "other") & pl.col("ts").is_not_null() & (pl.col("name").cast(pl.String) == CONNECTION_LOST)
        ).sort("ts", "rid")
        return frame["ts"].to_list(), frame["rid"].to_list()

    @cached_property
    def _last_records(self) -> dict[tuple[str, str | None], object]:
        """The time of each worker's last record, by (worker, None), and of each of its processes',
        by (worker, process id)."""
        names = self.present_columns("ts", "worker_id", "process_id")
        frame = as_strings(self.columns(*names).filter(pl.col("worker_id").is_not_null()))
        last = {(w, None): ts for w, ts in frame.group_by("worker_id").agg(pl.col("ts").max()).iter_rows()}
        if "process_id" in names:
            per_process = frame.filter(pl.col("process_id").is_not_null()).group_by("worker_id", "process_id").agg(pl.col("ts").max())
            last.update({(w, p): ts for w, p, ts in per_process.iter_rows()})
        return last

    def silent_after(self, worker_id: str, process_id: str | None, ts) -> bool:
        """Whether the worker's process (the worker, when no process is named) logged nothing
        later than `ts` and the clock skew."""
        last = self._last_records.get((worker_id, process_id))
        return last is None or last <= ts + timedelta(seconds=self.skew_s)

    @cached_property
    def doubled_sends(self) -> pl.DataFrame:
        """Scheduled sends (a scheduler's publishes that name no message) two schedulers made of
        one due entry at once, each with the other's (schedules.doubled_sends)."""
        names = self.present_columns(
            "rid", "ts", "kind", "name", "job_id", "job_type", "object_name", "worker_id", "source", "line", "action_id",
        )
        missing = [pl.lit(None, dtype=pl.String).alias(c) for c in ("name", "job_type", "object_name", "worker_id") if c not in names]
        return doubled_sends(scheduled_sends(self.columns(*names).with_columns(missing)))

    @cached_property
    def scheduler_pairs(self) -> pl.DataFrame:
        """doubled_sends once per pair of sends (schedules.scheduler_pairs)."""
        return scheduler_pairs(self.doubled_sends)

    def scheduler_pair_of(self, rids: list[int]) -> dict | None:
        """The scheduler pair (scheduler_pairs) one of these records is a send of, if any: a
        scheduler that names its message (Huey's `Enqueueing periodic task <task>: <id>`) makes
        publishes of the action itself."""
        pairs = self.scheduler_pairs
        if pairs.is_empty() or not rids:
            return None
        wanted = pl.Series(rids).cast(pairs.schema["rid_a"])
        found = pairs.filter(pl.col("rid_a").is_in(wanted.implode()) | pl.col("rid_b").is_in(wanted.implode()))
        return found.row(0, named=True) if found.height else None

    def scheduler_sends_of(self, job_type: str | None, first_entry, later_entry, id_values: set[str]) -> tuple[dict, bool] | None:
        """The two schedulers' sends of one entry of this task that made an action's two runs
        (entered at `first_entry` and `later_entry`): the latest doubled pair whose first send came
        before the first run entered and whose second before the later one (within the clock skew),
        at most RUN_AFTER_SEND_S before. An entry named after one of the action's ids
        (`reminder-ord_5076`) is taken before another; the flag says whether the pair is the
        action's own (so named, or the only entry doubled then)."""
        pairs = self.scheduler_pairs
        if pairs.is_empty() or first_entry is None:
            return None
        skew = timedelta(seconds=self.skew_s)
        sent, first_sent = pl.max_horizontal("ts_a", "ts_b"), pl.min_horizontal("ts_a", "ts_b")
        # An action of no known task type (its task's own lines linked nothing) takes any task's.
        same_task = pl.col("job_type") == job_type if job_type else pl.lit(True)
        near = pairs.filter(
            same_task & (first_sent <= first_entry + skew)
            & (sent <= (later_entry or first_entry) + skew)
            & (first_sent >= first_entry - timedelta(seconds=RUN_AFTER_SEND_S))
        )
        if near.is_empty():
            return None
        rows = near.sort(sent, "rid_a").rows(named=True)
        named = [r for r in rows if any(len(v) >= 4 and v in r["entry"] for v in id_values)]
        own = bool(named) or len({r["entry"] for r in rows}) == 1
        return (named or rows)[-1], own

    @cached_property
    def process_spans(self) -> dict[tuple[str, str], dict]:
        """Per log and process id (source, process_id): its first and last record's time and rid,
        what a log says of a process's life where it logs no start or exit."""
        if "process_id" not in self.present_columns("process_id"):
            return {}
        frame = self.columns("source", "process_id", "ts", "rid").filter(
            pl.col("process_id").is_not_null() & pl.col("ts").is_not_null()
        ).sort("ts", "rid")
        spans = as_strings(frame.group_by("source", "process_id").agg(
            pl.col("ts").first().alias("first_ts"), pl.col("rid").first().alias("first_rid"),
            pl.col("ts").last().alias("last_ts"), pl.col("rid").last().alias("last_rid"),
        ))
        return {(r["source"], r["process_id"]): r for r in spans.iter_rows(named=True)}

    @cached_property
    def exec_killed_rows(self) -> dict[int, dict]:
        """exec_killed by exec_id."""
        return {row["exec_id"]: row for row in self.exec_killed.iter_rows(named=True)}

    @cached_property
    def id_samples(self) -> pl.DataFrame:
        """Per action, the first four distinct values (as text) of each id column a timeline entry
        lists (`id:KEY` for each of TIMELINE_ID_KEYS the table has)."""
        return self._id_samples(self.action_records(*self.present_columns(*TIMELINE_ID_KEYS)))

    def id_samples_of(self, actions: pl.Series) -> pl.DataFrame:
        """id_samples' rows of these actions (and maybe others): of these alone when the whole
        frame is neither worked out already nor stored with the analysis (a timeline of a read
        draws a few of its actions; the whole frame took 5 of 52 s for those of every deploy at 5M
        lines)."""
        from dupfind.result_cache import STORED_FACTS

        if "id_samples" in self.__dict__ or STORED_FACTS in self.__dict__:
            return self.id_samples
        records = self.action_records(*self.present_columns(*TIMELINE_ID_KEYS))
        return self._id_samples(records.filter(pl.col("action_id").is_in(actions.implode())))

    def _id_samples(self, records: pl.LazyFrame) -> pl.DataFrame:
        schema = records.collect_schema()
        keys = [c for c in schema if c != "action_id"]
        actions = records.select("action_id").unique().collect()
        # A column at a time, over the records that carry it: grouping every id column of every
        # record at once held 0.3 GB at 5M lines. The distinct (action, value) pairs sorted once,
        # then each action's first four: sorting a list of distinct values in every group took
        # 0.5-0.6 s at 1M lines, this 0.3 s.
        columns = []
        for k in keys:
            first = pl.col(k).head(4)
            if schema[k] != textcodes.CODE_TYPE:
                first = first.cast(pl.String)
            values = (
                records.select("action_id", k).filter(pl.col(k).is_not_null()).unique()
                .sort("action_id", k).group_by("action_id").agg(first.alias(f"id:{k}"))
                .collect()
            )
            values = self.texts.decoded_lists(values, f"id:{k}")
            columns.append(actions.join(values, on="action_id", how="left", maintain_order="left")[f"id:{k}"].fill_null([]))
        return actions.with_columns(columns)

    @cached_property
    def unlinked_ids(self) -> pl.DataFrame:
        """Records outside any action that carry a PER_ACTION_IDS value (rid and those columns)."""
        present = self.present_columns(*PER_ACTION_IDS)
        return self.columns("rid", "action_id", *present).filter(
            pl.col("action_id").is_null() & pl.any_horizontal(pl.col(c).is_not_null() for c in present)
        ).drop("action_id") if present else pl.DataFrame(schema={"rid": pl.UInt32})

    @cached_property
    def deploy_records(self) -> pl.DataFrame:
        """Deploy start and finish records (rid, ts), in time order: a trace shows those during its action."""
        return self.columns("rid", "kind", "ts").filter(pl.col("kind").is_in(DEPLOY_KINDS)).select("rid", "ts").sort("ts")

    def action_ids(self, action_id: int) -> dict[str, list[str]]:
        """Every id of an action: link keys and the entity ids seen on its records."""
        found = ids_and_spans(self, {action_id}, self.records_of(action_id)).get(action_id)
        return found[0] if found else {k: [] for k in EXECUTION_ID_KEYS}

    def action_identity(self, action_id: int) -> str:
        identities = self._identities
        if isinstance(identities, dict):
            return identities.get(action_id, f"action-{action_id}")
        return identities[action_id] if 0 <= action_id < identities.len() else f"action-{action_id}"

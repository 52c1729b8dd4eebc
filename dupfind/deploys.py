"""Deploy generations, worker lifetimes, deploy windows, and the executions a stop or kill cut short."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

import polars as pl

from dupfind import schema as canonical
from dupfind.schema import as_strings
from dupfind.sources import log_stem

LIFECYCLE_KINDS = ("worker_start", "stop_signal", "worker_exit", "worker_killed")
END_KINDS = ("worker_exit", "worker_killed")
# One process of a worker killed (a prefork pool's child): the executions it ran end; the worker,
# which starts another, goes on.
PROCESS_KILLED = "process_killed"
DEPLOY_KINDS = ("deploy_start", "deploy_finish")
# Kubernetes pod names: <deployment>-<pod-template-hash>-<5 chars>, both from this alphabet.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
POD_NAME = rf"^((.+)-[{_SAFE}]{{6,10}})-[{_SAFE}]{{5}}$"
# An execution whose worker vanished after a stop signal counts as cut short only if it was
# active this close to the signal (an ack line lost hours earlier is not a kill).
IN_FLIGHT_LOOKBACK_S = 600.0
# A worker started this long after a deploy's recorded finish is not that deploy's.
DEPLOY_MATCH_SLACK_S = 60.0
GENERATION_SOURCES = ("logged", "pod_template_hash", "deploy_window", "unknown")


@dataclass
class DeployModel:
    """What the deploy records and worker lifecycles say, as tables (see build_deploy_model)."""

    workers: pl.DataFrame  # one row per worker id: generation, start, stop, end, grace
    generations: pl.DataFrame  # one row per generation: workers, span, deploy records
    windows: pl.DataFrame  # one row per deploy: start, end, previous generation, overlap
    interrupted: pl.DataFrame  # executions in flight when their worker was killed or vanished
    after_stop: pl.DataFrame  # executions a worker took after its stop signal

    @property
    def has_deploys(self) -> bool:
        return self.windows.height > 0

    def generation_of(self) -> dict[str, str | None]:
        return dict(self.workers.select("worker_id", "generation").rows())

    @cached_property
    def _window_rows(self) -> tuple[list[dict], list, list]:
        """Windows in start order, their starts, and the latest end among each prefix."""
        rows = self.windows.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
        ordered = sorted(rows.iter_rows(named=True), key=lambda w: w["start"])
        latest_end = list(itertools.accumulate((w["end"] for w in ordered), max))
        return ordered, [w["start"] for w in ordered], latest_end

    def window_at(self, ts: datetime | None, tail_s: float = 0.0) -> dict | None:
        """The latest deploy window that started at or before `ts` and ended (plus a tail) after it."""
        if ts is None:
            return None
        ordered, starts, latest_end = self._window_rows
        edge = ts - timedelta(seconds=tail_s)
        # Walk back from the last window started by `ts`; stop once no earlier one ends late enough.
        for i in range(bisect.bisect_right(starts, ts) - 1, -1, -1):
            if latest_end[i] < edge:
                return None
            if ordered[i]["end"] >= edge:
                return ordered[i]
        return None

    @cached_property
    def worker_rows(self) -> dict[str, dict]:
        """Each worker's row of `workers`, by worker id."""
        return {row["worker_id"]: row for row in self.workers.iter_rows(named=True)}


def _ts_dtype(table: pl.DataFrame) -> pl.DataType:
    return table.schema["ts"]


def _worker_table(table: pl.DataFrame, executions: pl.DataFrame) -> pl.DataFrame:
    """Per worker: lifetime, last stop signal, end (explicit, or inferred when it went silent)."""
    columns = ("worker_id", "source", "line", "kind", "ts", "rid", "deployment_id", "exit_code", "grace_period_s")
    # Lazy and in the table's (Categorical) types: whole-table aggregates need no sort, and only
    # the few stop and end records are sorted and matched to their worker's starts and sources.
    # Each query filters the table's rows itself: a frame of every worker's records, shared by the
    # queries, held 0.9M rows of these columns at 1M lines (34 MB) while they ran.
    records = table.lazy().select(columns)
    kind = pl.col("kind")
    has_worker = pl.col("worker_id").is_not_null()
    starts = (
        records.filter(has_worker & (kind == "worker_start"))
        .group_by("worker_id")
        .agg(
            start_ts=pl.col("ts").min(),
            last_start_ts=pl.col("ts").max(),
        )
    )
    stop = kind == "stop_signal"
    end = kind.is_in(END_KINDS)
    # The generation a worker's records name most often (the first by name of those tied), from
    # counts per worker, generation and kind: the mode of each worker's values, aggregated in the
    # groups, held a list of them (32 MiB at 1M lines, against 6).
    logged = (
        records.group_by("worker_id", "deployment_id", kind.is_in(DEPLOY_KINDS).alias("deploy_kind")).len()
        .filter(has_worker & pl.col("deployment_id").is_not_null() & ~pl.col("deploy_kind"))
        .sort("worker_id", "len", pl.col("deployment_id").cast(pl.String), descending=[False, True, False])
        .group_by("worker_id", maintain_order=True).agg(logged=pl.col("deployment_id").first())
    )
    whole = records.group_by("worker_id").agg(
        first_ts=pl.col("ts").min(),
        last_ts=pl.col("ts").max(),
        records=pl.len(),
    ).filter(has_worker).join(logged, on="worker_id", how="left")
    current = pl.col("last_start_ts").is_null() | (pl.col("ts") >= pl.col("last_start_ts"))
    ends = (
        records.filter(has_worker & (stop | end))
        .join(starts, on="worker_id", how="left")
        .sort("ts", "source", "line")
        .group_by("worker_id")
        .agg(
            stop_ts=pl.col("ts").filter(stop & current).min(),
            stop_rid=pl.col("rid").filter(stop & current).first(),
            end_ts=pl.col("ts").filter(end & current).min(),
            end_rid=pl.col("rid").filter(end & current).first(),
            end_record_kind=pl.col("kind").filter(end & current).first(),
            exit_code=pl.col("exit_code").filter(end & current).drop_nulls().first(),
            grace_logged_s=pl.col("grace_period_s").filter(stop).max(),
        )
    )
    workers = (
        whole.join(starts.select("worker_id", "start_ts"), on="worker_id", how="left")
        .join(ends, on="worker_id", how="left")
        .select(
            "worker_id", "first_ts", "last_ts", "start_ts", "stop_ts", "stop_rid", "end_ts", "end_rid",
            "end_record_kind", "exit_code", "grace_logged_s", "logged", "records",
        )
        .collect()
        .pipe(as_strings)
    )
    entries = executions.group_by("worker_id").agg(
        executions=pl.len(),
        last_entry_ts=pl.coalesce("entry_ts", "start").max(),
        last_exec_end=pl.col("end").max(),
    )
    workers = workers.join(entries, on="worker_id", how="left").with_columns(pl.col("executions").fill_null(0))
    # A producer or the deploy pipeline's own host is not a consumer: keep hosts that ran jobs
    # or have a lifecycle (started, stopped, exited).
    lifecycle = records.filter(has_worker & kind.is_in(LIFECYCLE_KINDS)).select("worker_id").unique().collect().pipe(as_strings)
    workers = workers.filter((pl.col("executions") > 0) | pl.col("worker_id").is_in(lifecycle["worker_id"].implode()))
    gone = pl.col("end_ts").is_null() & pl.col("stop_ts").is_not_null()
    return (
        workers.with_columns(
            start_inferred=pl.col("start_ts").is_null(),
            start_ts=pl.coalesce("start_ts", "first_ts"),
            end_kind=pl.when(pl.col("end_record_kind") == "worker_killed")
            .then(pl.lit("killed"))
            .when(pl.col("end_record_kind") == "worker_exit")
            .then(pl.lit("exited"))
            .when(gone)
            .then(pl.lit("gone"))
            .otherwise(pl.lit("running")),
            end_ts=pl.when(gone).then(pl.max_horizontal("last_ts", "stop_ts")).otherwise(pl.col("end_ts")),
            end_rid=pl.when(gone).then(pl.col("stop_rid")).otherwise(pl.col("end_rid")),
        )
        .with_columns(
            grace_s=pl.coalesce(
                "grace_logged_s",
                pl.when(pl.col("end_kind") == "killed").then(
                    (pl.col("end_ts") - pl.col("stop_ts")).dt.total_microseconds() / 1e6
                ),
            ),
            grace_source=pl.when(pl.col("grace_logged_s").is_not_null())
            .then(pl.lit("logged"))
            .when((pl.col("end_kind") == "killed") & pl.col("stop_ts").is_not_null())
            .then(pl.lit("observed")),
        )
        .drop("end_record_kind")
    )


def _assign_generations(workers: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """Generation per worker: logged, else shared pod-template hash, else the deploy that started it."""
    workers = workers.with_columns(
        replica_set=pl.col("worker_id").cast(pl.String).str.extract(POD_NAME, 1),
        service=pl.col("worker_id").cast(pl.String).str.extract(POD_NAME, 2),
    )
    peers = (
        workers.filter(pl.col("replica_set").is_not_null())
        .group_by("replica_set")
        .agg(peer_logged=pl.col("logged").drop_nulls().mode().sort().first())
    )
    workers = workers.join(peers, on="replica_set", how="left")
    deploys = _deploy_records(table)
    if deploys.height:
        started = deploys.filter(pl.col("deploy_start").is_not_null()).sort("deploy_start")
        by_time = workers.sort("start_ts").join_asof(
            started.select("deployment_id", "deploy_start", "deploy_finish"),
            left_on="start_ts",
            right_on="deploy_start",
            strategy="backward",
        )
        late = pl.col("deploy_finish").is_not_null() & (
            pl.col("start_ts") > pl.col("deploy_finish") + timedelta(seconds=DEPLOY_MATCH_SLACK_S)
        )
        by_time = by_time.select(
            "worker_id", pl.when(late).then(None).otherwise(pl.col("deployment_id")).alias("deploy_guess")
        )
        workers = workers.join(by_time, on="worker_id", how="left")
    else:
        workers = workers.with_columns(deploy_guess=pl.lit(None, dtype=pl.String))
    source = (
        pl.when(pl.col("logged").is_not_null())
        .then(pl.lit("logged"))
        .when(pl.col("peer_logged").is_not_null() | pl.col("replica_set").is_not_null())
        .then(pl.lit("pod_template_hash"))
        .when(pl.col("deploy_guess").is_not_null())
        .then(pl.lit("deploy_window"))
        .otherwise(pl.lit("unknown"))
    )
    workers = (
        workers.with_columns(
            generation=pl.coalesce("logged", "peer_logged", "replica_set", "deploy_guess"),
            generation_source=source,
        )
        .with_columns(generation_inferred=pl.col("generation_source") != "logged")
        .drop("peer_logged", "deploy_guess")
    )
    # A worker whose name tells no service (no pod's) is of the service its generation's other
    # workers are: one version two services run is two generations, one a service.
    named = workers.filter(pl.col("service").is_not_null() & pl.col("generation").is_not_null())
    service_of = dict(named.group_by("generation").agg(pl.col("service").mode().sort().first()).rows())
    return workers.with_columns(service=pl.coalesce(
        "service", pl.col("generation").replace_strict(service_of, default=None, return_dtype=pl.String),
    )) if service_of else workers


def _deploy_records(table: pl.DataFrame) -> pl.DataFrame:
    """Per deployment id named by a deploy record: first start and last finish, with their records."""
    records = as_strings(
        table.filter(pl.col("kind").is_in(DEPLOY_KINDS) & pl.col("deployment_id").is_not_null())
        .select("deployment_id", "kind", "ts", "rid")
    ).sort("ts")
    if records.height == 0:
        ts = _ts_dtype(table)
        return pl.DataFrame(
            schema={
                "deployment_id": pl.String,
                "deploy_start": ts,
                "deploy_start_rid": pl.UInt32,
                "deploy_finish": ts,
                "deploy_finish_rid": pl.UInt32,
            }
        )
    start = pl.col("kind") == "deploy_start"
    finish = pl.col("kind") == "deploy_finish"
    return records.group_by("deployment_id").agg(
        deploy_start=pl.col("ts").filter(start).min(),
        deploy_start_rid=pl.col("rid").filter(start).first(),
        deploy_finish=pl.col("ts").filter(finish).max(),
        deploy_finish_rid=pl.col("rid").filter(finish).last(),
    )


def _generations(workers: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    known = workers.filter(pl.col("generation").is_not_null())
    per_gen = known.group_by("generation", "service").agg(
        workers=pl.col("worker_id").sort(),
        first_start=pl.col("start_ts").min(),
        last_start=pl.col("start_ts").max(),
        last_end=pl.coalesce("end_ts", "last_ts").max(),
        running=(pl.col("end_kind") == "running").sum(),
        source=pl.col("generation_source").mode().sort().first(),
    )
    deploys = _deploy_records(table).rename({"deployment_id": "generation"})
    gens = per_gen.join(deploys, on="generation", how="full", coalesce=True)
    return gens.with_columns(
        workers=pl.col("workers").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        source=pl.col("source").fill_null("deploy_record"),
        began=pl.min_horizontal("deploy_start", "first_start"),
    ).sort("began", "generation", "service")


def _stems(sources: pl.Series) -> pl.Series:
    """Each source as the log it is a part of (sources.log_stem): a worker's log rotated is one log."""
    names = sources.unique().drop_nulls().to_list()
    return sources.replace_strict({name: log_stem(name) for name in names}, default=None, return_dtype=pl.String)


def delivered() -> pl.Expr:
    """Over executions: a queue delivered the run (it names a message or logs a receive); a run of
    a worker's own (an in-process scheduler's in each replica) names neither."""
    return (pl.col("job_ids").list.len() > 0) | pl.col("receive_ts").is_not_null()


def life_records(table: pl.DataFrame) -> pl.DataFrame:
    """Each worker's starts and stop signals, in time order: worker_id, source, life_ts,
    life_kind, life_rid (texts)."""
    return (
        table.filter(pl.col("kind").is_in(["worker_start", "stop_signal"]) & pl.col("worker_id").is_not_null())
        .select(
            "worker_id",
            "source",
            pl.col("ts").alias("life_ts"),
            pl.col("kind").alias("life_kind"),
            pl.col("rid").alias("life_rid"),
        )
        .pipe(as_strings)
        .sort("life_ts")
    )


def first_stops(life: pl.DataFrame, *by: str) -> pl.DataFrame:
    """A worker's life records (`life_kind`: worker_start, stop_signal; in time order) less each
    stop signal that follows another: its first stop signal since its start is its stop, a
    shutdown logged in steps (Dramatiq's `Stopping worker process...`, then `Shutting down...`) one."""
    again = (pl.col("life_kind") == "stop_signal") & (pl.col("life_kind").shift().over(*by) == "stop_signal").fill_null(False)
    return life.filter(~again)


def _after_stop(table: pl.DataFrame, executions: pl.DataFrame, skew_s: float) -> pl.DataFrame:
    """Executions whose entry came after their worker's stop signal (and no restart since): one
    from the log its first record is in (any of that log's rotated parts: one clock) or, beyond
    the clock-skew tolerance, from any log."""
    life = life_records(table)
    life = life.with_columns(_stems(life["source"]).alias("source"))
    entries = executions.select(
        "exec_id",
        "action_id",
        "worker_id",
        "identity",
        "attempt",
        pl.coalesce("receive_ts", "entry_ts", "start").alias("entry"),
        pl.col("first_source").cast(pl.String).alias("source"),
    ).sort("entry")
    entries = entries.with_columns(_stems(entries["source"]).alias("source"))
    schema = {
        "exec_id": canonical.ID_TYPE,
        "worker_id": pl.String,
        "entry": _ts_dtype(table),
        "stop_ts": _ts_dtype(table),
        "stop_rid": pl.UInt32,
        "after_s": pl.Float64,
        "same_clock": pl.Boolean,
    }
    if life.filter(pl.col("life_kind") == "stop_signal").height == 0 or entries.height == 0:
        return pl.DataFrame(schema=schema)
    own = entries.join_asof(
        first_stops(life, "worker_id", "source"),
        left_on="entry",
        right_on="life_ts",
        by=["worker_id", "source"],
        strategy="backward",
        check_sortedness=False,
    )
    any_src = entries.join_asof(
        first_stops(life, "worker_id").drop("source"),
        left_on="entry",
        right_on="life_ts",
        by="worker_id",
        strategy="backward",
        check_sortedness=False,
    )
    own = own.filter(pl.col("life_kind") == "stop_signal").select(
        "exec_id", pl.col("life_ts").alias("own_ts"), pl.col("life_rid").alias("own_rid")
    )
    gap = (pl.col("entry") - pl.col("life_ts")).dt.total_microseconds() / 1e6
    any_src = any_src.filter((pl.col("life_kind") == "stop_signal") & (gap >= skew_s)).select(
        "exec_id", pl.col("life_ts").alias("any_ts"), pl.col("life_rid").alias("any_rid")
    )
    matched = (
        entries.join(own, on="exec_id", how="left")
        .join(any_src, on="exec_id", how="left")
        .filter(pl.col("own_ts").is_not_null() | pl.col("any_ts").is_not_null())
    )
    return (
        matched.select(
            "exec_id",
            "action_id",
            "worker_id",
            "identity",
            "attempt",
            "entry",
            stop_ts=pl.coalesce("own_ts", "any_ts"),
            stop_rid=pl.coalesce("own_rid", "any_rid"),
            same_clock=pl.col("own_ts").is_not_null(),
        )
        .with_columns(after_s=(pl.col("entry") - pl.col("stop_ts")).dt.total_microseconds() / 1e6)
        .sort("entry")
    )


def _ended_with_their_message(table: pl.DataFrame, executions: pl.DataFrame) -> pl.DataFrame:
    """Executions with no ack or finish of their own whose message its worker then logged done
    in a record of no action (exec_id): a batch's message (one task for several actions, whose
    job id links none of them: correlate's batch) ends each of its actions' runs when it ends."""
    if "exec_id" not in table.columns or "job_id" not in table.columns:
        return pl.DataFrame(schema={"exec_id": executions.schema["exec_id"]})
    done = table.filter(
        pl.col("kind").is_in(["ack", "finish"]) & pl.col("action_id").is_null() & pl.col("job_id").is_not_null()
    ).select("job_id", pl.col("worker_id").alias("done_worker"), pl.col("ts").alias("done_ts"))
    if done.is_empty():
        return pl.DataFrame(schema={"exec_id": executions.schema["exec_id"]})
    runs = table.filter(pl.col("exec_id").is_not_null() & pl.col("job_id").is_in(done["job_id"].implode())).select(
        "exec_id", "job_id", "worker_id").unique()
    ended = runs.join(done, on="job_id").join(executions.select("exec_id", "start"), on="exec_id").filter(
        (pl.col("done_ts") >= pl.col("start")) & (pl.col("done_worker").cast(pl.String) == pl.col("worker_id").cast(pl.String))
    )
    return ended.select("exec_id").unique()


def _interrupted(
    table: pl.DataFrame, executions: pl.DataFrame, workers: pl.DataFrame, skew_s: float = 0.5
) -> pl.DataFrame:
    """Executions without ack, failure or guard that were running when their worker ended.

    An explicit kill or exit of the worker after the execution's last record ends it; a worker
    that got a stop signal and then went silent (a Kubernetes Killing event, no exit logged)
    ends it too, inferred, when the execution was active near the signal. An execution whose
    failure is its worker's kill (within the clock-skew tolerance of it: Sidekiq's hard shutdown
    raises in the jobs still running, and each logs `fail` right after) was cut by it too.
    """
    ts_type = _ts_dtype(table)
    schema = {
        "exec_id": canonical.ID_TYPE,
        "worker_id": pl.String,
        "kill_ts": ts_type,
        "kill_rid": pl.UInt32,
        "kill_kind": pl.String,
        "inferred": pl.Boolean,
    }
    # A run the same worker took up again for the same action (a prefork receive split from its
    # child's run, a retry) was not what the worker held when it ended. Sorted by pair, the next
    # row of the same pair is the next run (a shift `over` the pairs costs a group per pair).
    same_pair = pl.all_horizontal(pl.col(c) == pl.col(c).shift(-1) for c in ("action_id", "worker_id"))
    # Only the columns read below are sorted: the executions' 24 columns, lists among them, were
    # a 19 MB copy at 1M lines.
    resumed = executions.select(
        "exec_id", "action_id", "worker_id", pl.coalesce("process_id", "work_pid").alias("process_id"), "start",
        pl.coalesce("work_end", "end").alias("end"),
        "completed", "failed", "guarded", "first_source",
        delivered=delivered(),
    ).sort("action_id", "worker_id", "start").with_columns(
        next_start=pl.when(same_pair).then(pl.col("start").shift(-1))
    )
    # The kill is often logged by another host (the orchestrator): within the clock-skew
    # tolerance it may carry a time just before the worker's own last record.
    open_execs = (
        resumed.filter(~pl.col("completed") & ~pl.col("guarded")).join(_ended_with_their_message(table, resumed), on="exec_id", how="anti")
        .select("exec_id", "worker_id", "process_id", "start", "end", "next_start", "failed", "first_source", "delivered")
        .with_columns(end_tolerant=pl.col("end") - timedelta(seconds=skew_s))
        .pipe(as_strings)
    )
    if open_execs.height == 0:
        return pl.DataFrame(schema=schema)
    ends = (
        table.filter(pl.col("kind").is_in([*END_KINDS, PROCESS_KILLED]) & pl.col("worker_id").is_not_null())
        .select(
            "worker_id",
            pl.col("process_id").alias("kill_process"),
            pl.col("ts").alias("kill_ts"),
            pl.col("rid").alias("kill_rid"),
            pl.col("kind").alias("kill_kind"),
            pl.col("source").alias("kill_source"),
        )
        .pipe(as_strings)
    )
    # A failure is the kill's doing where it follows the kill in the same log (one clock: Sidekiq's
    # jobs log `fail` as its hard shutdown raises in them), not a failure of its own another host's
    # kill record, within the clock-skew tolerance, happens to come before.
    failed_by_kill = (
        pl.col("kill_kind").is_in(["worker_killed", PROCESS_KILLED]) & (pl.col("kill_ts") <= pl.col("end"))
        & (pl.col("kill_source") == pl.col("first_source"))
    )
    # A pool process killed ends the executions it ran, not its worker's others: where both name
    # their process by its number (an application's `pid` and Celery's `pid:17049`), they must agree.
    other_process = (
        (pl.col("kill_kind") == PROCESS_KILLED)
        & pl.col("kill_process").str.contains(r"^\d+$").fill_null(False)
        & pl.col("process_id").str.contains(r"^\d+$").fill_null(False)
        & (pl.col("kill_process") != pl.col("process_id"))
    )
    explicit = (
        open_execs.join(ends, on="worker_id")
        .filter(
            (pl.col("kill_ts") >= pl.col("end_tolerant"))
            & (pl.col("next_start").is_null() | (pl.col("next_start") > pl.col("kill_ts")))
            & (~pl.col("failed") | failed_by_kill)
            & ~other_process
        )
        .sort("kill_ts", "kill_rid")
        .group_by("exec_id", maintain_order=True).first()  # the first end after the execution's last record
        .select("exec_id", "worker_id", "kill_ts", "kill_rid", "kill_kind", inferred=pl.lit(False))
    )
    gone = workers.filter(pl.col("end_kind") == "gone").select("worker_id", "stop_ts", "end_ts", "end_rid")
    # A worker gone silent is a guess: only runs a queue delivered (a message id, a receive) are
    # held by it then; a run of its own (an in-process scheduler's) has nothing to hand back.
    inferred = (
        open_execs.filter(~pl.col("failed") & pl.col("delivered")).join(explicit.select("exec_id"), on="exec_id", how="anti")
        .join(gone, on="worker_id")
        .filter(
            (pl.col("end") >= pl.col("stop_ts") - timedelta(seconds=IN_FLIGHT_LOOKBACK_S))
            & (pl.col("start") <= pl.col("end_ts"))
            & (pl.col("next_start").is_null() | (pl.col("next_start") > pl.col("end_ts")))
        )
        .select(
            "exec_id",
            "worker_id",
            pl.col("end_ts").alias("kill_ts"),
            pl.col("end_rid").alias("kill_rid"),
            kill_kind=pl.lit("worker_gone"),
            inferred=pl.lit(True),
        )
    )
    return pl.concat([explicit, inferred], how="vertical_relaxed").cast(schema).sort("kill_ts", "exec_id")


def _windows(
    generations: pl.DataFrame,
    workers: pl.DataFrame,
    after_stop: pl.DataFrame,
    interrupted: pl.DataFrame,
    table_end: datetime | None,
) -> pl.DataFrame:
    """One deploy window per generation that replaced another or has a deploy record.

    From the deploy start (or the new generation's first worker start) to the deploy finish (or
    the last old-generation worker's end); the overlap is while both generations consumed: from
    the first new worker start to the moment the last old worker stopped taking work.
    """
    took = after_stop.group_by("worker_id").agg(after_stop=pl.len(), last_after_stop=pl.col("entry").max())
    consume = workers.join(took, on="worker_id", how="left").with_columns(
        pl.col("after_stop").fill_null(0),
        consume_end=pl.coalesce(
            pl.max_horizontal("stop_ts", "last_after_stop"),
            "end_ts",
            pl.lit(table_end, dtype=workers.schema["last_ts"]),
        ),
    )
    killed = interrupted.group_by("worker_id").agg(interrupted=pl.len())
    consume = consume.join(killed, on="worker_id", how="left").with_columns(pl.col("interrupted").fill_null(0))
    by_worker = {row["worker_id"]: row for row in consume.iter_rows(named=True)}
    rows = []
    previous_by_service: dict[str | None, dict] = {}
    for gen in generations.iter_rows(named=True):
        previous = previous_by_service.get(gen["service"])
        previous_by_service[gen["service"]] = gen
        if previous is None and gen["deploy_start"] is None:
            continue
        new_start = gen["first_start"]
        start = min(t for t in (gen["deploy_start"], new_start) if t is not None)
        old = [by_worker[w] for w in (previous["workers"] if previous else []) if w in by_worker]
        old_ends = [w["end_ts"] for w in old if w["end_ts"] is not None and w["end_ts"] >= start]
        end_candidates = [t for t in (gen["deploy_finish"], gen["last_start"], *old_ends) if t is not None]
        end = max(end_candidates) if end_candidates else start
        consume_end = max((w["consume_end"] for w in old if w["consume_end"] is not None), default=None)
        overlap_s = 0.0
        if new_start is not None and consume_end is not None and consume_end > new_start:
            overlap_s = (consume_end - new_start).total_seconds()
        rows.append(
            {
                "deploy": gen["generation"],
                "previous": previous["generation"] if previous else None,
                "service": gen["service"],
                "start": start,
                "end": end,
                "from_records": gen["deploy_start"] is not None,
                "start_rid": gen["deploy_start_rid"],
                "finish_rid": gen["deploy_finish_rid"],
                "new_workers": len(gen["workers"]),
                "old_workers": len(old),
                "overlap_start": new_start if overlap_s > 0 else None,
                "overlap_end": consume_end if overlap_s > 0 else None,
                "overlap_s": round(overlap_s, 3),
                "old_stopped": sum(1 for w in old if w["stop_ts"] is not None),
                "old_killed": sum(1 for w in old if w["end_kind"] in ("killed", "gone") and w["interrupted"]),
                "work_after_stop": sum(w["after_stop"] for w in old),
                "interrupted": sum(w["interrupted"] for w in old),
                "grace_s": max((w["grace_s"] for w in old if w["grace_s"] is not None), default=None),
            }
        )
    ts_type = workers.schema["last_ts"]
    schema = {
        "deploy": pl.String,
        "previous": pl.String,
        "service": pl.String,
        "start": ts_type,
        "end": ts_type,
        "from_records": pl.Boolean,
        "start_rid": pl.UInt32,
        "finish_rid": pl.UInt32,
        "new_workers": pl.Int64,
        "old_workers": pl.Int64,
        "overlap_start": ts_type,
        "overlap_end": ts_type,
        "overlap_s": pl.Float64,
        "old_stopped": pl.Int64,
        "old_killed": pl.Int64,
        "work_after_stop": pl.Int64,
        "interrupted": pl.Int64,
        "grace_s": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row").sort("start")


def build_deploy_model(table: pl.DataFrame, executions: pl.DataFrame, skew_s: float = 0.5) -> DeployModel:
    """Workers, generations, deploy windows, interrupted executions and work taken after a stop."""
    workers = _assign_generations(_worker_table(table, executions), table)
    after_stop = _after_stop(table, executions, skew_s)
    interrupted = _interrupted(table, executions, workers, skew_s)
    generations = _generations(workers, table)
    table_end = table["ts"].max() if table.height else None
    windows = _windows(generations, workers, after_stop, interrupted, table_end)
    return DeployModel(workers, generations, windows, interrupted, after_stop)

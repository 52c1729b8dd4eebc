"""Correlation: link records into business actions, and split actions into executions."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from dupfind import schema, textcodes
from dupfind.assembly import held_column
from dupfind.handlers import split_by_handler
from dupfind.schema import as_strings
from dupfind.textcodes import Texts, coded_columns

# Values that never link records: they mean "no id", not "the same id".
PLACEHOLDERS = (
    "", "null", "none", "nil", "-", "0", "unknown", "undefined", "n/a", "na", "nan", "<nil>",
    "<none>", "false", "true", "[]", "{}",
)
# Kinds that make a run of records a consumer execution (not just a producer's publish).
CONSUMER_KINDS = (
    "receive", "start", "side_effect", "side_effect_result", "commit", "ack", "finish", "fail",
    "retry", "claim", "claim_lost", "dedup_hit", "lock_acquire", "lock_release", "lock_denied",
    "lock_expired", "lease_extended",
)
# Kinds a prefork pool's main process logs (not the child doing the work): it receives, acks,
# and hands a message back (a reject with requeue, after its child died).
MAIN_PROCESS_KINDS = ("receive", "ack", "retry")
# A `start` right after one of these is the same execution, not a new one.
STARTUP_KINDS = ("receive", "start", "claim", "lock_acquire", "other", "publish")


@dataclass
class GlueWarning:
    """An id value shared by too many jobs to be a real link; it was not used for linking. With
    `batch`: `jobs` job ids (`value` one of them) each carried several idempotency keys (a batch
    message: one task for several business actions), not used for linking either."""

    key: str
    value: str
    jobs: int
    batch: bool = False

    def text(self) -> str:
        if self.batch:
            return (f"{self.jobs} {self.key} value(s) (such as {self.value!r}) each carry several idempotency keys: "
                    "one message for several business actions (a batch); they were not used to link records")
        return (f"{self.key}={self.value!r} appears with {self.jobs} different jobs; it was not used to link records "
                f"(raise max_jobs_per_value if it is a real shared key)")


# Columns with a value on few records (a visibility timeout a worker states when it starts, an
# exit code or a grace period when it stops, an error, a stack trace's exception) are held apart from the correlated table,
# as the rows that have one, when at most APART_SHARE of the records do: dense, they took 23 MiB
# of every step after the read at 1M lines for a few thousand values. Readers ask for them through
# `columns`, `rows` and `table_with`.
APART_COLUMNS = ("visibility_timeout_s", "timeout_name", "grace_period_s", "exit_code", "error", "stack_trace")
APART_SHARE = 0.02


@dataclass
class Correlation:
    """The canonical table with `rid`, `action_id`, `exec_id` and `echo` (the record repeats a run
    another log of the same worker tells: Celery's own lines beside the app's), plus per-action
    and per-execution tables. `table` lacks the columns `apart` holds (rid and those columns, for
    the records with a value in one); `order` names every column, those included, in table order."""

    table: pl.DataFrame
    actions: pl.DataFrame
    executions: pl.DataFrame
    warnings: list[GlueWarning] = field(default_factory=list)
    texts: Texts = field(default_factory=lambda: Texts.empty(coded_columns()))  # of the table's coded columns
    apart: pl.DataFrame | None = None
    order: tuple[str, ...] = ()

    def text_table(self) -> pl.DataFrame:
        """The table with its coded columns as text: a copy, for small tables and for tools."""
        return self.texts.decoded(self.table_with(*self.apart_names))

    @property
    def apart_names(self) -> list[str]:
        return [] if self.apart is None else [c for c in self.apart.columns if c != "rid"]

    # Readers that need a few columns or rows of the table ask for them: a cached correlation
    # (result_cache.CachedCorrelation) then reads only those instead of the whole table.
    @property
    def column_names(self) -> list[str]:
        return list(self.order) if self.apart is not None else self.table.columns

    def present_columns(self, *names: str) -> list[str]:
        """These names, once each and in this order, less those the table has no column for."""
        present = set(self.column_names)
        return [name for name in dict.fromkeys(names) if name in present]

    def columns(self, *names: str) -> pl.DataFrame:
        held = set(self.apart_names)
        if not held.intersection(names):
            return self.table.select(names)
        return pl.DataFrame([
            held_column(self.apart, n, 0, self.table.height) if n in held else self.table.get_column(n) for n in names
        ])

    def rows(self, positions) -> pl.DataFrame:
        """Rows by position, which is their rid, in the order given."""
        rows = self.table[pl.Series("pos", positions, dtype=pl.Int64)]
        if self.apart is None:
            return rows
        values = rows.select("rid").join(self.apart, on="rid", how="left", maintain_order="left")
        return rows.with_columns(values.drop("rid").get_columns()).select(self.order)

    def table_with(self, *names: str) -> pl.DataFrame:
        """The table with these of the columns held apart spread again (a whole-table reader's copy)."""
        names = [n for n in names if n in self.apart_names]
        if not names:
            return self.table
        return self.table.with_columns(held_column(self.apart, n, 0, self.table.height) for n in names).select(
            [c for c in self.order if c in self.table.columns or c in names]
        )

    def table_slice(self, start: int, length: int) -> pl.DataFrame:
        """Rows [start, start + length) of the whole table, every column in order."""
        part = self.table.slice(start, length)
        if self.apart is None:
            return part
        return part.with_columns(held_column(self.apart, n, start, part.height) for n in self.apart_names).select(self.order)

    def hold_apart(self, apart: pl.DataFrame | None, columns: list[str]) -> Correlation:
        """This correlation of a table that `held_apart` took `apart` from (`columns`: its columns
        before), with those columns held apart in their places."""
        if apart is None:
            return self
        self.apart = apart
        order = self.table.columns
        for name in [c for c in columns if c in apart.columns and c != "rid"]:
            before = columns[:columns.index(name)]
            after = next((c for c in reversed(before) if c in order), None)
            order.insert(order.index(after) + 1 if after is not None else int(order[:1] == ["rid"]), name)
        self.order = tuple(order)
        return self


def held_apart(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(the table less the APART_COLUMNS with a value on some row but at most APART_SHARE of its
    rows, those columns' rows with a value and their `rid`, the row's position), or (table, None)."""
    present = [c for c in APART_COLUMNS if c in table.columns]
    if table.height == 0 or not present:
        return table, None
    counts = table.select(pl.col(c).count() for c in present).row(0, named=True)
    names = [c for c, n in counts.items() if 0 < n <= APART_SHARE * table.height]
    if not names:
        return table, None
    apart = table.select(names).with_row_index("rid").filter(pl.any_horizontal(pl.col(names).is_not_null()))
    return table.drop(names), apart


def _connected_components(edges: pl.DataFrame, nodes: pl.Series) -> pl.DataFrame:
    """Min-label propagation with pointer jumping over dense positions (gather/scatter, no hash
    joins); `nodes` unique. Returns node -> label (the smallest node of its component)."""
    nodes = nodes.sort()
    if edges.height == 0:
        return pl.DataFrame({"node": nodes, "label": nodes})
    a = nodes.search_sorted(edges["a"]).cast(pl.UInt32)
    b = nodes.search_sorted(edges["b"]).cast(pl.UInt32)
    ends = pl.concat([a, b])
    labels = pl.int_range(0, nodes.len(), dtype=pl.UInt32, eager=True).alias("label")
    for _ in range(200):
        # Each edge offers each end the other end's label; a node keeps the least offer.
        offers = pl.DataFrame({"node": ends, "offer": pl.concat([labels.gather(b), labels.gather(a)])})
        best = offers.group_by("node").agg(pl.col("offer").min())
        lowered = pl.select(pl.min_horizontal(labels.gather(best["node"]), best["offer"])).to_series()
        updated = labels.clone().scatter(best["node"], lowered)
        # Pointer jumping: a node adopts its label's label until nothing changes (halves chains).
        while True:
            jumped = updated.gather(updated)
            if jumped.equals(updated):
                break
            updated = jumped
        if updated.equals(labels):
            break
        labels = updated
    return pl.DataFrame({"node": nodes, "label": nodes.gather(labels)})


def _by_rid(table: pl.DataFrame, values: pl.DataFrame, column: str, default=None) -> pl.Series:
    """`column` of `values` (rid, column; rids unique) aligned to the table's rows (rid == row
    position), `default` elsewhere: a scatter, not a join over the whole table."""
    out = pl.repeat(default, table.height, dtype=values.schema[column], eager=True).alias(column)
    return out.scatter(values["rid"], values[column]) if values.height else out


def build_actions(
    table: pl.DataFrame, link_keys: tuple[str, ...], max_jobs_per_value: int = 25, texts: Texts | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, list[GlueWarning]]:
    """Connected components over link-key values that appear together on one record.

    Returns the table with `rid` and `action_id` (null when a record carries no link key),
    an actions table (action_id, identity) and the glue warnings.
    """
    texts = texts if texts is not None else Texts.empty(())
    table = table.with_row_index("rid")
    keys = [k for k in link_keys if k in table.columns]
    if not keys or table.height == 0:
        empty = pl.DataFrame(schema={"action_id": schema.ID_TYPE, "identity": pl.String})
        return table.with_columns(action_id=pl.lit(None, dtype=schema.ID_TYPE)), empty, []
    # Records that carry the same link values link alike: the graph is built over the distinct
    # tuples of values (a tenth of the records in a typical export), then mapped back.
    tuples = (
        table.select("rid", *keys).filter(pl.any_horizontal(pl.col(keys).is_not_null()))
        .group_by(keys).agg(pl.col("rid")).with_row_index("tid")
    )
    # One row per (tuple, key) with a value. A node (key=value) is numbered by its key's position
    # and the value's code: an id's code in the table's dictionary, or another text's code in
    # polars' pool. No "key=value" text is written a row; only the distinct values are decoded.
    parts, vocab = [], []
    for i, k in enumerate(keys):
        column = tuples[k]
        if k in texts.columns and column.dtype == textcodes.CODE_TYPE:
            codes, distinct = column, column.drop_nulls().unique()
            spelled = texts.decode(distinct)
        else:
            column = column.cast(pl.Categorical)
            codes = column.to_physical().cast(textcodes.CODE_TYPE)
            values = column.drop_nulls().unique()
            distinct, spelled = values.to_physical().cast(textcodes.CODE_TYPE), values.cast(pl.String)
        parts.append(pl.DataFrame({"tid": tuples["tid"], "value": codes}).drop_nulls("value").with_columns(key=pl.lit(i, dtype=pl.Int64)))
        vocab.append(pl.DataFrame({"value": distinct, "text": spelled}).with_columns(key=pl.lit(i, dtype=pl.Int64)))
    nid = pl.col("key") * (1 << 32) + pl.col("value").cast(pl.Int64)
    vocab = pl.concat(vocab).filter(~pl.col("text").str.strip_chars().str.to_lowercase().is_in(PLACEHOLDERS)).select(
        nid.alias("nid"), "key", "text"
    )
    long = pl.concat(parts).with_columns(nid=nid).join(vocab.select("nid"), on="nid", how="semi")
    del parts
    # A node's key and its "key=value" text are written only where they are shown (the glue
    # warnings, the identities): on every node they held 15 MiB more through the components at
    # 1M lines, the step's peak.
    node_ids = vocab.join(long.select("nid").unique(), on="nid", how="semi").select("nid", pl.col("text").alias("value"))
    del vocab
    key_name = (pl.col("nid") // (1 << 32)).replace_strict(list(range(len(keys))), keys, return_dtype=pl.String)
    node_text = pl.concat_str(key_name, pl.lit("="), "value")
    long = long.select("tid", "key", "nid")
    # Glue detection: a non-job value carried by too many distinct jobs, or a job id carried
    # by too many distinct events, would merge unrelated work into one action.
    warnings: list[GlueWarning] = []
    if "job_id" in keys:
        job_key = keys.index("job_id")
        jobs = long.filter(pl.col("key") == job_key).select("tid", pl.col("nid").alias("job"))
        fanout = (
            long.filter(pl.col("key") != job_key).join(jobs, on="tid")
            .group_by("nid").agg(pl.col("job").n_unique().alias("n"))
        )
        partner = next((k for k in ("event_id", "idempotency_key") if k in keys), None)
        if partner:
            partners = long.filter(pl.col("key") == keys.index(partner)).select("tid", pl.col("nid").alias("p"))
            fanout = pl.concat([
                fanout,
                jobs.join(partners, on="tid").group_by(pl.col("job").alias("nid")).agg(pl.col("p").n_unique().alias("n")),
            ])
        glued = (
            fanout.filter(pl.col("n") > max_jobs_per_value).join(node_ids, on="nid")
            .with_columns(key=key_name, node=node_text).sort("n", "node", descending=[True, False])
        )
        # A job id that carries two or more idempotency keys (of the values that still link) is a
        # batch's message, one task for several business actions (Huey's periodic task sending each
        # unpaid order's reminder): linking by it would make its actions one.
        batch = pl.DataFrame(schema={"nid": pl.Int64})
        if "idempotency_key" in keys:
            linking = long.join(glued.select("nid"), on="nid", how="anti")
            keyed = linking.filter(pl.col("key") == keys.index("idempotency_key")).select("tid", pl.col("nid").alias("p"))
            batch = (
                jobs.join(keyed, on="tid").group_by(pl.col("job").alias("nid")).agg(pl.col("p").n_unique().alias("n"))
                .filter(pl.col("n") > 1).select("nid").join(glued.select("nid"), on="nid", how="anti")
            )
        for key, value, n in glued.select("key", "value", "n").rows():
            warnings.append(GlueWarning(key, value, n))
        if batch.height:
            example = batch.join(node_ids, on="nid").sort("value")["value"][0]
            warnings.append(GlueWarning("job_id", example, batch.height, batch=True))
        if glued.height or batch.height:
            long = long.join(pl.concat([glued.select("nid"), batch]), on="nid", how="anti")
    anchors = long.group_by("tid").agg(pl.col("nid").min().alias("anchor"))
    # One lazy query: the joined frame is not materialised before the filter and the unique
    # (+18 MiB at its peak at 1M lines, against 33-54 eager, in two thirds of the time).
    edges = (
        long.lazy().join(anchors.lazy(), on="tid").filter(pl.col("nid") != pl.col("anchor"))
        .select(pl.col("nid").alias("a"), pl.col("anchor").alias("b")).unique().collect()
    )
    linked = long.select("nid").unique()
    del long  # the largest frame here: released before the components are worked out
    labels = _connected_components(edges, linked["nid"])
    del edges, linked
    tuple_labels = anchors.join(labels.rename({"node": "anchor"}), on="anchor").select("tid", "label")
    del anchors
    # Stable identity: the sorted ids of the component (independent of input order); action ids
    # follow a seeded hash of the identity, as independent of input order as sorting the
    # identities and far cheaper at millions of actions.
    members = labels.rename({"node": "nid"}).join(node_ids, on="nid").select("label", node_text.alias("node")).sort("label", "node")
    del labels, node_ids
    actions = (
        # Lists joined once grouped: `str.join` in the aggregation took twice the time and held
        # 100 MiB more at its peak at 1M lines (+27 MiB this way).
        members.group_by("label", maintain_order=True).agg(pl.col("node"))
        .select("label", pl.col("node").list.join("|").alias("identity"))
        .sort(pl.col("identity").hash(seed=0))
        .with_row_index("action_id")
        .with_columns(pl.col("action_id").cast(schema.ID_TYPE))
    )
    del members
    record_actions = (
        tuple_labels.join(actions.select("label", "action_id"), on="label")
        .join(tuples.select("tid", "rid"), on="tid").explode("rid").select("rid", "action_id")
    )
    # The identities again, each text once in buffers of their exact size: as the lists' join
    # left them, their buffers held 17.4 MiB of pages for 11 MiB of text at 1M lines (12.5 now).
    actions = pl.DataFrame([actions.get_column("action_id"), actions.get_column("identity") + ""])
    return table.with_columns(action_id=_by_rid(table, record_actions, "action_id")), actions, warnings


# What a job framework's line and an application's line both tell of one run.
_RUN_KINDS = ("receive", "start", "finish", "fail", "ack")


def _framework_lines_told_again(table: pl.DataFrame) -> pl.DataFrame:
    """rids of a log's run records that another format in the same file tells again under other
    ids: Sidekiq's `start` / `done` of each jid beside ActiveJob's `Performing` / `Performed` of
    its own job id (one file, no id in common: two actions of every run). For each file and job
    type told in several formats, a format whose kinds the richest already logs, and which starts
    about as many runs, is left out of the runs (as _one_account_of_runs leaves out a format that
    shares the runs' ids)."""
    none = pl.DataFrame(schema={"rid": table.schema["rid"]})
    if "job_type" not in table.columns:
        return none
    typed = table.lazy().filter(pl.col("job_type").is_not_null() & pl.col("kind").is_in(_RUN_KINDS))
    per_format = typed.group_by("source", "job_type", "format").agg(
        pl.col("kind").cast(pl.String).unique().alias("kinds"),
        (pl.col("kind") == "start").sum().alias("starts"),
        pl.col("action_id").drop_nulls().unique().alias("actions"),
    ).collect()
    if per_format.height < 2:
        return none
    key = ["source", "job_type"]
    several = per_format.filter(pl.len().over(key) > 1)
    if several.height == 0:
        return none
    richest = (
        several.with_columns(breadth=pl.col("kinds").list.len())
        .sort([*key, "breadth", "starts", "format"], descending=[False, False, True, True, False])
        .group_by(key, maintain_order=True).first()
        .select(*key, pl.col("format").alias("__richest"), pl.col("kinds").alias("__kinds"),
                pl.col("starts").alias("__starts"), pl.col("actions").alias("__actions"))
    )
    told = several.join(richest, on=key).filter(
        (pl.col("format") != pl.col("__richest"))
        & (pl.col("kinds").list.set_difference(pl.col("__kinds")).list.len() == 0)
        # The same runs: as many starts (within a tenth), and never in one action (which
        # _one_account_of_runs settles).
        & ((pl.col("starts") - pl.col("__starts")).abs() <= pl.max_horizontal(1, pl.col("__starts") // 10))
        & (pl.col("actions").list.set_intersection(pl.col("__actions")).list.len() == 0)
    ).select("source", "job_type", "format")
    if told.height == 0:
        return none
    return typed.join(told.lazy(), on=["source", "job_type", "format"]).select("rid").collect()


def _actions_told_again(table: pl.DataFrame, told_again: pl.DataFrame) -> pl.Series:
    """Actions all of whose records another format of their file tells (Sidekiq's jids beside
    ActiveJob's job ids): actions of the records, not of the work, which the summary leaves out of
    its count of actions."""
    if told_again.height == 0:
        return pl.Series("action_id", [], dtype=table.schema["action_id"])
    told = told_again["rid"].implode()
    touched = table.lazy().filter(pl.col("rid").is_in(told)).select(pl.col("action_id").drop_nulls().unique())
    return (
        table.lazy().join(touched, on="action_id", how="semi")
        .group_by("action_id").agg(pl.col("rid").is_in(told).all().alias("all_told"))
        .filter(pl.col("all_told")).select("action_id").collect().get_column("action_id")
    )


def _one_account_of_runs(base: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Records of one action on one worker that come in several formats describe the same runs.

    A queue framework's own log (Celery's `received` / `succeeded` lines) and the application's
    log of one worker tell the same runs twice, with different precision and process names
    (`ForkPoolWorker-2` against the OS pid 10258). A format whose lifecycle kinds the richest
    format of the pair already logs adds nothing and is left out of the runs. Formats that
    complement each other are both kept; only the richest one's process ids then tell runs apart,
    the others' records join the run they fall into by time. Returns the records kept and the
    rids of those left out (echoes of runs another log tells).
    """
    pair = ["action_id", "worker_id"]
    none = base.clear().select("rid")
    if base.select(pl.col("format").n_unique()).item() < 2:
        return base, none
    per_format = base.group_by(*pair, "format").agg(pl.col("kind").unique().alias("kinds"), pl.len().alias("n"))
    mixed = per_format.group_by(pair).len().filter(pl.col("len") > 1).select(pair)
    if mixed.height == 0:
        return base, none
    per_format = per_format.join(mixed, on=pair).with_columns(breadth=pl.col("kinds").list.len())
    richest = (
        per_format.sort([*pair, "breadth", "n", "format"], descending=[False, False, True, True, False])
        .group_by(pair, maintain_order=True).first()
        .select(*pair, pl.col("format").alias("__richest"), pl.col("kinds").alias("__kinds"))
    )
    verdict = per_format.join(richest, on=pair).with_columns(
        __redundant=(pl.col("format") != pl.col("__richest"))
        & (pl.col("kinds").list.set_difference(pl.col("__kinds")).list.len() == 0)
    ).select(*pair, "format", "__richest", "__redundant")
    base = base.join(verdict, on=[*pair, "format"], how="left", maintain_order="left")
    redundant = pl.col("__redundant").fill_null(False)
    echoes = base.filter(redundant).select("rid")
    base = base.filter(~redundant)
    keep_pid = pl.col("__richest").is_null() | (pl.col("format") == pl.col("__richest"))
    return base.with_columns(process_id=pl.when(keep_pid).then(pl.col("process_id"))).drop("__richest", "__redundant"), echoes


def _assign_processes(base: pl.DataFrame) -> pl.DataFrame:
    """For (action, worker) pairs whose work was logged by several processes. Prefork pools
    (Celery) log receive and ack from the main process and the work from a child: a receive
    belongs to the child that starts its message next (else the next to start), everything else
    to the child that logged its message last (else the last to log): two messages of one action
    received together (two schedulers' publishes) each go to their own run.
    Adds pid_filled and identity (worker, or worker/process where needed)."""
    base = base.sort("action_id", "worker_id", "ts", "source", "line")
    pair = ["action_id", "worker_id"]
    message = [*pair, "job_id"]
    work_pid = pl.when(~pl.col("kind").is_in(MAIN_PROCESS_KINDS)).then(pl.col("process_id"))
    start_pid = pl.when(pl.col("kind") == "start").then(pl.col("process_id"))
    own_is_work = pl.col("work_pids").list.contains(pl.col("process_id")).fill_null(False)
    of_message = pl.col("job_id").is_not_null()
    return base.with_columns(
        pid_filled=pl.when(own_is_work).then(pl.col("process_id"))
        .when(pl.col("kind") == "receive").then(pl.coalesce(
            pl.when(of_message).then(start_pid.backward_fill().over(message)),
            start_pid.backward_fill().over(pair), work_pid.backward_fill().over(pair), work_pid.forward_fill().over(pair),
        ))
        .when(pl.col("kind").is_in(MAIN_PROCESS_KINDS)).then(pl.coalesce(
            pl.when(of_message).then(work_pid.forward_fill().over(message)),
            work_pid.forward_fill().over(pair), work_pid.backward_fill().over(pair),
        ))
        .otherwise(pl.coalesce(pl.col("process_id"), work_pid.forward_fill().over(pair), work_pid.backward_fill().over(pair)))
    ).with_columns(
        identity=pl.when(pl.col("pid_filled").is_not_null())
        .then(pl.concat_str("worker_id", pl.lit("/"), "pid_filled"))
        .otherwise(pl.col("worker_id").cast(pl.String)).cast(base.schema["worker_id"])
    ).drop("work_pids")


# Records of at most about this many are split into executions at a time (whole actions per part).
EXECUTION_PART_ROWS = 500_000


def build_executions(
    table: pl.DataFrame, part_rows: int = EXECUTION_PART_ROWS, texts: Texts | None = None,
    told_again: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split each action's records into executions: one run on one worker (and process).

    Works on ranges of action ids holding about `part_rows` records each, so its sorted and
    widened copies are bounded by a part, not the table; executions are numbered in the order
    a single pass over the whole table would number them. `told_again`: the rids of
    _framework_lines_told_again, where the caller has them."""
    columns = ["rid", "action_id", "worker_id", "process_id", "format", "kind", "ts", "source", "line", "attempt",
               "deployment_id", "job_id", "lock_key"]
    in_runs = pl.col("action_id").is_not_null() & pl.col("worker_id").is_not_null()
    told_again = _framework_lines_told_again(table) if told_again is None else told_again
    if told_again.height:
        in_runs = in_runs & ~pl.col("rid").is_in(told_again["rid"].implode())
    records = table.lazy().filter(in_runs).select([c for c in columns if c in table.columns])
    sizes = records.group_by("action_id").len().sort("action_id").collect()
    part = ((sizes["len"].cum_sum() - 1) // max(part_rows, 1)).alias("part")
    ranges = sizes.with_columns(part).group_by("part").agg(
        pl.col("action_id").min().alias("lo"), pl.col("action_id").max().alias("hi")
    ).sort("part").select("lo", "hi").rows()
    selections = [records.filter(pl.col("action_id").is_between(lo, hi)) for lo, hi in ranges] or [records.clear()]
    runs, parts, echoes = [], [], []
    for selection in selections:
        # The part is collected into the call, so that it holds the only reference: the records
        # are released once sorted, instead of living beside their sorted copy.
        run_rows, part_executions, part_echoes = _executions_of(selection.collect(), sum(p.height for p in parts))
        if texts is not None:
            # The executions' job ids are text. Codes sort as their texts do: the sorted lists of
            # codes decoded are the sorted lists of ids, and the part's sorted copies carry 4-byte
            # codes instead of ids.
            part_executions = texts.decoded_lists(part_executions, "job_ids")
        runs.append(run_rows)
        parts.append(part_executions)
        echoes.append(part_echoes)
    # Text as String for the many frames it meets, but each execution's file stays a label code:
    # a path on every execution was the largest column of the frame (36 MB at 5M lines).
    executions = pl.concat(parts, how="vertical").sort("action_id", "start", "identity")
    executions = as_strings(executions.drop("first_source")).insert_column(
        executions.get_column_index("first_source"), executions["first_source"]
    )
    echo = _by_rid(table, pl.concat([*echoes, told_again]).with_columns(echo=pl.lit(True)), "echo", default=False)
    exec_ids = _by_rid(table, pl.concat(runs), "exec_id")
    return table.with_columns(exec_id=exec_ids, echo=echo), executions


def _denied_last() -> pl.Expr:
    """In an execution's aggregation: a lock was denied to it, and it did not take one after."""
    denied = pl.col("ts").filter(pl.col("kind") == "lock_denied").max()
    acquired = pl.col("ts").filter(pl.col("kind") == "lock_acquire").max()
    return denied.is_not_null() & (acquired.is_null() | (denied > acquired)).fill_null(False)


def _executions_of(base: pl.DataFrame, first_id: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Executions of whole actions' records, numbered from `first_id`: (rid, exec_id) of the
    records in a run, the executions in number order, and the rids of echo records."""
    base, echoes = _one_account_of_runs(base)
    # Use the process id only where it is needed to tell runs apart on one worker.
    work_pids = pl.col("process_id").filter(~pl.col("kind").is_in(MAIN_PROCESS_KINDS)).drop_nulls()
    pair = ["action_id", "worker_id"]
    # Pairs with more than one work process, counted over the distinct (pair, process) rows: an
    # aggregation that filters in each group held 78 MiB at its peak over 500k records, this 17.
    multi = (
        base.lazy().filter(pl.col("process_id").is_not_null() & ~pl.col("kind").is_in(MAIN_PROCESS_KINDS))
        .select(*pair, "process_id").unique().group_by(pair).len().filter(pl.col("len") > 1).select(pair).collect()
    )
    # Where a worker ran an action in one process only, runs are told apart by the worker alone.
    by_worker = base.with_columns(pid_filled=pl.lit(None, dtype=base.schema["process_id"]), identity=pl.col("worker_id"))
    if multi.height:
        multi = base.join(multi, on=pair).group_by(pair).agg(work_pids.unique().alias("work_pids"))
        by_worker = by_worker.join(multi.select(pair), on=pair, how="anti")
        by_process = _assign_processes(base.join(multi, on=pair))
        base = pl.concat([by_worker, by_process.select(by_worker.columns)])
        del by_process
    else:
        base = by_worker
    del by_worker
    base = base.sort("action_id", "identity", "ts", "source", "line")
    # A run of rows of one (action, identity) starts where either changes (rows are sorted by them).
    new_group = (pl.col("action_id") != pl.col("action_id").shift(1)) | (pl.col("identity") != pl.col("identity").shift(1))
    # Forward fill within each run: a sentinel at a run's first row stops the fill crossing runs.
    stop = pl.lit(-(2**31) + 1, dtype=base.schema["attempt"])
    filled = pl.coalesce("attempt", pl.when(new_group.fill_null(True)).then(stop)).forward_fill()
    base = base.with_columns(
        attempt_ff=pl.when(filled != stop).then(filled),
        prev_kind=pl.when(~new_group.fill_null(True)).then(pl.col("kind").shift(1)),
        # The previous row is another log's end of a run within the same millisecond: a framework
        # logging in milliseconds (Dramatiq's `Acknowledging` at ,962) may seem to end the run
        # before the application's start at .962303 that it follows.
        end_tied=pl.col("kind").shift(1).is_in(["ack", "finish"]) & (pl.col("source") != pl.col("source").shift(1))
        & (pl.col("ts").dt.truncate("1ms") == pl.col("ts").shift(1).dt.truncate("1ms")),
        first_in_group=new_group.fill_null(True),
    ).with_columns(
        prev_attempt=pl.when(~pl.col("first_in_group")).then(pl.col("attempt_ff").shift(1)),
    )
    boundary = (
        pl.col("first_in_group")
        # A new attempt number starts a new run, unless the run just began (a receive logged
        # without the attempt, then a start that carries it).
        | (pl.col("attempt").is_not_null() & pl.col("prev_attempt").is_not_null()
           & (pl.col("attempt") != pl.col("prev_attempt")) & ~pl.col("prev_kind").is_in(["receive", "claim", "lock_acquire"]))
        | ((pl.col("kind") == "receive") & (pl.col("prev_kind") != "receive"))
        | ((pl.col("kind") == "start") & ~pl.col("prev_kind").is_in(STARTUP_KINDS) & ~pl.col("end_tied").fill_null(False))
    )
    base = base.with_columns(seg=boundary.cast(pl.Int64).cum_sum())
    # Segments with consumer work are executions, numbered in order; rows stay sorted by
    # (action, identity, time), so each execution's rows are contiguous and in time order.
    consumed = base.filter(pl.col("kind").is_in(CONSUMER_KINDS))["seg"].unique()
    base = base.filter(pl.col("seg").is_in(consumed.implode()))
    base = base.with_columns(
        exec_id=((pl.col("seg") != pl.col("seg").shift(1)).fill_null(True).cast(pl.Int64).cum_sum() - 1 + first_id)
        .cast(schema.ID_TYPE)
    )
    is_kind = lambda *k: pl.col("kind").is_in(list(k))  # noqa: E731
    executions = (
        base.group_by("exec_id", maintain_order=True)
        .agg(
            pl.col("action_id").first(),
            pl.col("identity").first(),
            pl.col("worker_id").first(),
            pl.col("pid_filled").first().alias("process_id"),
            pl.col("deployment_id").drop_nulls().first(),
            pl.col("attempt_ff").drop_nulls().first().alias("attempt"),
            pl.col("ts").min().alias("start"),
            pl.col("ts").max().alias("end"),
            # The last record of the work itself, not the main process' ack or requeue after it
            # (what a kill cut: deploys._interrupted).
            pl.col("ts").filter(~is_kind(*MAIN_PROCESS_KINDS)).max().alias("work_end"),
            # The process the work's own records name (an application's pid), where the run's
            # identity needs none (deploys._interrupted: which of a worker's pool processes a kill hit).
            pl.col("process_id").filter(~is_kind(*MAIN_PROCESS_KINDS)).drop_nulls().first().alias("work_pid"),
            pl.col("ts").filter(is_kind("receive", "start")).min().alias("entry_ts"),
            pl.col("ts").filter(is_kind("receive")).min().alias("receive_ts"),
            pl.col("ts").filter(is_kind("commit")).min().alias("commit_ts"),
            pl.col("ts").filter(is_kind("fail")).min().alias("fail_ts"),
            pl.col("ts").filter(is_kind("ack", "finish")).max().alias("done_ts"),
            pl.col("kind").last().alias("last_kind"),
            is_kind("ack", "finish").any().alias("completed"),
            is_kind("fail").any().alias("failed"),
            # Stopped by a guard: a dedup hit, a lost claim, or a lock denied it (and it did not
            # take the lock after: a blocking lock logs `busy` until it has it).
            (is_kind("dedup_hit", "claim_lost").any() | _denied_last()).alias("guarded"),
            is_kind("lease_expired").any().alias("lease_expired_logged"),
            pl.col("job_id").drop_nulls().unique().sort().alias("job_ids"),
            pl.col("lock_key").filter(is_kind("lock_acquire")).drop_nulls().unique().alias("locks"),
            pl.col("source").first().alias("first_source"),
            pl.col("line").first().alias("first_line"),
            pl.len().alias("records"),
        )
    )
    return base.select("rid", "exec_id"), executions, echoes


def correlate(
    table: pl.DataFrame, link_keys: tuple[str, ...], max_jobs_per_value: int = 25, texts: Texts | None = None,
) -> Correlation:
    """Actions and executions for a canonical table (`texts`: the dictionary of its coded columns)."""
    names = texts.columns if texts is not None else coded_columns()
    coded = [c for c, t in table.schema.items() if t == textcodes.CODE_TYPE and c in names]
    if (texts is None or not len(texts)) and any(table[c].null_count() < table.height for c in coded):
        raise ValueError("a table of codes needs its dictionary of texts (IngestResult.texts)")
    texts = texts if texts is not None else Texts.empty(())
    columns = table.columns
    table, apart = held_apart(table)  # a caller that lets go of its table frees them (pipeline.correlated_read)
    linked, actions, warnings = build_actions(table, link_keys, max_jobs_per_value, texts)
    told_again = _framework_lines_told_again(linked)
    actions = actions.with_columns(told_again=pl.col("action_id").is_in(_actions_told_again(linked, told_again).implode()))
    linked, executions = build_executions(linked, texts=texts, told_again=told_again)
    linked, actions, executions = split_by_handler(linked, actions, executions)
    return Correlation(linked, actions, executions, warnings, texts).hold_apart(apart, columns)

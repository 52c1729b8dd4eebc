"""Handlers of one event: an action's runs by two services or job types are two actions (a fan-out)."""

from __future__ import annotations

import polars as pl

from dupfind import schema

# A job type's last name (`tasks.send_confirmation`, `App\Jobs\SendConfirmation`,
# `Notifier#deliver`), in lower case without separators: one handler logged by its framework and by
# the application under two spellings of one name is one handler.
_QUALIFIER = r"^.*[.:#/\\]"
_SEPARATORS = r"[^0-9a-z]+"
_PARTS = ("service", "job_type")
# The actions column naming, for each handler's action of a split one, the action that kept its
# publishes (every handler of a fan-out was published to once): absent where none was split.
FAN_OUT = "fan_out"


def _tokens(rows: pl.DataFrame, column: str) -> pl.DataFrame:
    """Per run, the distinct values of a part it logged (a job type by its last name), compared
    lower case without separators, and as logged (`<column>_shown`) to name the handler."""
    shown = pl.col(column).str.replace(_QUALIFIER, "") if column == "job_type" else pl.col(column)
    values = shown.str.to_lowercase().str.replace_all(_SEPARATORS, "") if column == "job_type" else shown
    return rows.filter(pl.col(column).is_not_null()).group_by("exec_id").agg(
        values.unique().sort().alias(column), shown.unique().sort().alias(f"{column}_shown"),
    )


def _compatible(column: str) -> pl.Expr:
    """Two runs' values of a part agree: one names none, or they share one."""
    a, b = pl.col(f"{column}_a"), pl.col(f"{column}_b")
    return a.is_null() | b.is_null() | (a.list.set_intersection(b).list.len() > 0)


def _components(edges: pl.DataFrame, nodes: pl.Series) -> pl.DataFrame:
    """exec_id -> label, the least exec_id of its component over `edges` (a, b)."""
    labels = pl.DataFrame({"exec_id": nodes, "label": nodes})
    if edges.height == 0:
        return labels
    both = pl.concat([edges, edges.select(pl.col("b").alias("a"), pl.col("a").alias("b"))])
    while True:
        offers = both.join(labels, left_on="b", right_on="exec_id").group_by("a").agg(pl.col("label").min().alias("offer"))
        lowered = labels.join(offers, left_on="exec_id", right_on="a", how="left").select(
            "exec_id", pl.min_horizontal("label", "offer").alias("label"),
        )
        if lowered.sort("exec_id").equals(labels.sort("exec_id")):
            return labels
        labels = lowered


def split_by_handler(
    table: pl.DataFrame, actions: pl.DataFrame, executions: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """An event two consumers each handle (two services' consumer groups of a topic, an SNS topic's
    queues, two tasks one event triggers) is one connected component of ids, but each consumer's run
    is its own business action, not a repeat of the other's. Two runs of an action are one handler's
    when their services agree and their job types agree (a part agrees when one run names none, or
    they share a value; a job type by its last name); an action whose runs fall into several such
    handlers is split, each handler's runs and their records an action of their own, its identity
    suffixed with the handler. A run that leaves out a part telling the handlers apart goes with
    the first handler it agrees with, else with the first. The first handler to run keeps the
    action and the records of no run (its publishes). Returns the table, actions and executions,
    unchanged where no action is split."""
    present = [c for c in _PARTS if c in table.columns]
    if not present or executions.height < 2:
        return table, actions, executions
    repeated = executions.filter(pl.col("action_id").is_duplicated()).select("exec_id", "action_id", "start")
    named = pl.any_horizontal(pl.col(c).is_not_null() for c in present)
    if repeated.height == 0 or not table.select(named.any()).item():
        return table, actions, executions
    rows = schema.as_strings(
        table.lazy().filter(pl.col("exec_id").is_in(repeated["exec_id"].implode()) & named)
        .select("exec_id", *present).unique().collect()
    )
    runs = repeated
    for column in present:
        runs = runs.join(_tokens(rows, column), on="exec_id", how="left")
    # The parts that tell an action's handlers apart (its runs name more than one value of it); a
    # run that names each of them is placed by them, a run that leaves one out goes with the first
    # handler it agrees with.
    varying = runs.group_by("action_id").agg(
        *[(pl.col(c).explode().drop_nulls().n_unique() > 1).alias(f"varies_{c}") for c in present],
    ).filter(pl.any_horizontal(pl.col(f"varies_{c}") for c in present))
    if varying.height == 0:
        return table, actions, executions
    runs = runs.join(varying, on="action_id").with_columns(
        complete=pl.all_horizontal(~pl.col(f"varies_{c}") | pl.col(c).is_not_null() for c in present),
    )
    known = runs.filter("complete")
    pairs = known.join(known, on="action_id", suffix="_b").filter(pl.col("exec_id") < pl.col("exec_id_b")).rename(
        {c: f"{c}_a" for c in present},
    )
    edges = pairs.filter(pl.all_horizontal(_compatible(c) for c in present)).select(
        pl.col("exec_id").alias("a"), pl.col("exec_id_b").alias("b"),
    )
    groups = known.join(_components(edges, known["exec_id"]), on="exec_id")
    # Handlers in the order they first ran; the first keeps the action id.
    order = (
        groups.group_by("action_id", "label").agg(
            pl.col("start").min(),
            *[pl.col(name).explode().drop_nulls().unique().sort() for c in present for name in (c, f"{c}_shown")],
        )
        .sort("action_id", "start", "label").with_columns(rank=pl.int_range(pl.len()).over("action_id"))
        .filter(pl.len().over("action_id") > 1)
    )
    if order.height == 0:
        return table, actions, executions
    rest = runs.filter(~pl.col("complete")).select("exec_id", "action_id", *present).rename({c: f"{c}_a" for c in present})
    if rest.height:
        agreeing = rest.join(order.select("action_id", "label", "rank", *[pl.col(c).alias(f"{c}_b") for c in present]),
                             on="action_id").filter(pl.all_horizontal(_compatible(c) for c in present))
        placed = agreeing.sort("rank").group_by("exec_id", maintain_order=True).first().select("exec_id", "label")
        groups = pl.concat([groups.select("exec_id", "action_id", "label"),
                            rest.select("exec_id", "action_id").join(placed, on="exec_id")])
    words = [pl.col(f"{c}_shown").list.join("+") for c in present]
    order = order.with_columns(handler=pl.concat_str(words, separator="/", ignore_nulls=True))
    first_id = int(actions["action_id"].max()) + 1
    moved = order.filter(pl.col("rank") > 0).with_row_index("n").with_columns(
        new_id=(pl.col("n") + first_id).cast(actions.schema["action_id"]),
    )
    to = groups.join(moved.select("action_id", "label", "new_id"), on=["action_id", "label"]).select("exec_id", "new_id")

    def moved_to(frame: pl.DataFrame) -> pl.Expr:
        new_id = pl.col("exec_id").replace_strict(to["exec_id"], to["new_id"], default=None,
                                                  return_dtype=frame.schema["action_id"])
        return pl.coalesce(new_id, pl.col("action_id")).alias("action_id")

    executions = executions.with_columns(moved_to(executions)).sort("action_id", "start", "identity")
    table = table.with_columns(moved_to(table))
    # Every part of a split action is named by its handler, the first's too.
    suffixed = pl.col("identity") + pl.lit(" handler=") + pl.col("handler")
    kept = actions.join(order.filter(pl.col("rank") == 0).select("action_id", "handler"), on="action_id", how="left")
    kept = kept.with_columns(identity=pl.when(pl.col("handler").is_not_null()).then(suffixed)
                             .otherwise(pl.col("identity"))).drop("handler")
    added = moved.join(actions.select("action_id", "identity"), on="action_id").select(
        pl.col("new_id").alias("action_id"), suffixed.alias("identity"),
    ).sort("action_id")
    extra = [c for c in actions.columns if c not in ("action_id", "identity")]
    added = added.with_columns(pl.lit(False).alias(c) for c in extra)
    actions = pl.concat([kept, added.select(actions.columns)], how="vertical").sort("action_id")
    # Each handler's action names the one that kept the publishes (its own id for that one).
    origin = pl.concat([
        order.filter(pl.col("rank") == 0).select("action_id", pl.col("action_id").alias("origin")),
        moved.select(pl.col("new_id").alias("action_id"), pl.col("action_id").alias("origin")),
    ])
    fan_out = pl.col("action_id").replace_strict(origin["action_id"], origin["origin"], default=None,
                                                 return_dtype=actions.schema["action_id"])
    return table, actions.with_columns(fan_out.alias(FAN_OUT)), executions

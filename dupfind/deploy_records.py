"""Records about objects (Kubernetes events): kinds per object kind, pods as workers, rollouts as deploys."""

from __future__ import annotations

import polars as pl

from dupfind import textcodes
from dupfind.config import Config
from dupfind.textcodes import Texts

# The deployment controller names the ReplicaSet (one per pod template, i.e. per generation).
_SCALED = r"(?i)scaled (up|down) replica set (\S+?)(?:\s+to\s+(\d+))?(?:\s|$)"


def refine_object_records(table: pl.DataFrame, config: Config, texts: Texts | None = None) -> pl.DataFrame:
    """Apply vocabulary [subjects] to records that carry `object_kind`; a Pod's name is a worker id.

    A `ScalingReplicaSet` that scales a ReplicaSet up starts that generation's rollout (its
    `deployment_id` becomes the ReplicaSet name, which is also the prefix of its pods' names);
    a scale-down is bookkeeping of the same rollout and becomes kind `other`.
    """
    if "object_kind" not in table.columns or table["object_kind"].null_count() == table.height:
        return table
    rows = [(subject, name, kind) for subject, names in config.subject_kinds.items() for name, kind in names.items()]
    vocabulary = pl.DataFrame(
        rows, schema={"__subject": pl.String, "__folded": pl.String, "__kind": pl.String}, orient="row"
    )
    subject = pl.col("object_kind").cast(pl.String).str.to_lowercase()
    folded = pl.col("name").cast(pl.String).str.to_lowercase().str.replace_all(r"[\s.\-/:]+", "_").str.strip_chars("_")
    coded = texts is not None and table.schema.get("message") == textcodes.CODE_TYPE
    message = texts.text("message") if coded else pl.col("message").cast(pl.String)
    scaled = pl.when(pl.col("object_kind").is_not_null()).then(message).str.extract_groups(_SCALED)
    table = (
        table.with_columns(__subject=subject, __folded=folded)
        .join(vocabulary, on=["__subject", "__folded"], how="left", maintain_order="left")
        .with_columns(__scale=scaled)
    )
    is_pod = pl.col("__subject") == "pod"
    scale_up = pl.col("__scale").struct.field("1").str.to_lowercase() == "up"
    scale_down = pl.col("__scale").struct.field("1").str.to_lowercase() == "down"
    rollout = pl.col("__kind") == "deploy_start"
    return table.with_columns(
        kind=pl.when(rollout & scale_down)
        .then(pl.lit("other"))
        .otherwise(pl.coalesce(pl.col("__kind"), pl.col("kind"))),
        worker_id=pl.when(is_pod)
        .then(pl.coalesce(pl.col("worker_id"), pl.col("object_name")))
        .otherwise(pl.col("worker_id")),
        deployment_id=pl.when(rollout & scale_up)
        .then(pl.coalesce(pl.col("deployment_id"), pl.col("__scale").struct.field("2")))
        .otherwise(pl.col("deployment_id")),
    ).drop("__subject", "__folded", "__kind", "__scale").cast({c: table.schema[c] for c in ("kind", "worker_id", "deployment_id")})

"""Kafka record coordinates as message ids: one consumer group's message of a record, and the record."""

from __future__ import annotations

import re

import polars as pl

# A group's message of a record: `order-events-1@48252 (group notifier)`. Kafka's tools write a
# record as topic-partition@offset; each consumer group reads every record, as each queue of a
# fan-out gets its own message, so the group is part of the message (a record two groups ran is
# two deliveries, no redelivery) and the record is what two groups' messages share. A consumer
# whose lines leave its group out reads in its service's (`(service notifier)`); a producer's
# record (its delivery report) is the record itself.
GROUP_OPEN, SERVICE_OPEN, CLOSE = " (group ", " (service ", ")"
RECORD = re.compile(r"[A-Za-z0-9._-]+-\d+@\d+")  # Kafka's topic names: ASCII letters, digits, `.`, `_`, `-`
# A raw column a text grammar's rule captures: the partitions a consumer was assigned, as the Kafka
# client lists them (`order-events-0, order-events-1`, in brackets or not).
ASSIGNED_PARTITIONS = "kafka_assigned_partitions"


def coordinates_id(queue: pl.Expr, partition: pl.Expr, offset: pl.Expr, group: pl.Expr, service: pl.Expr,
                   consumed: pl.Expr) -> pl.Expr:
    """The job id of records that name a topic, a partition and an offset (null elsewhere);
    `consumed`: the record is a consumer's (no publish)."""
    # As integers where they are (an offset above 2**53 read through a float is another record's),
    # through a float where they are written as one (`48252.0`).
    partition, offset = (pl.coalesce(v.cast(pl.Int64, strict=False), v.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False))
                         for v in (partition, offset))
    record = pl.format("{}-{}@{}", queue, partition, offset)
    # librdkafka's failed delivery reports name partition -1 and offset -1001 (no record): no id.
    placed = queue.is_not_null() & (partition >= 0) & (offset >= 0)
    reader = pl.when(group.is_not_null()).then(pl.concat_str(pl.lit(GROUP_OPEN), group, pl.lit(CLOSE))) \
        .when(consumed & service.is_not_null()).then(pl.concat_str(pl.lit(SERVICE_OPEN), service, pl.lit(CLOSE))) \
        .otherwise(pl.lit(""))
    return pl.when(placed).then(pl.concat_str(record, reader))


def single_topic(partitions: pl.Expr) -> pl.Expr:
    """The topic of a list of partitions (`order-events-0, order-events-1`) where they are all
    one topic's; empty for partitions of several topics (a partition number then names no one
    record: the consumer's lines after it take no topic from an assignment before it, and the
    empty value is read as none), null for none."""
    topics = partitions.str.extract_all(r"[A-Za-z0-9._-]+-\d+").list.eval(pl.element().str.replace(r"-\d+$", "")).list.unique()
    return pl.when(topics.list.len() == 1).then(topics.list.first()).when(topics.list.len() > 1).then(pl.lit(""))


def _parts(job_id: str) -> tuple[str, str | None, str | None]:
    """(the record, `group` or `service`, its name) of a job id; (the job id, None, None) for any other."""
    for marker, kind in ((GROUP_OPEN, "group"), (SERVICE_OPEN, "service")):
        record, sep, name = job_id.rpartition(marker)
        if sep and record and name.endswith(CLOSE) and len(name) > len(CLOSE):
            return record, kind, name[: -len(CLOSE)]
    return job_id, None, None


def split(job_id: str) -> tuple[str, str | None]:
    """(the record, the group that read it) of a job id; (the record, None) where no group is named,
    (the job id, None) for any other id."""
    record, kind, name = _parts(job_id)
    return record, name if kind == "group" else None


def is_record(text: str) -> bool:
    """Whether a text is a record's coordinates, `order-events-1@48252`."""
    return RECORD.fullmatch(text) is not None


def record_of(job_id: str) -> str:
    return _parts(job_id)[0]


def two_groups(job_ids_a: list[str], job_ids_b: list[str]) -> tuple[str, str, str] | None:
    """(the record, the first run's group, the second's) where two runs read one record in two
    consumer groups."""
    ran_b = {record: group for record, group in map(split, job_ids_b) if group is not None}
    for record, group_a in map(split, job_ids_a):
        group_b = ran_b.get(record)
        if group_a is not None and group_b is not None and group_a != group_b:
            return record, group_a, group_b
    return None

"""The generation a worker's own records name most often (deploys._worker_table's `logged`)."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta

import polars as pl
import pytest

from dupfind.deploys import DEPLOY_KINDS, _worker_table

T0 = datetime(2026, 7, 21, 10, 0, 0)
WORK_KINDS = ("receive", "start", "side_effect", "ack", "worker_start", "other")


def _table(rows: list[tuple[str | None, str, str | None]]) -> pl.DataFrame:
    """Records (worker, kind, generation), a second apart, each worker's on a file of its own."""
    return pl.DataFrame(
        {
            "worker_id": [w for w, _, _ in rows],
            "source": [f"{w}.log" for w, _, _ in rows],
            "line": list(range(1, len(rows) + 1)),
            "kind": [k for _, k, _ in rows],
            "ts": [T0 + timedelta(seconds=i) for i in range(len(rows))],
            "rid": list(range(len(rows))),
            "deployment_id": [g for _, _, g in rows],
            "exit_code": pl.Series([None] * len(rows), dtype=pl.Int32),
            "grace_period_s": pl.Series([None] * len(rows), dtype=pl.Float64),
            "exec_id": [i if k in ("start", "ack") else None for i, (_, k, _) in enumerate(rows)],
        },
        schema_overrides={"ts": pl.Datetime("us", "UTC")},
    )


def _executions(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter(pl.col("exec_id").is_not_null()).select(
        "worker_id", entry_ts=pl.col("ts"), start=pl.col("ts"), end=pl.col("ts"),
    )


def _logged(rows) -> dict[str, str | None]:
    table = _table(rows)
    return dict(_worker_table(table, _executions(table)).select("worker_id", "logged").rows())


def _expected(rows) -> dict[str, str | None]:
    """Per worker with work: its most frequent generation outside deploy records, the first by name if tied."""
    counts: dict[str, Counter] = {}
    for worker, kind, generation in rows:
        if worker is None:
            continue
        counts.setdefault(worker, Counter())
        if generation is not None and kind not in DEPLOY_KINDS:
            counts[worker][generation] += 1
    expected = {}
    for worker, counter in counts.items():
        top = max(counter.values(), default=0)
        expected[worker] = min((g for g, n in counter.items() if n == top), default=None)
    return expected


def test_most_named_generation_ties_go_to_the_first_by_name():
    rows = [
        ("w1", "start", "v2"), ("w1", "ack", "v2"), ("w1", "start", "v10"), ("w1", "ack", "v10"),
        # The deploy pipeline names generations on its own records: they do not count.
        *[("w1", min(DEPLOY_KINDS), "v9")] * 5,
        ("w2", "start", None), ("w2", "ack", "v3"), ("w2", "start", "v3"), ("w2", "ack", "v4"),
        ("w3", "start", None), ("w3", "ack", None),
        (None, "other", "v1"),
    ]
    found = _logged(rows)
    assert found == {"w1": "v10", "w2": "v3", "w3": None}
    assert found == _expected(rows)


@pytest.mark.parametrize("seed", range(12))
def test_generation_matches_a_count_of_each_workers_records(seed):
    rng = random.Random(seed)
    workers = [f"worker-{i}" for i in range(rng.randint(1, 8))]
    generations = [f"gen-{c}" for c in "abcd"[: rng.randint(1, 4)]]
    kinds = (*WORK_KINDS, *sorted(DEPLOY_KINDS))
    rows = [
        (rng.choice([*workers, None]), rng.choice(kinds), rng.choice([*generations, None]))
        for _ in range(rng.randint(5, 300))
    ]
    rows += [(w, "start", None) for w in workers]  # every worker ran a job
    assert _logged(rows) == _expected(rows)

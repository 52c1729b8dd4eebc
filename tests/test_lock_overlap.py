"""Attribution's longest lock overlap over a few rows agrees with the polars self-join of concurrent_holds."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.locks import concurrent_holds, longest_overlap

T0 = datetime(2026, 7, 21, 10, 0, tzinfo=UTC)

hold = st.fixed_dictionaries({
    "key": st.sampled_from(["stock:1", "stock:2"]),
    "holder": st.sampled_from(["w1", "w2", "w3"]),
    "exec_id": st.sampled_from([1, 2]),
    "acquire_ms": st.integers(0, 5000),
    "length_ms": st.one_of(st.none(), st.integers(0, 4000)),
    "ttl_s": st.one_of(st.none(), st.sampled_from([1.0, 2.5])),
})


def _frame(specs: list[dict]) -> pl.DataFrame:
    acquire = [T0 + timedelta(milliseconds=s["acquire_ms"]) for s in specs]
    return pl.DataFrame({
        "key": [s["key"] for s in specs],
        "holder": [s["holder"] for s in specs],
        "worker_id": [s["holder"] for s in specs],
        "exec_id": [s["exec_id"] for s in specs],
        "action_id": [7] * len(specs),
        "acquire_rid": list(range(100, 100 + len(specs))),
        "acquire_ts": acquire,
        # A hold without an end: the pair's overlap ends with the other hold.
        "believed_end": [None if s["length_ms"] is None else a + timedelta(milliseconds=s["length_ms"])
                         for s, a in zip(specs, acquire)],
        "store_end": acquire,
        "ttl_s": [s["ttl_s"] for s in specs],
        "ttl_end": [None if s["ttl_s"] is None else a + timedelta(seconds=s["ttl_s"]) for s, a in zip(specs, acquire)],
    }, schema_overrides={"acquire_ts": pl.Datetime("us", "UTC"), "believed_end": pl.Datetime("us", "UTC"),
                         "store_end": pl.Datetime("us", "UTC"), "ttl_end": pl.Datetime("us", "UTC")})


@settings(max_examples=400, deadline=None)
@given(specs=st.lists(hold, min_size=0, max_size=7))
def test_longest_overlap_is_the_self_join_s_longest_pair(specs):
    holds = _frame(specs)
    pairs = concurrent_holds(holds, "acquire_ts", "believed_end")
    if pairs.height:
        pairs = pairs.filter(pl.col("exec_id_a") != pl.col("exec_id_b"))
    found = longest_overlap(holds.rows(named=True), "acquire_ts", "believed_end")
    if pairs.height == 0:
        assert found is None
        return
    assert found is not None
    longest = pairs["overlap_s"].max()
    # polars divides by multiplying with the reciprocal: the same seconds to the last bit or so.
    assert math.isclose(found["overlap_s"], longest, rel_tol=1e-15, abs_tol=1e-18)
    # The pair is one of the self-join's pairs with that overlap, with the same columns.
    rows = pairs.filter(pl.col("overlap_s") == longest).rows(named=True)
    candidates = [{k: v for k, v in row.items() if k not in ("overlap_s", "margin_s")} for row in rows]
    pair = {k: found[k] for k in candidates[0]}
    assert pair in candidates
    # and its margin, to the last bit or so
    assert math.isclose(found["margin_s"], rows[candidates.index(pair)]["margin_s"], rel_tol=1e-15, abs_tol=1e-18)


def test_only_pairs_of_two_executions_and_two_holders_count():
    base = {"key": "stock:1", "ttl_s": None, "length_ms": 3000}
    same_exec = [{**base, "holder": "w1", "exec_id": 1, "acquire_ms": 0}, {**base, "holder": "w2", "exec_id": 1, "acquire_ms": 500}]
    same_holder = [{**base, "holder": "w1", "exec_id": 1, "acquire_ms": 0}, {**base, "holder": "w1", "exec_id": 2, "acquire_ms": 500}]
    apart = [{**base, "holder": "w1", "exec_id": 1, "acquire_ms": 0}, {**base, "holder": "w2", "exec_id": 2, "acquire_ms": 3000}]
    for specs in (same_exec, same_holder, apart):
        assert longest_overlap(_frame(specs).rows(named=True), "acquire_ts", "believed_end") is None
    both = [{**base, "holder": "w1", "exec_id": 1, "acquire_ms": 0}, {**base, "holder": "w2", "exec_id": 2, "acquire_ms": 1000}]
    pair = longest_overlap(_frame(both).rows(named=True), "acquire_ts", "believed_end")
    assert pair is not None and pair["overlap_s"] == 2.0 and (pair["holder_a"], pair["holder_b"]) == ("w1", "w2")

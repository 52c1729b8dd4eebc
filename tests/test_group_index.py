"""The records index finds each action's records in time, file and line order, whichever way it is built."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dupfind import analysis
from dupfind.analysis import GroupIndex, _in_order
from dupfind.config import load_config
from dupfind.correlate import correlate
from dupfind.ingest import ingest
from dupfind.schema import as_strings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))
ORDER = ("ts", "source", "line")
CASES = [
    FIXTURES / "real" / "celery_redis_visibility_timeout",
    FIXTURES / "scenarios" / "prefork-same-message" / "logs",
    FIXTURES / "synth" / "deploy-overlap" / "logs",
]


def _table(logs: Path) -> pl.DataFrame:
    read = ingest([str(logs)], CONFIG)
    return correlate(read.table, CONFIG.link_keys, texts=read.texts).table


def _expected(table: pl.DataFrame, action_id: int) -> pl.DataFrame:
    """An action's records as a filter and a sort of the whole table give them."""
    return table.filter(pl.col("action_id") == action_id).sort(*ORDER, maintain_order=True)


def _built(index: GroupIndex) -> GroupIndex:
    index._build()
    return index


@pytest.mark.parametrize("logs", CASES, ids=lambda p: p.parent.name if p.name == "logs" else p.name)
def test_every_action_gets_its_records_in_order(logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "ORDER_CHECK_ROWS", 7)  # the order is checked across part boundaries too
    table = _table(logs)
    assert _in_order(table, ORDER)  # the table is assembled in record order: the index sorts by action alone
    # Rows in another order (as a hand-built frame may be) take the full sort; same records.
    shuffled = table.sample(fraction=1.0, shuffle=True, seed=7)
    assert not _in_order(shuffled, ORDER)
    in_order = _built(GroupIndex(table, "action_id", ORDER))
    reordered = _built(GroupIndex(shuffled, "action_id", ORDER))
    actions = table["action_id"].drop_nulls().unique().sort().to_list()
    assert len(actions) >= 2
    for action_id in actions:
        expected = _expected(table, action_id)
        assert in_order.get(action_id).equals(expected)
        assert as_strings(reordered.get(action_id)).equals(as_strings(expected))
    # Positions hold every record of an action once, and no record without one.
    assert in_order.positions.len() == table["action_id"].is_not_null().sum()
    assert in_order.positions.n_unique() == in_order.positions.len()


def test_keys_not_in_the_frame_find_nothing() -> None:
    frame = pl.DataFrame({"key": [3, None, 1, 3, 1], "ts": [1, 2, 3, 4, 5]})
    index = _built(GroupIndex(frame, "key", ("ts",)))
    assert index.get(3)["ts"].to_list() == [1, 4]
    assert index.get(1)["ts"].to_list() == [3, 5]
    for missing in (0, 2, 4, -1, 10**12, "3", None):
        assert index.get(missing).height == 0


def test_text_keys_and_ties_keep_first_seen_order() -> None:
    frame = pl.DataFrame({"key": ["b", "a", "b", "a", "b"], "ts": [2, 1, 2, 1, 0], "n": [0, 1, 2, 3, 4]})
    index = _built(GroupIndex(frame, "key", ("ts",)))
    assert not _in_order(frame, ("ts",))
    assert index.get("b")["n"].to_list() == [4, 0, 2]  # by time, rows of one time as they came
    assert index.get("a")["n"].to_list() == [1, 3]
    assert index.get("c").height == 0


def test_nulls_in_an_order_column_take_the_full_sort() -> None:
    frame = pl.DataFrame({"key": [1, 1, 1], "ts": [2, None, 1], "n": [0, 1, 2]})
    assert not _in_order(frame, ("ts",))
    index = _built(GroupIndex(frame, "key", ("ts",)))
    assert index.get(1)["n"].to_list() == frame.sort("ts", maintain_order=True)["n"].to_list()


@pytest.mark.parametrize("keys", [[5, 2, 5, 2], [-1, 2, -1, 2], [2**40, 2, 2**40, 2]], ids=["small", "negative", "wide"])
def test_integer_keys_of_any_range(keys: list[int]) -> None:
    frame = pl.DataFrame({"key": keys, "ts": [1, 2, 3, 4]})
    index = _built(GroupIndex(frame, "key", ("ts",)))
    for key in set(keys):
        assert index.get(key)["ts"].to_list() == [t for k, t in zip(keys, [1, 2, 3, 4]) if k == key]
    assert index.get(7).height == 0

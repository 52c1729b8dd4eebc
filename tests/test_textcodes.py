"""Ids and messages held as codes into a sorted dictionary read back as the texts they were."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from dupfind.assembly import HeldBatch, LabelPool, _pool_texts, assemble, held_for_assembly
from dupfind.config import load_config
from dupfind.correlate import correlate
from dupfind.ingest import ingest
from dupfind.schema import ID_COLUMNS, canonical_schema
from dupfind.textcodes import CODE_TYPE, Texts, coded_columns
from dupfind.timeouts import redelivery_gaps

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = load_config(cwd=Path("/"))
CODED = coded_columns()
CASES = [
    FIXTURES / "real" / "celery_redis_visibility_timeout",
    FIXTURES / "scenarios" / "pii-order-confirmation" / "logs",
    FIXTURES / "synth" / "deploy-overlap" / "logs",
]


def _texts(values: list[str | None]) -> Texts:
    return Texts.of(pl.DataFrame({"job_id": values}, schema={"job_id": pl.String}), CODED)


def test_a_dictionary_is_sorted_distinct_and_encodes_nulls_as_nulls():
    texts = _texts(["b", None, "a", "b", "c"])
    assert texts.values.to_list() == ["a", "b", "c"]
    codes = texts.encode(pl.Series("job_id", ["c", None, "a"]))
    assert codes.dtype == CODE_TYPE
    assert codes.to_list() == [2, None, 0]
    assert texts.decode(codes).to_list() == ["c", None, "a"]


def test_codes_sort_and_compare_as_their_texts():
    words = ["ord_10", "ord_9", "job-2", "Job-1", "évé", "", "ord_100"]
    texts = _texts(words)
    codes = texts.encode(pl.Series(words))
    assert texts.decode(codes.sort()).to_list() == sorted(words)
    for a, b in itertools.pairwise(words):
        ca, cb = texts.find([a])[0], texts.find([b])[0]
        assert (ca < cb) == (a < b) and (ca == cb) == (a == b)


def test_find_gives_the_codes_of_held_texts_only():
    texts = _texts(["a", "c", "e"])
    assert texts.find(["c", "b", "z", "e", ""]) == [1, 2]
    assert texts.lookup(pl.Series(["z", "a", None, "d", "e"])).to_list() == [None, 0, None, None, 2]
    assert Texts.empty(CODED).find(["a"]) == []
    assert Texts.empty(CODED).lookup(pl.Series(["a"])).to_list() == [None]


def test_as_text_decodes_codes_and_casts_anything_else():
    texts = _texts(["a", "b"])
    assert texts.as_text(pl.Series([1, 0], dtype=CODE_TYPE)).to_list() == ["b", "a"]
    assert texts.as_text(pl.Series(["x"], dtype=pl.Categorical)).to_list() == ["x"]


def test_merged_dictionaries_map_each_ones_codes_to_the_same_texts():
    # A batch's dictionary is its distinct texts in any order: code n is the n-th.
    first, second, empty = pl.Series(["m", "a"]), pl.Series(["z", "m", "b", "A"]), pl.Series([], dtype=pl.String)
    merged, remaps = Texts.merged([first, empty, second], CODED)
    assert merged.values.to_list() == ["A", "a", "b", "m", "z"]
    assert [r.dtype for r in remaps] == [CODE_TYPE] * 3 and remaps[1].len() == 0
    for part, remap in ((first, remaps[0]), (second, remaps[2])):
        assert merged.decode(remap).to_list() == part.to_list()
    nothing, none = Texts.merged([], CODED)
    assert len(nothing) == 0 and none == []


def test_compacted_keeps_only_the_texts_a_part_uses_in_their_order():
    dictionary = pl.Series("text", ["a", "b", "c", "d"])
    frame = pl.DataFrame({"job_id": pl.Series([2, None, 0], dtype=CODE_TYPE), "order_id": pl.Series([2, 2, None], dtype=CODE_TYPE),
                          "line": [1, 2, 3]})
    part, texts = Texts.compacted(frame, dictionary, ("job_id", "order_id", "message"))
    assert texts.to_list() == ["a", "c"] and part["line"].to_list() == [1, 2, 3]
    assert part["job_id"].to_list() == [1, None, 0] and part["order_id"].to_list() == [1, 1, None]
    assert part.schema["job_id"] == CODE_TYPE
    none, empty = Texts.compacted(frame.clear(), dictionary, ("job_id",))
    assert none.height == 0 and empty.len() == 0


def test_decoded_leaves_text_columns_and_other_columns_alone():
    texts = _texts(["x", "y"])
    frame = pl.DataFrame({"job_id": pl.Series([1, None], dtype=CODE_TYPE), "event_id": ["e", None], "attempt": [1, 2]})
    out = texts.decoded(frame)
    assert out.to_dict(as_series=False) == {"job_id": ["y", None], "event_id": ["e", None], "attempt": [1, 2]}
    assert texts.decoded(out).equals(out)  # text already: nothing to do
    assert texts.decoded(frame.lazy()).collect().equals(out)


def _batch(rows: list[dict]) -> pl.DataFrame:
    schema = canonical_schema()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    filled = [{"ts": start + timedelta(seconds=r.pop("s")), "kind": "start", "source": "a.log", "format": "json", **r} for r in rows]
    return pl.DataFrame(filled, schema={c: t for c, t in schema.items()}).with_columns(pl.col("line").cast(pl.Int64))


def test_assembly_merges_batches_with_their_own_dictionaries():
    one = _batch([{"s": 2, "line": 1, "job_id": "j-2", "message": "done"}, {"s": 0, "line": 2, "job_id": "j-1"}])
    two = _batch([{"s": 1, "line": 3, "job_id": "j-1", "order_id": "o-1", "message": "start"},
                  {"s": 3, "line": 4, "message": "done"}])
    labels = LabelPool()
    held = [held_for_assembly(one, CODED, labels), held_for_assembly(two, CODED, labels)]
    assert all(isinstance(h, HeldBatch) and h.frame.schema["job_id"] == CODE_TYPE for h in held)
    # Each batch: only its own texts, in order (assembly's sort of every batch's then merges runs).
    assert held[0].texts.to_list() == ["done", "j-1", "j-2"]
    assert all(h.texts.to_list() == sorted(h.texts.to_list()) for h in held)
    for h, batch in zip(held, (one, two), strict=True):  # code n is the batch's n-th text
        for column in ("job_id", "message"):
            assert h.texts.gather(h.frame[column]).to_list() == batch[column].to_list()
    table, texts = assemble(held, CONFIG, labels)
    assert table.schema["job_id"] == CODE_TYPE and table.schema["message"] == CODE_TYPE
    decoded = texts.decoded(table)
    assert decoded["job_id"].to_list() == ["j-1", "j-1", "j-2", None]
    assert decoded["order_id"].to_list() == [None, "o-1", None, None]
    assert decoded["message"].to_list() == [None, "start", "done", "done"]
    assert texts.values.to_list() == ["done", "j-1", "j-2", "o-1", "start"]


@pytest.mark.parametrize("unused_first", [False, True], ids=["dense", "with-unused-code"])
def test_a_column_pool_gives_each_code_its_text(unused_first: bool):
    # A code no row uses (a text cast into the pool first) must not shift the texts after it.
    pool = pl.Categories.random()
    held = pl.Series(["unused"] if unused_first else []).cast(pl.Categorical(pool))  # polars empties a pool no column uses
    values = ["j-2", None, "j-1", "j-2", ""]
    column = pl.Series(values).cast(pl.Categorical(pool))
    texts = _pool_texts(column, pool)
    assert texts.gather(column.to_physical()).to_list() == values
    assert ("unused" in texts.to_list()) == unused_first
    del held


def test_a_text_in_two_coded_columns_of_a_batch_merges_into_one():
    one = _batch([{"s": 0, "line": 1, "job_id": "x-1", "event_id": "x-1", "message": "x-1"},
                  {"s": 1, "line": 2, "job_id": "j-1", "event_id": "x-1"}])
    labels = LabelPool()
    held = held_for_assembly(one, CODED, labels)
    for column in ("job_id", "event_id", "message"):
        assert held.texts.gather(held.frame[column].drop_nulls()).to_list() == one[column].drop_nulls().to_list()
    table, texts = assemble([held], CONFIG, labels)
    assert texts.values.to_list() == ["j-1", "x-1"]
    assert table["job_id"].to_list() == [1, 0] and table["event_id"].to_list() == [1, 1] and table["message"].to_list() == [1, None]


@pytest.mark.parametrize("logs", CASES, ids=lambda p: p.parent.name if p.name == "logs" else p.name)
def test_a_read_holds_codes_that_decode_to_what_was_logged(logs: Path):
    result = ingest([str(logs)], CONFIG)
    table, texts = result.table, result.texts
    coded = [c for c in CODED if c in table.columns]
    assert coded and all(table.schema[c] == CODE_TYPE for c in coded)
    assert texts.values.is_sorted() and texts.values.n_unique() == texts.values.len()
    assert texts.values.null_count() == 0
    # The same rows as text: the cached table stores every file's rows as text, read back here.
    as_text = texts.decoded(table)
    every_text = pl.concat([as_text[c].drop_nulls() for c in coded]).unique().sort()
    assert every_text.to_list() == texts.values.to_list()  # no text the table does not use
    assert all(as_text.schema[c] == pl.String for c in coded)
    messages = as_text["message"].drop_nulls()
    assert messages.len() and not messages.str.contains(r"^\d+$").all()


def test_correlation_refuses_codes_without_their_dictionary():
    table = ingest([str(CASES[0])], CONFIG).table
    with pytest.raises(ValueError, match="dictionary"):
        correlate(table, CONFIG.link_keys)


def test_correlation_of_codes_equals_correlation_of_text():
    result = ingest([str(CASES[2])], CONFIG)
    coded = correlate(result.table, CONFIG.link_keys, texts=result.texts)
    plain = correlate(result.texts.decoded(result.table), CONFIG.link_keys)
    assert coded.actions.equals(plain.actions)
    assert coded.executions.equals(plain.executions)
    assert result.texts.decoded(coded.table).equals(plain.table)


def _deliveries(rows: list[tuple[str | None, int, str, int]]) -> pl.DataFrame:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return pl.DataFrame(
        [{"rid": i, "ts": start + timedelta(seconds=s), "kind": kind, "queue": "q", "action_id": action, "exec_id": i,
          "job_id": job} for i, (job, action, kind, s) in enumerate(rows)],
        schema={"rid": pl.UInt32, "ts": pl.Datetime("us", "UTC"), "kind": pl.String, "queue": pl.String,
                "action_id": pl.Int64, "exec_id": pl.Int64, "job_id": pl.String},
    )


def test_redelivery_gaps_of_codes_come_in_the_order_of_their_texts():
    # Messages are job ids, else "action:N": an action's text sorts among the job ids, and
    # "action:7" is also a job id here (one message either way).
    rows = [
        ("b-job", 1, "receive", 0), ("b-job", 1, "receive", 40),
        (None, 12, "receive", 1), (None, 12, "receive", 32),
        ("action:7", 7, "receive", 2), (None, 7, "receive", 33),
        ("zed", 3, "receive", 3), ("zed", 3, "receive", 35),
        (None, 2, "receive", 4), (None, 2, "receive", 36),
        ("aaa", 4, "receive", 5), ("aaa", 4, "receive", 37),
    ]
    plain = _deliveries(rows)
    texts = Texts.of(plain, CODED)
    coded = texts.encoded(plain)
    expected = redelivery_gaps(plain)
    got = redelivery_gaps(coded, texts=texts)
    assert got.equals(expected)
    assert got["message"].to_list() == ["aaa", "action:12", "action:2", "action:7", "b-job", "zed"]


def test_id_columns_are_coded():
    assert set(ID_COLUMNS) <= set(CODED) and "message" in CODED
    assert "custom_key" in coded_columns(("custom_key",))


def test_lists_of_codes_decode_in_order_and_empty_or_null_lists_become_empty():
    texts = _texts(["a", "b", "c"])
    frame = pl.DataFrame({
        "ids": pl.Series([[2, 0], [], None, [1]], dtype=pl.List(CODE_TYPE)),
        "none": pl.Series([[], [], [], []], dtype=pl.List(CODE_TYPE)),
        "n": [1, 2, 3, 4],
    })
    out = texts.decoded_lists(frame, "ids", "none", "missing")
    assert out["ids"].to_list() == [["c", "a"], [], [], ["b"]]
    assert out["none"].to_list() == [[], [], [], []]
    assert out["n"].to_list() == [1, 2, 3, 4]

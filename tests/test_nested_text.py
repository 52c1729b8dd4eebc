"""Nested objects read as text keep their escapes: a path into them finds what the line holds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import orjson
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.nested_text import repaired

CONFIG = load_config(cwd=Path("/"))
# What polars' reader wrote unescaped: backslashes, control characters; and what it escapes.
TRICKY = st.text(alphabet=st.sampled_from(["\\", '"', "\t", "\n", "\x1b", "\x00", "\x7f", "/", "a", "é", "\u2028", "{", "}"]), max_size=8)
# Keys hold the same characters but a quote: see test_a_quote_inside_a_key.
KEYS = st.text(alphabet=st.sampled_from(["\\", "\t", "\n", "\x1b", "\x00", "/", "a", "é", "{", "}", " ", ":"]), max_size=6)
NESTED = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


def _read(lines: list[str], keys: list[str]) -> pl.DataFrame:
    payload = "\n".join(lines).encode()
    return pl.read_ndjson(io.BytesIO(payload), schema={k: pl.String for k in keys})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["payload", "ctx", "message"]), NESTED, max_size=3), min_size=1, max_size=6))
def test_every_structured_value_is_its_json_text(records):
    lines = [json.dumps(r) for r in records]
    keys = ["payload", "ctx", "message"]
    frame = repaired(_read(lines, keys), pl.Series(lines))
    for record, row in zip(records, frame.iter_rows(named=True)):
        for key in keys:
            value = record.get(key)
            if isinstance(value, (dict, list)) and value:
                assert orjson.loads(row[key]) == value
            elif isinstance(value, str):
                assert row[key] == value  # a string is read as it is, never taken for JSON text


def test_a_quote_inside_a_key():
    """A quote inside a key is written as it is too: a quote between two other characters of a
    key is recognised (a quote next to a space, a bracket, `:` or `,` is not: no log record's
    key holds one)."""
    records = [{"payload": {'say "hi"': 1, "event_id": "e1"}}, {"payload": {'a"b': {"c": 'd"e'}}}]
    lines = [json.dumps(r) for r in records]
    frame = repaired(_read(lines, ["payload"]), pl.Series(lines))
    assert [orjson.loads(v) for v in frame["payload"]] == [r["payload"] for r in records]


def test_the_reader_still_loses_escapes():
    """What the repair is for (pola-rs/polars#26574): if polars writes nested text escaped one day,
    this fails and the repair can go."""
    line = json.dumps({"payload": {"note": "C:\\tmp", "event_id": "e1"}})
    read = _read([line], ["payload"])["payload"][0]
    assert orjson.loads(repaired(_read([line], ["payload"]), pl.Series([line]))["payload"][0]) == {"note": "C:\\tmp", "event_id": "e1"}
    try:
        assert orjson.loads(read) != {"note": "C:\\tmp", "event_id": "e1"}
    except orjson.JSONDecodeError:
        pass


def test_a_nested_id_beside_a_backslash_is_read(tmp_path):
    """`payload.event_id` on lines whose payload also holds a Windows path, an escaped quote, a tab
    or a terminal colour: each id reaches the table (one was lost a line before)."""
    notes = ["plain", "saved to C:\\tmp\\x", 'customer wrote "hi \\"there\\""', "a\tb", "\x1b[32mok\x1b[0m", "{\"inner\": \"j\\\\\"}"]
    rows = [
        {"ts": f"2026-11-29T07:00:{i:02d}.000Z", "level": "info", "event": "job_started", "worker": "w1",
         "payload": {"note": note, "event_id": f"evt{i}"}}
        for i, note in enumerate(notes)
    ]
    (tmp_path / "w.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = ingest([str(tmp_path)], CONFIG).text_table().sort("line")
    assert table["event_id"].cast(pl.String).to_list() == [f"evt{i}" for i in range(len(notes))]


def test_an_envelope_object_keeps_its_escapes(tmp_path):
    """A log sink's LogEntry lines (gcp-logging) whose jsonPayload holds backslashes: the message
    is what the worker wrote, as the same entries read as a `gcloud logging read` array give it."""
    messages = ["user said \"hi\" at C:\\tmp", "regex ^\\d+$ matched", "tab\there"]
    entries = [
        {"insertId": f"id{i}", "logName": "projects/p/logs/stdout", "timestamp": f"2026-11-29T07:00:0{i}.000Z",
         "resource": {"type": "k8s_container", "labels": {"pod_name": "worker-a"}},
         "jsonPayload": {"event": "job_started", "job_id": f"j{i}", "message": message}}
        for i, message in enumerate(messages)
    ]
    (tmp_path / "lines").mkdir()
    (tmp_path / "lines" / "sink.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    (tmp_path / "array").mkdir()
    (tmp_path / "array" / "read.json").write_text(json.dumps(entries, indent=2))
    for folder in ("lines", "array"):
        table = ingest([str(tmp_path / folder)], CONFIG).text_table().sort("line")
        assert table["message"].cast(pl.String).to_list() == messages, folder
        assert table["job_id"].cast(pl.String).to_list() == ["j0", "j1", "j2"], folder

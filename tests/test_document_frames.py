"""A document's records unwrapped by polars give the rows the preset gives them one at a time in Python."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind.config import load_config
from dupfind.document_frames import RecordReader
from dupfind.envelopes import unwrapped_frame
from dupfind.json_values import ValueCutter
from dupfind.presets import unwrap_record

PRESETS = {p.name: p for p in load_config(cwd=Path("/")).presets}
HANDLED = sorted(name for name, p in PRESETS.items() if RecordReader.handles(p) and p.kind == "json")
TEXT = st.text(alphabet=st.sampled_from(["a", "0", " ", "\\", '"', "\t", "\n", "\x1b", "é", "{", "}", ",", "Z", "T", ":"]), max_size=8)
SCALAR = st.none() | st.booleans() | st.integers(-2**62, 2**62) | TEXT
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(TEXT, inner, max_size=2), max_leaves=5)


@st.composite
def records(draw, preset):
    """Records of a preset's shape: its paths (nested or as dotted keys) holding anything, or not there."""
    record = draw(st.dictionaries(TEXT, VALUE, max_size=2))
    for path in (*preset.inner, *(p for ps in preset.fields.values() for p in ps)):
        if draw(st.booleans()):
            continue
        value = draw(VALUE | st.just("") | st.just("2026-11-29T07:00:00Z") | st.just("000"))
        if "." in path and draw(st.booleans()):
            node = record
            *parents, last = path.split(".")
            for part in parents:
                child = node.get(part)
                node = node.setdefault(part, {}) if isinstance(child, dict) or part not in node else None
                if node is None:
                    break
            if node is not None:
                node[last] = value
        else:
            record[path] = value
    if isinstance(value := next((record.get(p) for p in preset.inner if isinstance(record.get(p), dict)), None), dict) \
            and len(value) == 1 and next(iter(value)).endswith("Value"):
        record.pop(preset.inner[0], None)  # an OpenTelemetry AnyValue: only OTLP's records are rewritten
    return record


def _python_rows(preset, values: list) -> tuple[pl.DataFrame, list[int]]:
    good, bad = [], []
    for position, value in enumerate(values, start=1):
        unwrapped = unwrap_record(preset, value)
        (bad.append(position) if unwrapped is None else good.append((position, unwrapped)))
    return unwrapped_frame(good), bad


def _same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    assert got.columns == want.columns
    for column in got.columns:
        mine, theirs = got[column].to_list(), want[column].to_list()
        if column != "line":  # an object as JSON text: the same object (spacing aside)
            mine, theirs = [_decoded(t) for t in mine], [_decoded(t) for t in theirs]
        assert mine == theirs, column


def _decoded(text):
    try:
        return json.loads(text) if text and text[0] in "{[" else text
    except ValueError:
        return text


@pytest.mark.parametrize("name", HANDLED)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_records_unwrapped_by_polars_are_those_unwrapped_one_at_a_time(name, data):
    preset = PRESETS[name]
    values = data.draw(st.lists(records(preset) | st.sampled_from([5, "text", [1]]), min_size=1, max_size=6))
    got = RecordReader(preset).records(values, 1)
    assert got is not None
    want, not_records = _python_rows(preset, values)
    _same(got[0], want)
    assert got[1].to_list() == not_records


@pytest.mark.parametrize("name", HANDLED)
@settings(max_examples=40, deadline=None)
@given(data=st.data(), indent=st.sampled_from([None, 2, 4]), ascii_only=st.booleans())
def test_an_array_s_elements_read_as_lines_are_the_records(name, data, indent, ascii_only):
    """The elements of an array as written (compact or indented, escaped or not), read by polars:
    the rows of the same records parsed in Python."""
    preset = PRESETS[name]
    values = data.draw(st.lists(records(preset), min_size=2, max_size=6))
    text = json.dumps(values, indent=indent, ensure_ascii=ascii_only).encode()
    cutter = ValueCutter(in_array=True)
    first = cutter.feed(text[:text.index(b"{") + 1])  # the `[` behind, nothing cut yet
    assert first == []
    elements = cutter.elements(text[text.index(b"{") + 1:].rstrip()[:-1])
    got = RecordReader(preset).read(elements, 1) if elements else None
    if got is None:  # refused: a `},{` in a string or a nested array was taken for a cut
        return
    rows, not_records, count = got
    want = RecordReader(preset).records(values[:count], 1)
    _same(rows, want[0])
    assert not_records.to_list() == want[1].to_list() == []


def test_a_search_hit_s_source_is_its_record():
    """Hits whose `_source` is the record (elasticsearch): one without a `_source`, or with a null
    one, is not a record."""
    preset = PRESETS["elasticsearch"]
    sources = [{"@timestamp": f"2026-11-29T07:00:0{k}Z", "message": json.dumps({"job_id": f"j{k}", "note": "C:\\x"}),
                "kubernetes": {"pod": {"name": f"w-{k}\\a"}}} for k in range(3)]
    hits = [{"_id": "a", "_source": sources[0]}, {"_id": "b"}, {"_id": "c", "_source": None},
            {"_id": "d", "_source": sources[1]}, {"_id": "e", "_source": sources[2]}]
    elements = json.dumps(hits, indent=2).encode().strip()[1:-1].strip()
    rows, not_records, count = RecordReader(preset, "_source").read(elements, 10)
    assert count == 5 and not_records.to_list() == [11, 12]
    want = RecordReader(preset).records(sources, 1)[0].with_columns(line=pl.Series([10, 13, 14]))
    _same(rows, want)
    assert rows["envelope.kubernetes.pod.name"].to_list() == ["w-0\\a", "w-1\\a", "w-2\\a"]

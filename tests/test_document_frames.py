"""A document's records unwrapped by polars give the rows the preset gives them one at a time in Python."""

from __future__ import annotations

import json
from dataclasses import replace
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
# A framework's line at a path of its own (`inner_lines_at`) in a preset polars reads (Datadog's,
# which has one, is rewritten in Python: its tags are a list).
PRESETS["elasticsearch-lines-at"] = replace(PRESETS["elasticsearch"], name="elasticsearch-lines-at",
                                            inner_lines_at=("event.original", "line"))
HANDLED = sorted(name for name, p in PRESETS.items() if RecordReader.handles(p) and p.kind == "json")
FRAMEWORK_LINES = st.sampled_from([
    "[2026-11-29 07:00:01,417: INFO/MainProcess] Task notify.send_push[8f1c] received",
    "[2026-11-29 07:00:01,417: ERROR/ForkPoolWorker-2] Task notify.send_push[8f1c] raised\nTraceback (most recent call last):",
    '{"job_id": "j1"}', "07:00:01 default: notify.send_push(8f1c) (8f1c)",
])
TEXT = st.text(alphabet=st.sampled_from(["a", "0", " ", "\\", '"', "\t", "\n", "\x1b", "é", "{", "}", ",", "Z", "T", ":"]), max_size=8)
# Keys hold no quote: polars writes a key as it is, and a quote next to a space in one is not
# recognised (tests/test_nested_text.py: test_a_quote_inside_a_key).
KEY = st.text(alphabet=st.sampled_from(["a", "0", " ", "\\", "\t", "\n", "\x1b", "é", "{", "}", ",", ":"]), max_size=6)
SCALAR = st.none() | st.booleans() | st.integers(-2**62, 2**62) | TEXT
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(KEY, inner, max_size=2), max_leaves=5)


@st.composite
def records(draw, preset):
    """Records of a preset's shape: its paths (nested or as dotted keys) holding anything, or not there."""
    record = draw(st.dictionaries(KEY, VALUE, max_size=2))
    for path in (*preset.inner, *preset.inner_lines_at, *(p for ps in preset.fields.values() for p in ps)):
        if draw(st.booleans()):
            continue
        value = draw(VALUE | st.just("") | st.just("2026-11-29T07:00:00Z") | st.just("000") | FRAMEWORK_LINES)
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


def _elements(values: list, indent, ascii_only: bool, known: bool) -> tuple[bytes, bytes | None]:
    """An array's elements as written, after its `[`, as ValueCutter gives them (all but the
    last, which no cut follows), and the bytes json.dumps writes between two of them if the
    cutter is to know them (`known`: it learns them from the first cut it parses)."""
    text = json.dumps(values, indent=indent, ensure_ascii=ascii_only).encode()
    cutter = ValueCutter(in_array=True)
    assert cutter.feed(text[:1]) == []
    if known:
        cutter.separator = b"}, {" if indent is None else b"},\n" + b" " * indent + b"{"
    return cutter.elements(text[1:-1]), cutter.separator


@pytest.mark.parametrize("name", HANDLED)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), indent=st.sampled_from([None, 2, 4]), ascii_only=st.booleans())
def test_an_array_s_elements_read_by_polars_are_its_records_unwrapped_one_at_a_time(name, data, indent, ascii_only):
    """The elements of an array as written (compact or indented, escaped or not) read by polars
    give the rows the preset gives the same records one at a time (`unwrap_record`), elements
    that are not objects refused."""
    preset = PRESETS[name]
    values = data.draw(st.lists(records(preset), min_size=3, max_size=7))
    if data.draw(st.booleans()):
        values[1] = data.draw(st.sampled_from([5, "text", [1], None]))
    elements, separator = _elements(values, indent, ascii_only, data.draw(st.booleans()))
    if not elements:  # no cut: an element that is not an object before the last
        assert not all(isinstance(v, dict) for v in values[:-1])
        return
    got = RecordReader(preset).read(elements, 1, separator)
    if got is None:  # refused: not an object, or a cut taken in a string or a nested array
        # (indented, the bytes between two elements are nowhere else: no string holds a line break)
        assert not all(isinstance(v, dict) for v in values) or separator is None or indent is None
        return
    rows, not_records, count = got
    assert count == len(values) - 1 and all(isinstance(v, dict) for v in values[:count])
    want, python_not_records = _python_rows(preset, values[:count])
    _same(rows, want)
    assert not_records.to_list() == python_not_records == []


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
    want, _ = _python_rows(preset, sources)
    _same(rows, want.with_columns(line=pl.Series([10, 13, 14])))
    assert rows["envelope.kubernetes.pod.name"].to_list() == ["w-0\\a", "w-1\\a", "w-2\\a"]

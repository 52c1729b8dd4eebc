"""A file read a block at a time gives what it gives read whole: no cut splits a record of several lines."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dupfind import ingest as ingest_module
from dupfind.config import load_config
from dupfind.formats import SAMPLE_BYTES, sniff_format
from dupfind.ingest import ingest
from dupfind.record_cuts import whole_records
from dupfind.schema import as_strings

from conftest import FIXTURES

CONFIG = load_config()


def _read_by_lines(path: Path) -> bool:
    """Whether the reader takes the file a block of lines at a time (not a JSON document, YAML, a CSV
    export or a file of one document a line), as Ingestor.read decides."""
    sniff = sniff_format(path.read_bytes()[:SAMPLE_BYTES], presets=CONFIG.presets)
    return not (sniff.binary or sniff.csv_preset or sniff.line_documents or sniff.document or sniff.yaml)


LINE_FILES = sorted(p for p in (FIXTURES / "formats").glob("*/logs/**/*") if p.is_file() and _read_by_lines(p))
# Fixtures whose records span lines: a cut falls inside one of them when the file is read in small blocks.
MULTI_LINE = {"aws-cli-text", "celery-worker", "cri-partial", "rq-worker"}


def _leading_continuations(tail: bytes, head: bytes) -> int:
    """A stand-in parser: lines that start with a space continue the record before them."""
    size = 0
    for line in head.splitlines(keepends=True):
        if not line.startswith(b" ") or not tail:
            break
        size += len(line)
    return size


@st.composite
def _chunked_lines(draw):
    lines = draw(st.lists(st.sampled_from([b"rec", b" more", b" and more", b"", b"x" * 50]), min_size=1, max_size=60))
    data = b"".join(line + b"\n" for line in lines)
    ends = sorted(set(draw(st.lists(st.integers(1, len(lines)), max_size=10))))
    offsets = [0] + [sum(len(line) + 1 for line in lines[:end]) for end in ends] + [len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(offsets) if b > a]
    return data, chunks


@settings(max_examples=300, deadline=None)
@given(_chunked_lines(), st.integers(1, 400))
def test_whole_records_moves_continuations_onto_the_chunk_before(case, limit):
    data, chunks = case
    out = list(whole_records(iter(chunks), _leading_continuations, limit))
    assert b"".join(out) == data
    assert all(chunk.endswith(b"\n") for chunk in out)
    unlimited = list(whole_records(iter(chunks), _leading_continuations, 1 << 30))
    assert b"".join(unlimited) == data
    assert not any(chunk.startswith(b" ") for chunk in unlimited[1:])
    assert len(unlimited) <= len(chunks)


def test_whole_records_stops_at_its_limit():
    chunks = [b"rec\n", b" a\n" * 100, b" b\n" * 100, b"rec\n"]
    out = list(whole_records(iter(chunks), _leading_continuations, 250))
    assert b"".join(out) == b"".join(chunks)
    assert len(out[0]) <= 4 + 250 + 3  # at most the limit moved (whole lines)
    assert out[1].startswith(b" ")  # the rest of the record stays where it was cut


def _years_apart(data: bytes, copies: int) -> bytes:
    """The file's lines again and again, each copy in another year: records of their own, not
    copies of the first (which dupfind drops as a log read twice)."""
    body = data if data.endswith(b"\n") else data + b"\n"
    return b"".join(re.sub(rb"\b2026([-/])", b"%d\\1" % (1990 + k), body) for k in range(copies))


def _accounting(result):
    return [(f.format, f.lines, f.records, f.blank, dict(f.rejected)) for f in result.files]


@pytest.mark.parametrize("path", LINE_FILES, ids=[f"{p.parts[-3]}/{p.name}" for p in LINE_FILES])
def test_a_file_in_small_blocks_reads_as_whole(path: Path, tmp_path, monkeypatch):
    data = path.read_bytes()
    copies = max(3, 40_000 // max(len(data), 1))
    log = tmp_path / path.name
    log.write_bytes(_years_apart(data, copies))
    whole = ingest([str(log)], CONFIG)
    moved: list[int] = []
    continued = ingest_module.LineParser.continued_bytes

    def counted(self, tail, head, envelope):
        moved.append(continued(self, tail, head, envelope))
        return moved[-1]

    monkeypatch.setattr(ingest_module.LineParser, "continued_bytes", counted)
    for block_bytes in (4096, 1500):
        blocks = ingest([str(log)], CONFIG, block_bytes=block_bytes)
        assert as_strings(blocks.table).equals(as_strings(whole.table))
        assert blocks.rejects.sort("source", "line").equals(whole.rejects.sort("source", "line"))
        assert [a[1:] for a in _accounting(blocks)] == [a[1:] for a in _accounting(whole)]
    assert moved, "the file was read in one block: no cut was made"
    if path.parts[-3] in MULTI_LINE:
        assert any(moved), "no cut fell inside a record of several lines: the case shows nothing"

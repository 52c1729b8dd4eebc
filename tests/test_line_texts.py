"""Rejected lines of files get their text read again; the read's raw records of file lines carry none."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import polars as pl
import pytest

from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.line_texts import line_texts, with_line_texts
from dupfind.normalize import TEXT
from dupfind.sources import expand_inputs

CONFIG = load_config(cwd=Path("/"))


def _lines(count: int) -> list[str]:
    """Lines of several lengths, some with text outside ASCII."""
    return [f'{{"ts":"2026-07-21T10:00:{i % 60:02d}Z","event":"job_started","job_id":"j-{i}","note":"{"é" * (i % 7)}"}}'
            for i in range(count)]


@pytest.mark.parametrize("chunk_bytes", [64, 1000, 8 << 20])
@pytest.mark.parametrize("shape", ["plain", "bom-crlf", "gzip", "no-final-newline"])
def test_lines_read_again_are_the_lines_as_read(tmp_path, shape, chunk_bytes) -> None:
    lines = _lines(300)
    newline = "\r\n" if shape == "bom-crlf" else "\n"
    data = (newline.join(lines) + ("" if shape == "no-final-newline" else newline)).encode()
    if shape == "bom-crlf":
        data = b"\xef\xbb\xbf" + data
    if shape == "gzip":
        data = gzip.compress(data)
    path = tmp_path / "worker.log"
    path.write_bytes(data)
    wanted = pl.Series([1, 2, 77, 150, 151, 299, 300], dtype=pl.Int64)
    found = line_texts(expand_inputs([str(path)])[0], wanted, chunk_bytes=chunk_bytes)
    assert found["line"].to_list() == wanted.to_list()
    assert found["text"].to_list() == [lines[n - 1] for n in wanted.to_list()]


def test_lines_a_file_no_longer_has_are_left_out(tmp_path) -> None:
    path = tmp_path / "worker.log"
    path.write_text("\n".join(_lines(10)) + "\n")
    found = line_texts(expand_inputs([str(path)])[0], pl.Series([3, 10, 11, 500]))
    assert found["line"].to_list() == [3, 10]


def _mixed_log(tmp_path: Path) -> tuple[Path, dict[int, str]]:
    """A worker log whose lines 4 and 9 have no timestamp and line 7 one that does not parse."""
    lines = _lines(12)
    lines[3] = '{"event":"job_started","job_id":"j-3"}'
    lines[6] = '{"ts":"yesterday at noon","event":"job_started","job_id":"j-6"}'
    lines[8] = '{"level":"info","msg":"heartbeat"}'
    path = tmp_path / "worker.log"
    path.write_text("\n".join(lines) + "\n")
    return path, {4: lines[3], 7: lines[6], 9: lines[8]}


def _time_rejects(read) -> dict[int, tuple[str, str]]:
    rejects = read.rejects.filter(pl.col("reason").is_in(["no_timestamp", "bad_timestamp"]))
    return {line: (reason, text) for line, reason, text in rejects.select("line", "reason", "text").iter_rows()}


@pytest.fixture
def carried_text(monkeypatch) -> list[bool]:
    """Whether each raw frame normalised carried the lines' text."""
    import dupfind.ingest

    normalize = dupfind.ingest.normalize
    seen: list[bool] = []

    def spy(raw, config, fmt):
        seen.append(TEXT in raw.columns)
        return normalize(raw, config, fmt)

    monkeypatch.setattr("dupfind.ingest.normalize", spy)
    return seen


def test_rejected_lines_of_a_file_keep_their_text_though_the_raw_records_carry_none(tmp_path, carried_text) -> None:
    path, bad = _mixed_log(tmp_path)
    read = ingest([str(path)], CONFIG)
    assert carried_text and not any(carried_text)
    rejects = _time_rejects(read)
    assert {line: text for line, (_, text) in rejects.items()} == bad
    assert rejects[7][0] == "bad_timestamp" and rejects[4][0] == rejects[9][0] == "no_timestamp"


def test_standard_input_keeps_the_text_on_its_raw_records(tmp_path, monkeypatch, carried_text) -> None:
    path, bad = _mixed_log(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    read = ingest(["-"], CONFIG)
    assert carried_text and all(carried_text)
    assert {line: text for line, (_, text) in _time_rejects(read).items()} == bad


def test_a_file_cut_short_since_its_read_leaves_the_text_out_not_the_line(tmp_path) -> None:
    path, bad = _mixed_log(tmp_path)
    sources = expand_inputs([str(path)])
    rejects = pl.DataFrame({
        "source": [str(path)] * 3, "line": [4, 7, 9], "reason": ["no_timestamp", "bad_timestamp", "no_timestamp"],
        "text": [None, None, None],
    }, schema={"source": pl.String, "line": pl.Int64, "reason": pl.String, "text": pl.String})
    path.write_text("\n".join([bad[4]] * 5) + "\n")  # rotated: five lines now
    filled = with_line_texts(rejects, sources)
    assert filled["line"].to_list() == [4, 7, 9] and filled["text"].to_list() == [bad[4], None, None]
    path.unlink()
    assert with_line_texts(rejects, sources)["text"].null_count() == 3

"""A cache file's end written to an output: by the kernel from the mapped file, or through the output."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from dupfind.mapped_file import close_mapped, map_file, write_end

HEADER = b"set key\nDFCACHE out 1234 99\n"
BODY = b"".join(b'{"line": %d, "text": "%s"}\n' % (i, b"x" * (i % 97)) for i in range(40_000))  # ~2.5 MB


@pytest.fixture
def stored(tmp_path: Path) -> memoryview:
    path = tmp_path / "blob.out"
    path.write_bytes(HEADER + BODY)
    mapped = map_file(path)
    return memoryview(mapped)[len(HEADER):]


def _sendfile_calls(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = os.sendfile

    def counting(out_fd, in_fd, offset, count):
        calls.append(offset)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counting)
    return calls


@pytest.mark.skipif(not hasattr(os, "sendfile"), reason="no sendfile on this platform")
def test_the_end_of_a_mapped_file_goes_to_a_file_by_the_kernel(stored, tmp_path, monkeypatch) -> None:
    calls = _sendfile_calls(monkeypatch)
    target = tmp_path / "report.json"
    with target.open("wb") as out:
        out.write(b"before\n")  # buffered: flushed ahead of the kernel's copy
        write_end(out, stored)
        out.write(b"after\n")
    assert target.read_bytes() == b"before\n" + BODY + b"after\n"
    assert calls and calls[0] == len(HEADER)  # from the body's offset in the file


@pytest.mark.skipif(not hasattr(os, "sendfile"), reason="no sendfile on this platform")
def test_a_pipe_gets_the_same_bytes_and_a_closed_one_says_so(stored) -> None:
    read_end, write_fd = os.pipe()
    got: list[bytes] = []

    def drain() -> None:  # a reader emptying the pipe while the bytes go in
        with os.fdopen(read_end, "rb") as pipe:
            got.append(pipe.read())

    reader = threading.Thread(target=drain)
    reader.start()
    with os.fdopen(write_fd, "wb") as out:
        write_end(out, stored)
    reader.join(timeout=60)
    assert got == [BODY]
    read_end, write_fd = os.pipe()
    os.close(read_end)
    with pytest.raises(BrokenPipeError), os.fdopen(write_fd, "wb") as out:
        write_end(out, stored)


def test_an_output_without_a_descriptor_or_plain_bytes_go_through_write(stored) -> None:
    out = io.BytesIO()
    write_end(out, stored)
    write_end(out, b"tail")
    assert out.getvalue() == BODY + b"tail"


def test_what_sendfile_refuses_part_way_goes_through_the_output(stored, tmp_path, monkeypatch) -> None:
    real = os.sendfile
    calls: list[int] = []

    def refusing(out_fd, in_fd, offset, count):
        calls.append(offset)
        if len(calls) > 1:
            raise OSError(22, "Invalid argument")
        return real(out_fd, in_fd, offset, min(count, 100_000))

    monkeypatch.setattr(os, "sendfile", refusing, raising=False)
    target = tmp_path / "report.json"
    with target.open("wb") as out:
        write_end(out, stored)
    assert target.read_bytes() == BODY and len(calls) == 2


def test_an_empty_file_cannot_be_mapped_and_a_mapping_closes(tmp_path) -> None:
    empty = tmp_path / "empty.out"
    empty.write_bytes(b"")
    with pytest.raises(ValueError):
        map_file(empty)
    with pytest.raises(OSError):
        map_file(tmp_path / "missing.out")
    full = tmp_path / "full.out"
    full.write_bytes(HEADER)
    mapped = map_file(full)
    view = memoryview(mapped)
    close_mapped(mapped)  # still viewed: left open
    assert not mapped.closed and bytes(view) == HEADER
    view.release()
    close_mapped(mapped)
    assert mapped.closed and mapped.file.closed

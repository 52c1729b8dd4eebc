"""Cache files mapped rather than read, and their ends copied to an output by the kernel."""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import BinaryIO


class MappedFile(mmap.mmap):
    """A read-only mapping of a whole file, which keeps the file open (`file`): a copy by
    `write_end` then comes from the very file that was mapped and checked, even if its path
    names another file by then (cache entries are replaced by renaming)."""

    file: BinaryIO


def map_file(path: Path | str) -> MappedFile:
    """The file mapped; OSError when it cannot be opened, ValueError when it is empty."""
    fh = open(path, "rb")  # noqa: SIM115 (kept open by the mapping, closed with it by the collector)
    try:
        mapped = MappedFile(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except BaseException:
        fh.close()
        raise
    mapped.file = fh
    return mapped


def close_mapped(mapped: MappedFile) -> None:
    """Unmap the file and close it; a mapping still viewed somewhere is left to the collector."""
    try:
        mapped.close()
    except BufferError:
        return
    mapped.file.close()


def _fileno(out: BinaryIO) -> int | None:
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        return None


def write_end(out: BinaryIO, data: bytes | memoryview) -> None:
    """`out.write(data)`. Where `data` is a view of the end of a MappedFile (a cache file's body
    past its header lines, as result_cache.ResultCache.load_blob gives it) and `out` a file
    descriptor sendfile writes to (a file or a pipe), the kernel copies the bytes from the file's
    pages: a 32 MB report took 8-10 ms instead of 26-107 ms through a buffer. Otherwise, and for
    what sendfile refused, through `out`."""
    if not isinstance(data, memoryview):
        out.write(data)
        return
    mapped, fd = data.obj, _fileno(out)
    if isinstance(mapped, MappedFile) and fd is not None and hasattr(os, "sendfile") and data.nbytes <= len(mapped):
        out.flush()
        offset, sent = len(mapped) - data.nbytes, 0
        try:
            while sent < data.nbytes:
                count = os.sendfile(fd, mapped.file.fileno(), offset + sent, data.nbytes - sent)
                if count == 0:
                    break
                sent += count
        except BrokenPipeError:
            raise
        except OSError:
            pass  # an output sendfile does not write to (a terminal, a file opened to append)
        data = data[sent:]
    if data.nbytes:
        out.write(data)

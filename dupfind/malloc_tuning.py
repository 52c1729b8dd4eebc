"""glibc's malloc told to give freed memory back to the system (Linux with glibc only)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
# Blocks of this size and more get a mapping of their own, unmapped when freed.
MMAP_THRESHOLD = 256 << 10
# Free memory at the top of the heap past this much goes back to the system.
TRIM_THRESHOLD = 1 << 20
DEFAULT_TOP_PAD = 128 << 10  # glibc's own (DEFAULT_TOP_PAD in malloc.c)
# While files are read (reading_heap): blocks up to this size come from the heap, and this much
# of its free top is kept when it is trimmed.
READ_MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64 bits)
READ_TOP_PAD = 16 << 20

_tuned = False


def is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError, AttributeError):  # no such name here (not Linux, or another libc)
        return False


def return_large_blocks() -> bool:
    """Set glibc's mmap and trim thresholds once per process; False where that is not glibc.

    glibc raises its mmap threshold to the size of each mapped block freed, up to 32 MiB: after the
    first chunks of a read, Python's 8 MB byte strings of log lines, and the large lists and dicts
    of a report, are carved from the heap, whose free space is not given back. polars allocates
    through jemalloc (see dupfind/__init__); this is the Python side. Fixed thresholds lowered a
    1M-line analyze's peak RSS by 15-20 MiB in every stage after the read, in the same time.
    """
    global _tuned
    if _tuned:
        return True
    libc = _glibc()
    if libc is None:
        return False
    try:
        ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    except AttributeError:
        return False
    _tuned = ok
    return ok


@contextmanager
def reading_heap() -> Iterator[None]:
    """While files are read, the byte strings of their blocks (a file's bytes, a batch of small
    files joined, a block's JSON lines joined: up to 8 MB each, one after another) come from the
    heap, which keeps 16 MiB of its free top, instead of a fresh mapping each: a page of a fresh
    mapping costs a fault when first written, 4-5 us each on the VMs measured (a 1M-line read
    wrote 290,000 such pages on its reading thread: 0.8-1.0 s of system time, now 0.3-0.45 s).
    The read's own peak is 10-25 MiB higher, below the table's assembly that follows: the
    thresholds are put back and the heap's free pages returned before it."""
    libc = _glibc() if _tuned else None
    if libc is None:
        yield
        return
    try:
        libc.mallopt(M_MMAP_THRESHOLD, READ_MMAP_THRESHOLD)
        libc.mallopt(M_TOP_PAD, READ_TOP_PAD)
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TOP_PAD, DEFAULT_TOP_PAD)
        trim_heap()


def trim_heap() -> None:
    """Return glibc's free heap pages to the system now (nothing elsewhere)."""
    libc = _glibc()
    if libc is not None:
        try:
            libc.malloc_trim(0)
        except AttributeError:
            pass


def _glibc():
    """The C library through ctypes, when it is glibc (imported only then: a command the cache
    answers loads neither ctypes nor polars)."""
    if not is_glibc():
        return None
    import ctypes

    try:
        return ctypes.CDLL(None)
    except OSError:
        return None

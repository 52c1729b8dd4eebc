"""glibc's malloc told to give freed memory back to the system (Linux with glibc only)."""

from __future__ import annotations

import os

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks of this size and more get a mapping of their own, unmapped when freed.
MMAP_THRESHOLD = 256 << 10
# Free memory at the top of the heap past this much goes back to the system.
TRIM_THRESHOLD = 1 << 20

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

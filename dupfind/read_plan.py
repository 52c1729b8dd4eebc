"""Before a read: whole or in windows of time, and the sizes and durations the options give.

What a command decides before it reads anything, kept apart from the windowed read itself
(dupfind.windows): a command answered from the cache needs it, and nothing else of the windows."""

from __future__ import annotations

import re
import sys

from dupfind import memory_check
from dupfind.cache import default_cache_dir
from dupfind.errors import DupfindError
from dupfind.sources import expand_inputs

# Windows are planned to need this share of the memory they may use: what earlier windows left
# (their findings, pages the allocators return later) and the estimate's error need the rest
# (measured: the 1M-line export in a 600 MB cgroup, 5M lines with --memory-limit 1GB).
PLANNED_SHARE = 0.85
# Inputs are read whole when the estimate of that read's peak is at most this share of the memory
# they may use: the rest is for the estimate's error and the page cache. The 5M-line export's first
# run (2.0 GB estimated) in a cgroup of 2.1 GB: read whole, 1.85 GB at its peak in 126 s, against
# 106 s in 3 windows; of 2.45 GB: whole, 1.83 GB in 106 s (a whole read's report links repeats
# hours apart, and the commands after it are answered from the cache).
WHOLE_READ_SHARE = PLANNED_SHARE

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}


def parse_size(text: str, option: str) -> int:
    """`8G`, `1.5GB`, `512MiB`, `2000000000` (bytes) as a number of bytes."""
    match = _SIZE.match(text or "")
    if not match or float(match.group(1)) <= 0:
        raise DupfindError(f"{option} {text!r} is not a size: use bytes or a unit, e.g. 8G, 1.5GB, 512MiB.")
    unit, binary = match.group(2).lower(), match.group(3).lower().startswith("i")
    return int(float(match.group(1)) * (_BINARY_UNITS[unit] if binary and unit else _UNITS[unit]))


def window_budget(paths: list[str], limit: int | None, use_cache: bool = False) -> int | None:
    """The memory an analysis of these inputs must stay within when it cannot read them whole:
    `limit` (--memory-limit) or the memory available, if the estimate is above it; else None.
    Standard input and pipes (bash's `<(...)`) cannot be read twice, so they are always read
    whole. With `use_cache`, the estimate of the files' size is kept in the cache directory."""
    try:
        sources = expand_inputs(paths)
    except DupfindError:
        return None  # ingest says what is wrong with the paths
    if not sources:
        return None
    once = next((src for src in sources if not src.rereadable), None)
    if once is not None:  # windows read the inputs more than once
        if limit is not None:
            what = "standard input" if once.file is None else f"{once.path} is not a regular file and"
            say(f"{what} cannot be read twice: these inputs are read whole, whatever --memory-limit says.")
        return None
    budget = limit if limit is not None else memory_check.available_bytes()
    if budget is None:
        return None
    size = memory_check.log_size(sources, memo=default_cache_dir() if use_cache else None)
    if memory_check.needed_bytes(size) <= WHOLE_READ_SHARE * budget:
        return None
    return budget


def parse_duration(text: str, option: str) -> float:
    """`10m`, `90s`, `1.5h`, or plain seconds."""
    match = _DURATION.match(text or "")
    if not match or float(match.group(1)) <= 0:
        raise DupfindError(f"{option} {text!r} is not a duration: use seconds or a unit, e.g. 90s, 10m, 1h.")
    return float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]


def say(text: str) -> None:
    """A line for the user on stderr, as the windowed read says what it does."""
    sys.stderr.write(f"dupfind: {text}\n")
    sys.stderr.flush()

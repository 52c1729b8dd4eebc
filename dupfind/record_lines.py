"""Records of a text envelope that span several lines (an event whose message holds line breaks, printed as they are)."""

from __future__ import annotations

from collections.abc import Sequence

# A record longer than this many lines is taken for a line that never ended (no end in sight).
MAX_RECORD_LINES = 5000


def record_runs(starts: Sequence[bool], ends: Sequence[bool]) -> list[tuple[int, int]]:
    """(first, last) index of each record of several lines: a line that begins one (`starts`) and
    does not end it (`ends`), through the first later line that ends it. A run that meets another
    record's beginning, or no end within MAX_RECORD_LINES, is no record: its lines stay lines."""
    runs: list[tuple[int, int]] = []
    count = len(starts)
    index = 0
    while index < count:
        if starts[index] and not ends[index]:
            last = index + 1
            while last < count and last - index < MAX_RECORD_LINES and not starts[last] and not ends[last]:
                last += 1
            if last < count and ends[last] and not starts[last]:
                runs.append((index, last))
                index = last + 1
                continue
        index += 1
    return runs


def joined_records(lines: list[str], start, end) -> list[str]:
    """`lines` with each record of several lines as one text, its lines joined by line breaks
    (`start` and `end`: the compiled patterns of record_runs' lines)."""
    runs = record_runs([start.search(line) is not None for line in lines], [end.search(line) is not None for line in lines])
    if not runs:
        return lines
    out: list[str] = []
    at = 0
    for first, last in runs:
        out += lines[at:first]
        out.append("\n".join(lines[first:last + 1]))
        at = last + 1
    return out + lines[at:]

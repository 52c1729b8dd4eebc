#!/usr/bin/env python3
"""Where each thread of a dupfind run spends its time, from py-spy's raw samples (issue 8). Prints
figures; asserts nothing; not part of dupfind.

cProfile charges every Python call its own overhead and cannot see what a C call waits on; a
sampling profiler over the real run, grouped by thread, shows which thread is the critical path
and what holds it (how the reading thread's page faults were found, bench/README.md):

    pip install py-spy
    py-spy record -r 200 -f raw -o spy.txt --threads -- python -m dupfind analyze --no-cache --format json LOGS
    python bench/spy_threads.py spy.txt                      # each thread, then the innermost dupfind frames
    python bench/spy_threads.py spy.txt --under parse_block  # what a function's samples went to next

py-spy records a thread's sample only while it runs (not while it waits for a lock or polars'
pool), so the figures are each thread's own work.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

OWN = re.compile(r"\((?:[^()]*/)?(dupfind/[^()]+)\)")  # a frame of dupfind's own code, its path from dupfind/


def samples(path: Path) -> list[tuple[list[str], int]]:
    """(frames outermost first, the thread's name first; count) of each line of py-spy's raw output."""
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            found.append((stack.split(";"), int(count)))
    return found


def thread_name(frame: str) -> str:
    """`thread (0x7f..): MainThread` -> `MainThread`."""
    return frame.rpartition(": ")[2] or frame


def own_frame(frame: str) -> str:
    """A frame as `function (dupfind/module.py:line)`."""
    return OWN.sub(lambda m: f"({m.group(1)})", frame)


def by_thread(found: list[tuple[list[str], int]]) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for frames, count in found:
        counts[thread_name(frames[0])] += count
    return counts


def by_innermost(found: list[tuple[list[str], int]]) -> collections.Counter:
    """Samples by thread and the innermost frame of dupfind's own code (what it was running, or
    the library call it made there)."""
    counts: collections.Counter = collections.Counter()
    for frames, count in found:
        own = [f for f in frames[1:] if OWN.search(f) and "site-packages" not in f]
        counts[(thread_name(frames[0]), own_frame(own[-1]) if own else "(outside dupfind)")] += count
    return counts


def under(found: list[tuple[list[str], int]], function: str) -> tuple[int, collections.Counter]:
    """The samples whose stack holds `function` (its last such frame), by the frame right below it."""
    total, counts = 0, collections.Counter()
    for frames, count in found:
        at = [i for i, f in enumerate(frames) if f.split(" (", 1)[0].endswith(function)]
        if not at:
            continue
        total += count
        below = frames[at[-1] + 1] if at[-1] + 1 < len(frames) else "(its own code)"
        counts[own_frame(below)] += count
    return total, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="py-spy's output with -f raw")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--under", metavar="FUNCTION",
                        help="what the samples of this function (e.g. parse_block, Ingestor.read) went to next")
    args = parser.parse_args(argv)
    found = samples(args.raw)
    total = sum(count for _, count in found)
    if not total:
        raise SystemExit(f"{args.raw}: no samples (record with py-spy's -f raw)")
    print(f"{total:,} samples")
    for name, count in by_thread(found).most_common():
        print(f"{count:8,} {100 * count / total:5.1f}%  {name}")
    if args.under:
        within, counts = under(found, args.under)
        print(f"\n{within:,} samples in {args.under}, by what it ran next:")
        for frame, count in counts.most_common(args.top):
            print(f"{count:8,} {100 * count / max(within, 1):5.1f}%  {frame}")
        return 0
    print("\nby thread and innermost dupfind frame:")
    for (name, frame), count in by_innermost(found).most_common(args.top):
        print(f"{count:8,} {100 * count / total:5.1f}%  {name}: {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

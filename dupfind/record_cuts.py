"""Blocks of a file cut where no record goes on: the lines that continue a block's last record move onto it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

# How much of each side of a cut the parser looks at: the end of the block before (where the
# record that may go on began) and the start of the next (the lines that may continue it).
WINDOW_BYTES = 64 << 10


def whole_records(chunks: Iterator[bytes], continued: Callable[[bytes, bytes], int], limit: int) -> Iterator[bytes]:
    """`chunks` (whole lines each, as iter_chunks cuts them) with the lines at the start of a
    chunk that continue the record the chunk before ended with (the rest of a CRI `P` line or of
    a Docker line without its newline, the traceback after a Celery error line) moved onto that
    chunk: parsed apart, they were rejected or made records of their own. At most `limit` bytes
    move onto a chunk (a record longer than that is cut as before).

    `continued(tail, head)`: how many bytes at the start of `head` (whole lines, the start of the
    next chunk) continue a record of `tail` (whole lines, the end of the chunk before); 0 for none.
    """
    current = next(chunks, None)
    if current is None:
        return
    moved: list[bytes] = []
    budget = limit
    for following in chunks:
        following, taken = _taken(current, moved, following, continued, budget)
        budget -= taken
        if not following:  # the whole chunk went on the record: look at the one after it
            continue
        yield _joined(current, moved)
        current, moved, budget = following, [], limit
    yield _joined(current, moved)


def _taken(
    current: bytes, moved: list[bytes], following: bytes, continued: Callable[[bytes, bytes], int], budget: int,
) -> tuple[bytes, int]:
    """The lines of `following` that continue `current`'s last record, appended to `moved`: what
    is left of `following` and how many bytes were taken."""
    start = _line_start(current, len(current) - WINDOW_BYTES)
    taken = 0
    while following and taken < budget:
        end = _window_end(following, min(WINDOW_BYTES, budget - taken))
        count = continued(current[start:] + b"".join(moved), following[:end])
        if count <= 0:
            break
        moved.append(following[:count])
        following = following[count:]
        taken += count
        if count < end:  # the record ended within the window
            break
    return following, taken


def _joined(current: bytes, moved: list[bytes]) -> bytes:
    return current + b"".join(moved) if moved else current


def _line_start(data: bytes, position: int) -> int:
    """The start of the line that holds `position` (0 before the data)."""
    return data.rfind(b"\n", 0, position) + 1 if position > 0 else 0


def _window_end(data: bytes, size: int) -> int:
    """The end of the whole lines within the first `size` bytes, or of the first line if it is longer."""
    if len(data) <= size:
        return len(data)
    end = data.rfind(b"\n", 0, size)
    if end < 0:
        end = data.find(b"\n", size)
        return len(data) if end < 0 else end + 1
    return end + 1

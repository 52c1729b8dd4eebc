"""Discrete-event engine: a time-ordered heap of callbacks and generator processes (times in µs)."""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Callable, Generator

Process = Generator[int, None, None]


def us(seconds: float) -> int:
    """Seconds to integer microseconds, the engine's time unit."""
    return int(seconds * 1_000_000)


class Engine:
    """Runs callbacks in time order; ties run in scheduling order, so runs are deterministic."""

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple]] = []
        self._seq = 0

    def at(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        self._seq += 1
        heappush(self._heap, (max(when, self.now), self._seq, fn, args))

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def spawn(self, process: Process, delay: int = 0, owner: Any = None) -> None:
        """Run a generator that yields delays; it stops silently once `owner.alive` is false."""
        self.after(delay, self._step, process, owner)

    def _step(self, process: Process, owner: Any) -> None:
        if owner is not None and not owner.alive:
            process.close()
            return
        try:
            delay = next(process)
        except StopIteration:
            return
        self._seq += 1
        heappush(self._heap, (self.now + delay, self._seq, self._step, (process, owner)))

    def run(self) -> None:
        heap = self._heap
        while heap:
            when, _, fn, args = heappop(heap)
            self.now = when
            fn(*args)

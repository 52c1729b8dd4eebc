"""Cache writes a command does on threads of its own or after its output is out, and finishes before it exits."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable
from typing import Any

_RUNNING: list[threading.Thread] = []
_STOP = threading.Event()  # set when the user interrupts: work stops at its next step
# run_deferred's work, in order, after the work deferred `front` and before the work deferred
# `last`: (work, args, what to do if skipped)
_DEFERRED: list[tuple[Callable[..., Any], tuple, Callable[..., Any] | None]] = []
_DEFERRED_FRONT: list[tuple[Callable[..., Any], tuple, Callable[..., Any] | None]] = []
_DEFERRED_LAST: list[tuple[Callable[..., Any], tuple, Callable[..., Any] | None]] = []
_DEFERRING = [False]  # set by the command line (defer_until_output): API callers run work at once


def start(work: Callable[..., Any], *args: Any, name: str) -> threading.Thread:
    """Run `work(*args)` on a thread of its own while the command goes on. The thread is not a
    daemon: even without `wait`, the interpreter waits for it before it exits. Cache writes give
    up quietly where they expect to fail (a full or read-only directory); anything else `work`
    raises is one line on stderr, never a traceback, and never fails the command."""
    thread = threading.Thread(target=_quietly, args=(work, args), name=name)
    thread.start()
    _RUNNING.append(thread)
    return thread


def _quietly(work: Callable[..., Any], args: tuple) -> None:
    try:
        _noting_failure(work, args)
    except KeyboardInterrupt:  # polars raises Ctrl-C in whichever thread is in it
        stop()


def _noting_failure(work: Callable[..., Any], args: tuple) -> None:
    try:
        work(*args)
    except Exception as exc:  # noqa: BLE001 (the command's own result does not depend on it)
        from dupfind.render.safe import safe_str

        message = str(exc).splitlines()[0] if str(exc) else ""
        sys.stderr.write(f"dupfind: note: the cache was not updated ({type(exc).__name__}: {safe_str(message)})\n")


def defer_until_output() -> None:
    """From now on `defer` keeps its work for `run_deferred` (main() calls it once the output is out)."""
    _DEFERRING[0] = True


def deferring() -> bool:
    """Whether the command line finishes cache work before the process exits (`defer` keeps work
    for later): only then may a cache write also go on on a thread of its own."""
    return _DEFERRING[0]


def defer(work: Callable[..., Any], *args: Any, last: bool = False, first: bool = False, front: bool = False,
          if_skipped: Callable[..., Any] | None = None) -> None:
    """Run `work(*args)` once the command's output is written (cache writes nobody waits for
    before the report: the report shows that much sooner), or now when nothing defers. `last`:
    after all the work deferred without it (work that needs none of that work, and runs with less
    memory held once that work has let go of what it kept). `first`: before the work deferred so
    far (work that needs none of it, and holds less memory before it). `if_skipped(*args)` runs
    instead when the user stops the command first (a staged file to remove). `front`: before all
    other work, in the order deferred, `first` or not (the set entry, then what moves the analysis
    onto it: the work after it then holds less memory)."""
    if _DEFERRING[0]:
        deferred = _DEFERRED_FRONT if front else _DEFERRED_LAST if last else _DEFERRED
        deferred.insert(0 if first else len(deferred), (work, args, if_skipped))
    else:
        work(*args)


def run_deferred() -> None:
    """The deferred work, in the order it was deferred, on this thread (none once stopped; Ctrl-C
    goes to the caller); `defer` then runs work at once again."""
    try:
        for deferred in (_DEFERRED_FRONT, _DEFERRED, _DEFERRED_LAST):
            if deferred is _DEFERRED_LAST and deferred:
                # What the earlier work kept may be held in reference cycles only (an analysis
                # context and its indexes, 96 MiB at 1M lines), which the command line's sparse
                # collections (cli.GC_THRESHOLDS) would leave in memory through the last work.
                gc.collect()
            while deferred and not _STOP.is_set():
                work, args, _ = deferred.pop(0)
                _noting_failure(work, args)
                del work, args  # not held through the next work
    finally:
        skipped = [(cleanup, args) for _, args, cleanup in (*_DEFERRED_FRONT, *_DEFERRED, *_DEFERRED_LAST)
                   if cleanup is not None]
        _DEFERRED_FRONT.clear()
        _DEFERRED.clear()
        _DEFERRED_LAST.clear()
        _DEFERRING[0] = False
        for cleanup, args in skipped:
            _noting_failure(cleanup, args)


def pending() -> bool:
    """Whether work is deferred or still running."""
    return bool(_DEFERRED_FRONT or _DEFERRED or _DEFERRED_LAST) or any(thread.is_alive() for thread in _RUNNING)


def stopping() -> bool:
    """Whether work should stop at its next step (a file of many): the user interrupted the command."""
    return _STOP.is_set()


def stop() -> None:
    """Ask running work to stop at its next step (Ctrl-C must not wait for a 15 s cache write)."""
    _STOP.set()


def wait() -> None:
    """Return once all work handed to `start` so far is done (or has stopped, after `stop`)."""
    while _RUNNING:
        _RUNNING.pop().join()
    _STOP.clear()

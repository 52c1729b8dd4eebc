"""A transient line on a terminal's stderr while a long step of a command runs."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from rich.console import Console

# A step shorter than this shows nothing (a small input's), so no line flashes by. At 1M lines,
# correlation takes about 1.7 s and the detectors 1.5 s after the reading bar is gone; at 5M
# lines, 10 s each.
DELAY_S = 0.5


def terminal_console() -> Console | None:
    """A rich Console on stderr when stderr is a terminal, else None (and rich is not imported:
    15 ms of every command's start)."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False)


class DelayedStatus:
    """A spinner and `text` on stderr once the step inside has run `delay_s` (DELAY_S when None),
    cleared when it ends; only when stderr is a terminal (and `show` holds). The line is drawn by
    a timer thread, so the step itself is not slowed; rich is imported only if it is drawn."""

    def __init__(self, text: str, delay_s: float | None = None, show: bool = True) -> None:
        self.text = text
        self.delay_s = DELAY_S if delay_s is None else delay_s
        self.show = show
        self._lock = threading.Lock()
        self._status = None
        self._timer: threading.Timer | None = None
        self._done = False

    def __enter__(self) -> Self:
        if self.show and sys.stderr.isatty():
            self._timer = threading.Timer(self.delay_s, self._draw)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _draw(self) -> None:
        with self._lock:
            if self._done:
                return
            console = terminal_console()
            if console is not None:
                from rich.live import Live
                from rich.spinner import Spinner

                # Not rich's Status: its Live swaps sys.stdout and sys.stderr for proxies that
                # print through this console (stderr) while it shows, and it is started from the
                # timer's thread while the command may write its output.
                self._status = Live(Spinner("dots", text=self.text, style="status.spinner"), console=console,
                                    refresh_per_second=12.5, transient=True,
                                    redirect_stdout=False, redirect_stderr=False)
                self._status.start()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._status is not None:
                self._status.stop()

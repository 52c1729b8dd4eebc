"""The command line: every subcommand lives in dupfind/commands/; this is the entry point."""

from __future__ import annotations

import contextlib
import gc
import os
import sys

from typer.main import get_command_name

import dupfind.commands  # noqa: F401  (registers the subcommands)
from dupfind import background
from dupfind.cli_common import app, note_cache_after_run, stdout_to_devnull
from dupfind.errors import DupfindError
from dupfind.render.safe import safe_str
from dupfind.status_line import DelayedStatus

__all__ = ["app", "main", "run"]

# The cyclic garbage collector's default first threshold (700 new objects) makes it scan every
# live object again and again while a warm run decodes its cached findings or a timeline builds
# its documents: a third to half of those runs went into collections that free nothing, since
# these objects hold no cycles. A CLI process is short-lived, so collect far less often.
GC_THRESHOLDS = (100_000, 10, 10)
SAVING_STATUS_DELAY_S = 1.0
SAVING_STATUS_TEXT = "output complete; saving the cache for the next runs (Ctrl-C skips it)"


def main(release_output: bool = False) -> None:
    """The command line: one-line errors and exit code 2, never a traceback. With
    `release_output` (the process's own entry point, run()), stdout is closed once the command
    is done, before the cache writes that come after the report."""
    gc.set_threshold(*GC_THRESHOLDS)
    _closed_streams_to_devnull()
    background.defer_until_output()  # cache writes nobody waits for come after the report
    try:
        with _only_the_named_command(sys.argv[1:2]):
            app()
    except SystemExit as exc:
        if exc.code == 130:  # typer's exit status for Ctrl-C during a command
            _interrupted()
        raise
    except DupfindError as exc:
        sys.stderr.write(f"dupfind: error: {safe_str(exc)}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _interrupted()
        sys.exit(130)
    except BrokenPipeError:
        # Output piped into `head` or similar: stop quietly.
        stdout_to_devnull()
        sys.exit(0)
    except Exception as exc:
        if os.environ.get("DUPFIND_DEBUG"):
            raise
        message = str(exc).splitlines()[0] if str(exc) else ""
        sys.stderr.write(
            f"dupfind: internal error: {type(exc).__name__}: {message} (set DUPFIND_DEBUG=1 for a traceback)\n"
        )
        sys.exit(2)
    finally:
        _wait_for_background(release_output)
        note_cache_after_run()


@contextlib.contextmanager
def _only_the_named_command(first: list[str]):
    """While the app runs, only the subcommand the command line names is registered: typer builds
    every registered command's click command (signatures, annotations, options) on each run, 40
    ms for all of them against 8 for `analyze`. Without a known name first (`--help`,
    `--version`, a typo), every command is there, for the list and the error."""
    commands = getattr(app, "registered_commands", None)  # None: an app that is not a Typer (tests)
    named = [c for c in commands or () if first and (c.name or get_command_name(c.callback.__name__)) == first[0]]
    if not named:
        yield
        return
    app.registered_commands = named
    try:
        yield
    finally:
        app.registered_commands = commands


def _closed_streams_to_devnull() -> None:
    """A stream the shell closed (`>&-`, `2>&-`) is None in Python: writing to it would fail the
    command. It writes to the null device instead (the report still goes to --output)."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the rest of the process)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def run() -> None:
    """The process's entry point (console script, `python -m dupfind`): main(), then the process
    ends at once. The interpreter's teardown would free every object the command built, one by one
    (0.08-0.1 s after a timeline of 1M lines had its last byte out), while all output is already
    written, the cache writes done and what is still open only read."""
    try:
        main(release_output=True)
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except KeyboardInterrupt:  # before main() could say so
        status = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe (`| head`) or stream: nothing more to say
            pass
    os._exit(status)


def _release_stdout() -> None:
    """Give the report's reader its end of file now: the output is complete and what remains is
    cache work (a first run over 1M lines writes its cache for 2-3 s after its report), which
    `dupfind analyze ... | jq` or `$(dupfind ...)` need not wait for."""
    try:
        sys.stdout.flush()
        stdout_to_devnull()
    except (OSError, ValueError, AttributeError):  # no stdout to close, or already closed
        pass


def _exit_status(code: object) -> int:
    """The status sys.exit(code) gives a process."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _interrupted() -> None:
    sys.stderr.write("dupfind: interrupted\n")
    background.stop()  # cache writes stop at their next step


class _SavingStatus(DelayedStatus):
    """A transient line on stderr while cache writes outlast the output by SAVING_STATUS_DELAY_S
    (a first run over 5M lines writes for 20 s after its report): the report is complete, and
    Ctrl-C skips the rest. Only when stderr is a terminal and work is pending."""

    def __init__(self) -> None:
        super().__init__(SAVING_STATUS_TEXT, SAVING_STATUS_DELAY_S, show=background.pending())


def _wait_for_background(release_output: bool = False) -> None:
    """Do the cache writes deferred until the output was out, and wait for those that went on
    while the command worked. Ctrl-C meanwhile stops them at their next step; a second one
    leaves at once (a half-written entry is never read)."""
    try:
        if release_output and background.pending():
            _release_stdout()
        with _SavingStatus():
            background.run_deferred()
            background.wait()
    except KeyboardInterrupt:
        _interrupted()
        try:
            background.wait()
        except KeyboardInterrupt:
            os._exit(130)
        sys.exit(130)

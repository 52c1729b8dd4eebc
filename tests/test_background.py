"""Work handed to a thread of its own: waited for, and an error in it is one line, not a traceback."""

from __future__ import annotations

import threading

from dupfind import background


def test_wait_returns_once_the_work_is_done():
    done = threading.Event()
    gate = threading.Event()

    def work(value):
        gate.wait(5)
        done.set()
        assert value == 7

    background.start(work, 7, name="test-work")
    assert not done.is_set()
    gate.set()
    background.wait()
    assert done.is_set() and not background._RUNNING


def test_an_error_in_the_work_is_one_escaped_line_on_stderr(capsys):
    def work():
        raise OSError("disk \x1b[31mfull\nsecond line")

    background.start(work, name="test-work")
    background.wait()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "\x1b" not in err
    assert err.startswith("dupfind: note: the cache was not updated (OSError: disk")


def test_ctrl_c_while_waiting_stops_the_work_and_exits_130(monkeypatch, capsys):
    """Ctrl-C while main() waits for cache writes: they are told to stop, then waited for, and
    the process exits 130 with one line, no traceback."""
    import pytest

    from dupfind import cli

    calls = []

    def wait():
        calls.append("wait")
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(background, "wait", wait)
    monkeypatch.setattr(background, "stop", lambda: calls.append("stop"))
    with pytest.raises(SystemExit) as exit_info:
        cli._wait_for_background()
    assert exit_info.value.code == 130
    assert calls == ["wait", "stop", "wait"]
    assert capsys.readouterr().err == "dupfind: interrupted\n"


def test_ctrl_c_inside_the_work_stops_the_rest_quietly(capsys):
    """polars raises Ctrl-C in whichever thread is running it: a background thread then stops the
    other work and says nothing (main() says it once)."""

    def work():
        raise KeyboardInterrupt

    background.start(work, name="test-work")
    background._RUNNING[-1].join()
    assert background.stopping()
    background.wait()
    assert not background.stopping()
    assert capsys.readouterr().err == ""


def test_main_says_interrupted_once_and_stops_background_work(monkeypatch, capsys):
    """typer turns Ctrl-C during a command into exit status 130; main() adds its one line and
    tells cache writes to stop."""
    import pytest

    from dupfind import cli

    def app():
        raise SystemExit(130)

    stops = []
    monkeypatch.setattr(cli, "app", app)
    monkeypatch.setattr(background, "stop", lambda: stops.append(1))
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 130 and stops == [1]
    assert capsys.readouterr().err == "dupfind: interrupted\n"


def test_deferred_work_runs_after_the_output_in_order_and_once():
    done = []
    background.defer(done.append, "now")  # nothing defers: at once
    assert done == ["now"]
    background.defer_until_output()
    background.defer(done.append, "first")
    background.defer(lambda: 1 / 0)  # one line on stderr, the rest still runs
    background.defer(done.append, "second")
    assert done == ["now"]
    background.run_deferred()
    assert done == ["now", "first", "second"]
    background.defer(done.append, "after")  # deferring ended with run_deferred
    assert done[-1] == "after"


def test_deferred_work_is_dropped_once_stopped_and_ctrl_c_reaches_the_caller():
    import pytest

    done = []
    background.defer_until_output()
    background.defer(done.append, "kept?")
    background.stop()
    background.run_deferred()
    background.wait()  # clears the stop
    assert done == []
    background.defer_until_output()

    def interrupted():
        raise KeyboardInterrupt

    background.defer(interrupted)
    background.defer(done.append, "not reached")
    with pytest.raises(KeyboardInterrupt):
        background.run_deferred()
    background.defer(done.append, "at once")
    assert done == ["at once"]


def test_deferred_work_runs_in_order_last_work_after_and_skipped_work_cleans_up():
    """run_deferred runs the deferred work in order, work deferred `first` before it and `last` after
    it; once the user stops the command, what is left runs its `if_skipped` instead (a staged file
    removed)."""
    done: list[str] = []
    background.defer_until_output()
    try:
        background.defer(done.append, "files", last=True)
        background.defer(done.append, "set", if_skipped=lambda _: done.append("set skipped"))
        background.defer(done.append, "analysis")
        # Work deferred `first` goes before what was deferred so far; what it defers, after it all.
        background.defer(lambda: (done.append("stats"), background.defer(done.append, "stats stored")), first=True)
        # Work deferred `front` goes before all of it, in the order deferred.
        background.defer(done.append, "entry", front=True)
        background.defer(done.append, "rest on it", front=True)
        assert done == []
    finally:
        background.run_deferred()
    assert done == ["entry", "rest on it", "stats", "set", "analysis", "stats stored", "files"]

    done.clear()
    background.defer_until_output()
    try:
        background.defer(background.stop)  # Ctrl-C during the first deferred write
        background.defer(done.append, "placed", if_skipped=lambda what: done.append(f"{what} skipped"))
        background.defer(done.append, "files", last=True)
    finally:
        background.run_deferred()
        background.wait()
    assert done == ["placed skipped"]
    assert not background.stopping() and not background.deferring()
    background.defer(done.append, "at once")  # nothing defers any more
    assert done[-1] == "at once"


def test_the_last_work_runs_after_what_earlier_work_kept_in_reference_cycles_is_freed():
    """What the earlier deferred work held and let go of, though only in reference cycles (an analysis
    context and its indexes), is freed before the work deferred `last` (the files' pack) runs: the
    command line collects cycles seldom (cli.GC_THRESHOLDS)."""
    import gc
    import weakref

    class Held:
        pass

    def kept() -> Held:
        held = Held()
        held.itself = held  # a reference cycle, as a context and its GroupIndex make one
        return held

    seen: list[bool] = []
    held = kept()
    alive = weakref.ref(held)
    thresholds = gc.get_threshold()
    gc.disable()  # the cycle stays unless run_deferred collects it
    background.defer_until_output()
    try:
        background.defer(lambda item: seen.append(item() is not None), alive)
        background.defer(lambda item: seen.append(item is not None), held)
        background.defer(lambda: seen.append(alive() is not None), last=True)
        del held
        background.run_deferred()
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)
    assert seen == [True, True, False]

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

"""Records of a text envelope over several lines (record_lines): which lines make one record."""

from __future__ import annotations

import re

import pytest

from dupfind.record_lines import MAX_RECORD_LINES, joined_records, record_runs

START = re.compile(r"^EVENTS\t")
END = re.compile(r"(?:\t|^\s*)\d{10,16}$")


@pytest.mark.parametrize(("lines", "runs"), [
    (["EVENTS\ta\t1796401800000", "EVENTS\tb\t1796401800001"], []),  # each whole on its line
    (["EVENTS\tSTART RequestId: 1", "\t1796401800000", "EVENTS\tb\t1796401800001"], [(0, 1)]),  # Lambda's newline
    (["EVENTS\tfailed", "Traceback (most recent call last):", '  File "h.py", line 5', "KeyError: 1\t1796401805123"], [(0, 3)]),
    (["EVENTS\tcut off", "more", "EVENTS\tnext\t1796401800001"], []),  # the next event before an end: no record
    (["EVENTS\tlast", "more"], []),  # the end not (yet) read: the block after may hold it
    (["plain", "\t1796401800000"], []),  # an end with no beginning
])
def test_which_lines_make_a_record(lines, runs):
    assert record_runs([START.search(x) is not None for x in lines], [END.search(x) is not None for x in lines]) == runs


def test_a_run_without_an_end_in_sight_is_no_record():
    lines = ["EVENTS\tx", *["y"] * MAX_RECORD_LINES, "\t1796401800000"]
    assert record_runs([START.search(x) is not None for x in lines], [END.search(x) is not None for x in lines]) == []


def test_joined_records_keep_the_lines_around_them():
    lines = ["EVENTS\ta\t1", "EVENTS\tfailed", "Traceback", "KeyError: 1\t1796401805123", "SEARCHEDLOGSTREAMS\ts\tTrue"]
    assert joined_records(lines, START, END) == [
        "EVENTS\ta\t1", "EVENTS\tfailed\nTraceback\nKeyError: 1\t1796401805123", "SEARCHEDLOGSTREAMS\ts\tTrue",
    ]

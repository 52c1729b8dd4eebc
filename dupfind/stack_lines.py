"""Stack traces after a line of text: which lines go on with the record before them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from dupfind.lineparse import LEADING_TS, LOGFMT_PAIR, parse_logfmt

# A line that begins or goes on with a stack trace wherever it stands after a record: indented (a
# Python frame and its code, Java's `\tat`, Go's `\t/app/main.go:42`) or one of the header lines
# Python, the JVM and Go write.
_TRACE_LINE = (
    r"[ \t]+\S"
    r"|Traceback \(most recent call last\):"
    r"|During handling of the above exception|The above exception was the direct cause"
    r"|Caused by: |Exception in thread "
    r"|panic: |fatal error: |goroutine \d+ \["
)
# An exception's own line (Python's last line, a JVM trace's first): a class name and its message.
_EXCEPTION_LINE = r"[A-Za-z_$][\w$.]*(?:Error|Exception|Throwable|Exit|Interrupt|Warning|Fault|Exceeded)(?::|$)"
TRACE_LINE = re.compile(_TRACE_LINE)
EXCEPTION_LINE = re.compile(_EXCEPTION_LINE)
# For polars (one pass over a block: most blocks hold none, and are not looked at line by line).
ANY_TRACE_LINE = f"^(?:{_TRACE_LINE}|{_EXCEPTION_LINE})"
TRACE_BREAK = ""  # trace_owners: a line that no trace goes on past (an overlong line, rejected)


def _own_record(text: str) -> bool:
    """Whether a line without a leading time is a record of its own: logfmt from its first
    character (`level=info msg=..`; not Go's `[signal SIGSEGV: .. code=0x1 addr=0x0 pc=..]`)."""
    return LOGFMT_PAIR.match(text) is not None and parse_logfmt(text) is not None


def trace_owners(lines: Iterable[tuple[int, str | None, object]], each_line_a_record: bool) -> dict[int, int]:
    """The lines (not starting with a time) that go on with a record before them, each with that
    record's line: a stack trace printed after a record of text or logfmt (Python's logging,
    logback, zap's console encoder). `lines` are (line, text, key) in the file's order, blank lines
    left out; a text None is a record read apart (a JSON line, a framework's line), TRACE_BREAK a
    line no trace goes on past; the key names the line's source (its file, an envelope's source
    and stream).

    A run of lines right after a record goes on with it once one of them looks like a trace
    (TRACE_LINE; an exception's line too, unless `each_line_a_record`); the lines of the run before
    that one go too (Go's function name before its indented file). A run ends at a line with a
    leading time, at a logfmt record, at a line of another source (a trace is joined only where it
    follows its record, which a cut between two blocks cannot hide: record_cuts), and, where each
    line is a record of its own (lines in an envelope that gives their time), at any line that does
    not look like a trace. Lines of a run that never looks like one are left as they are (rejected
    when they parse as nothing)."""
    owners: dict[int, int] = {}
    owner: int | None = None
    joining = False
    pending: list[int] = []
    current: object = owners  # no key is this object: the first line starts afresh
    for line, text, key in lines:
        if key != current:
            owner, joining, pending, current = None, False, [], key
        if not text or LEADING_TS.match(text):
            owner, joining, pending = (None if text == TRACE_BREAK else line), False, []
            continue
        if owner is None:
            if each_line_a_record or _own_record(text):
                owner, joining, pending = line, False, []
            continue
        traced = TRACE_LINE.match(text) is not None
        if not traced and (joining or not each_line_a_record):
            traced = EXCEPTION_LINE.match(text) is not None or (joining and not each_line_a_record and not _own_record(text))
        if traced:
            owners.update((p, owner) for p in pending)
            owners[line] = owner
            joining, pending = True, []
        elif each_line_a_record or _own_record(text):
            owner, joining, pending = line, False, []
        else:
            pending.append(line)
    return owners

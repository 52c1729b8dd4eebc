"""Stack traces after a line of text: which lines go on with the record before them."""

from __future__ import annotations

import re
from collections.abc import Iterable

import polars as pl

from dupfind.lineparse import _LOGFMT_KEY, _LOGFMT_VALUE, _PAIR_TEXT, LEADING_TS, LOGFMT_PAIR, parse_logfmt

_PYTHON_HEADER = "Traceback (most recent call last):"
# The first lines of the reports other runtimes print as an exception ends the process (their
# patterns below, dupfind.crashes). Go's panic and fatal runtime error, V8's fatal error (out of
# memory), CPython's fatal error:
_CRASH_PREFIX = r"(?:panic|fatal error|FATAL ERROR|Fatal Python error): "
# Node's uncaught exception: the script and line that threw (then its source line, a caret, the
# error and its stack, `Node.js v20.18.1`); node's own code for an unhandled promise rejection
# (`node:internal/process/promises:391`). V8 out of memory (`<--- Last few GCs --->`, the GC lines,
# `FATAL ERROR: ...`, native frames).
_NODE_SCRIPT_LINE = r"(?:node:internal/[\w/]+|(?:file://)?(?:/|[A-Za-z]:\\|\./)?[^\s:]+\.[cm]?[jt]sx?):\d+$"
_NODE_OOM_LINE = r"<--- Last few GCs --->"
# .NET's (`Unhandled exception. System.InvalidOperationException: ...`, then `   at` frames: on any
# thread, it ends the process), PHP's fatal error (`PHP Fatal error:  Allowed memory size of ...
# exhausted ...`, one line: what ends the script; `PHP Fatal error:  Uncaught RuntimeException:
# ...`), Ruby's uncaught exception (`/app/worker.rb:42:in `deliver': ... (NoMethodError)`, then
# `\tfrom` lines).
_DOTNET_PREFIX = r"Unhandled exception\. "
# The JVM ending on its first OutOfMemoryError (-XX:+ExitOnOutOfMemoryError, a container's usual
# setting: `Terminating due to java.lang.OutOfMemoryError: Java heap space`; CrashOnOutOfMemoryError's
# `Aborting due to ...`, its hs_err report after it).
_JVM_OOM_PREFIX = r"(?:Terminating|Aborting) due to java\.lang\.OutOfMemoryError: "
_PHP_FATAL_PREFIX = r"(?:PHP )?Fatal error: "
_RUBY_UNCAUGHT = r"\S+\.rb:\d+:in [`'][^`']*': (?P<message>.*) \((?P<exception>[A-Z][\w:]*)\)$"
# A line that begins or goes on with a stack trace wherever it stands after a record: indented (a
# Python frame and its code, Java's `\tat`, Go's `\t/app/main.go:42`) or one of the header lines
# runtimes write.
_TRACE_LINE = (
    r"[ \t]+\S"
    r"|Traceback \(most recent call last\):"
    r"|During handling of the above exception|The above exception was the direct cause"
    r"|Caused by: |Exception in thread "
    rf"|{_CRASH_PREFIX}|goroutine \d+ \["
    # Node's: the event an unhandled error came from, the version it ends with, an error's fields' brace.
    r"|Emitted '[^']+' event |Node\.js v\d+\.\d+\.\d+$|[}\]]+$"
    rf"|{_DOTNET_PREFIX}|{_PHP_FATAL_PREFIX}|{_RUBY_UNCAUGHT}|{_JVM_OOM_PREFIX}"
    r"|Stack trace:$|#\d+ (?:/|\{main\}|\[internal function\])"  # PHP's frames after an uncaught exception
    rf"|{_NODE_SCRIPT_LINE}|{_NODE_OOM_LINE}|<--- JS stacktrace --->|\[\d+:0x[0-9a-f]+\]|----- Native stack trace -----"
    # Python's faulthandler: each thread's frames after its fatal error.
    r"|(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):|Extension modules: "
)
# An exception's own line (Python's last line, a JVM trace's first): a class name and its message.
# Bare `Error: ...` (Node's, JavaScript's) and `Exception: ...` (Python's `raise Exception(...)`) too,
# and Node's `SystemError [ERR_X]: ...`, `[UnhandledPromiseRejection: ...]`, .NET's HRESULT
# (`Npgsql.NpgsqlException (0x80004005): ...`).
_EXCEPTION_LINE = (r"\[?(?:[A-Za-z_$][\w$.]*)?(?:Error|Exception|Throwable|Exit|Interrupt|Warning|Fault|Exceeded|Rejection)"
                   r"(?: \[[A-Z][A-Z0-9_]*\]| \(0x[0-9A-Fa-f]{8}\))?(?::|$)")
TRACE_LINE = re.compile(_TRACE_LINE)
EXCEPTION_LINE = re.compile(_EXCEPTION_LINE)
# For polars (one pass over a block: most blocks hold none, and are not looked at line by line).
ANY_TRACE_LINE = f"^(?:{_TRACE_LINE}|{_EXCEPTION_LINE})"
TRACE_BREAK = ""  # trace_owners: a line that no trace goes on past (an overlong line, rejected)
_THREAD_PREFIX = re.compile(rf'Exception in thread "[^"]*" |{_DOTNET_PREFIX}|(?:Terminating|Aborting) due to (?=java\.lang\.)')
_LEVEL_PREFIX = re.compile(r"^\[[A-Z]+\]\s+")
_CRASH_LINE = re.compile(_CRASH_PREFIX + r"\S")
_NODE_OOM = re.compile(_NODE_OOM_LINE)
_NODE_HEADER = re.compile(_NODE_SCRIPT_LINE)
_DOTNET_HEADER = re.compile(_DOTNET_PREFIX + r"\S")
_PHP_FATAL = re.compile(_PHP_FATAL_PREFIX + r" *(?P<error>\S.*)")
_RUBY_HEADER = re.compile(_RUBY_UNCAUGHT)
_JVM_OOM = re.compile(_JVM_OOM_PREFIX + r"\S")
# The first line of what a runtime prints when an exception ends the process: Python's excepthook
# and fatal error, Go's unrecovered panic and fatal runtime error, Node's (and V8 out of memory),
# .NET's, PHP's, Ruby's and the JVM's out of memory exit (dupfind.crashes).
# All but Python's are printed only as the process ends (a Python program may print a traceback
# and go on: traceback.print_exc()).
FATAL_HEADER = re.compile("|".join(
    header.pattern for header in (_CRASH_LINE, _NODE_OOM, _NODE_HEADER, _DOTNET_HEADER, _PHP_FATAL, _RUBY_HEADER, _JVM_OOM)
))
CRASH_HEADER = re.compile(f"{re.escape(_PYTHON_HEADER)}|{FATAL_HEADER.pattern}")
# Levels of a record that does not report an error: a stack trace after such a record (a crash
# printed after the last line a thread logged) is not that record's error.
QUIET_LEVELS = ("trace", "debug", "info", "information", "informational", "notice", "verbose",
                "fine", "finer", "finest", "config", "t", "d", "i", "v", "n")
MAX_ERROR_CHARS = 500  # an exception's message can be a page (a SQL statement and its parameters)


def _own_record(text: str) -> bool:
    """Whether a line without a leading time is a record of its own: logfmt from its first
    character (`level=info msg=..`; not Go's `[signal SIGSEGV: .. code=0x1 addr=0x0 pc=..]`)."""
    return LOGFMT_PAIR.match(text) is not None and parse_logfmt(text) is not None


FEW_LINES = 64  # up to this many lines, own_record_lines asks _own_record of each
# _own_record as polars reads it: a pair at the first character, then two pairs or more, or that
# pair alone (LOGFMT_PAIR and _PAIR_TEXT find the same pairs: test_logfmt_frame).
_PAIR_AT_START = f"^(?:{_LOGFMT_KEY})=(?:{_LOGFMT_VALUE})"


def own_record_lines(lines: pl.Series, texts: pl.Series) -> set[int]:
    """The lines whose text _own_record says is a record of its own, all at once (a stack trace
    logged by logrus, 100,000 lines: 0.56 s of parse_logfmt a line). A text with the characters
    0x1c-0x1f (whitespace to Python's `\\s`, not to polars') is left to _own_record. A few lines
    (a traceback among a JSON block's lines) are asked one by one: polars' four patterns cost a
    compilation each there, 1.7 ms."""
    if lines.len() <= FEW_LINES:
        return {line for line, text in zip(lines.to_list(), texts.to_list()) if text is not None and _own_record(text)}
    first = texts.str.extract(f"({_PAIR_AT_START})", 1)
    count = texts.str.count_matches(_PAIR_TEXT)
    odd = texts.str.contains(r"[\x1c-\x1f]").fill_null(False)
    own = first.is_not_null() & ((count >= 2) | (texts.str.strip_chars_end() == first)) & ~odd
    found = set(lines.filter(own.fill_null(False)).to_list())
    found.update(line for line, text in zip(lines.filter(odd).to_list(), texts.filter(odd).to_list()) if _own_record(text))
    return found


def trace_owners(lines: Iterable[tuple[int, str | None, object]], each_line_a_record: bool,
                 own_records: set[int] | None = None) -> dict[int, int]:
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
    when they parse as nothing). `own_records`: own_record_lines of the lines, where made already."""
    is_own = (lambda line, _: line in own_records) if own_records is not None else (lambda _, text: _own_record(text))
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
            if each_line_a_record or is_own(line, text):
                owner, joining, pending = line, False, []
            continue
        traced = TRACE_LINE.match(text) is not None
        if not traced and (joining or not each_line_a_record):
            traced = EXCEPTION_LINE.match(text) is not None or (joining and not each_line_a_record and not is_own(line, text))
        if traced:
            owners.update((p, owner) for p in pending)
            owners[line] = owner
            joining, pending = True, []
        elif each_line_a_record or is_own(line, text):
            owner, joining, pending = line, False, []
        else:
            pending.append(line)
    return owners


def exception_of(texts: Iterable[str]) -> str | None:
    """The exception a stack trace reports (its lines in order), None when it names none: Python's
    line after its last `Traceback` header's frames (the exception raised last, its message's
    first line), Node's line after its report's source line and caret, PHP's fatal error, Ruby's
    uncaught exception (`NoMethodError: undefined method ...`), else the first line that names an
    exception (a JVM trace's first line, without `Exception in thread "main" `; .NET's, without
    `Unhandled exception. `) or a Go panic. Not a frame's function name (zap's stack). A
    Python trace without its last line takes the exception named right before it (Lambda's
    `[ERROR] KeyError: 'x'` then its traceback)."""
    texts = [text.rstrip() for text in texts]
    starts = [i for i, text in enumerate(texts) if text.startswith(_PYTHON_HEADER)]
    if starts:
        after = (text for text in texts[starts[-1] + 1:] if text and not text[0].isspace())
        found = next(after, None)
        if found is None and starts[0] > 0:  # Lambda's runtime names it before: `[ERROR] KeyError: 'x'`
            before = _LEVEL_PREFIX.sub("", texts[starts[0] - 1], count=1)
            found = before if EXCEPTION_LINE.match(before) else None
    elif texts and (fatal := _PHP_FATAL.match(texts[0])):
        found = "Fatal error: " + fatal["error"]
    elif texts and (uncaught := _RUBY_HEADER.match(texts[0])):
        found = f"{uncaught['exception']}: {uncaught['message']}"
    elif texts and _NODE_HEADER.match(texts[0]):  # the error: the first line after the source line's caret
        caret = next((i for i, text in enumerate(texts) if text.strip() == "^"), 0)
        found = next((text for text in texts[caret + 1:] if text and not text[0].isspace()), None)
    else:
        found = next((
            _THREAD_PREFIX.sub("", text, count=1) for text in texts
            if text and not text[0].isspace() and (EXCEPTION_LINE.match(_THREAD_PREFIX.sub("", text, count=1)) or _CRASH_LINE.match(text))
        ), None)
    return found[:MAX_ERROR_CHARS] if found else None


def exceptions_by_owner(owners: dict[int, int], texts: dict[int, str]) -> dict[int, str]:
    """Each record a stack trace went on with (`owners`: a trace's line -> its record's line) ->
    the exception that trace reports (exception_of), from the traces' `texts` by line; a record
    that is a crash report's first line (.NET's `Unhandled exception. X: ...`) is read with it."""
    traces: dict[int, list[str]] = {}
    for owner in set(owners.values()):  # a crash report's first line, a record, may name its exception
        text = texts.get(owner)
        if text is not None and CRASH_HEADER.match(text):
            traces[owner] = [text]
    for line in sorted(owners, key=lambda line: abs(line - owners[line])):  # a trace read newest first too
        text = texts.get(line)
        if text is not None:
            traces.setdefault(owners[line], []).append(text)
    found = {owner: exception_of(lines) for owner, lines in traces.items()}
    return {owner: text for owner, text in found.items() if text is not None}


def values_at_lines(lines: pl.Series, by_line: dict[int, object], dtype: pl.DataType) -> pl.Series | None:
    """A column beside `lines` (a block's record lines) holding `by_line`'s value on each line it
    names (the exception of the trace after a record, a crash report after it), null elsewhere;
    None when it names none of them."""
    low, high = lines.min(), lines.max()
    inside = [line for line in by_line if low is not None and low <= line <= high]  # (the block's other raws' lines)
    if not inside:
        return None
    at = lines.is_in(pl.Series(inside, dtype=lines.dtype).implode()).arg_true()
    if not len(at):
        return None
    return pl.repeat(None, lines.len(), dtype=dtype, eager=True).scatter(at, [by_line[line] for line in lines.gather(at).to_list()])

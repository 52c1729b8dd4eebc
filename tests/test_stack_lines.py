"""Which lines of a stack trace go on with the record before them (stack_lines.trace_owners)."""

from __future__ import annotations

import polars as pl
import pytest

from dupfind.lineparse import LEADING_TS
from dupfind.stack_lines import (
    ANY_TRACE_LINE,
    EXCEPTION_LINE,
    MAX_ERROR_CHARS,
    TRACE_BREAK,
    TRACE_LINE,
    exception_of,
    exceptions_by_owner,
    trace_owners,
)

PYTHON = """\
2026-12-03 09:41:37,496 ERROR [mailer.tasks] event=db_update_failed job_id=e8b3 attempt=1
Traceback (most recent call last):
  File "/app/mailer/repo.py", line 58, in mark_sent
    session.execute(update(Delivery).values(status="sent", sent_at=func.now()))
psycopg2.OperationalError: server closed the connection unexpectedly
The above exception was the direct cause of the following exception:
sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) server closed the connection unexpectedly
[SQL: UPDATE deliveries SET status=%(status)s WHERE deliveries.id = %(id_1)s]
2026-12-03 09:41:37,498 WARNING [mailer.tasks] event=retry_scheduled job_id=e8b3 countdown=10"""

GO_PANIC = """\
time="2026-12-04T16:31:05Z" level=info msg="sending push" job_id=push-8c1e0b72
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x6f2c3e]
goroutine 27 [running]:
main.(*Sender).record(0x0, {0xc0002a4000, 0x24})
\t/app/cmd/pusher/sender.go:88 +0x3e
time="2026-12-04T16:31:07Z" level=info msg="worker starting" worker=pusher-6c4f8-mq7rx"""

ZAP_STACK = """\
2026-11-29T07:16:41.986Z\tWARN\tworker/run.go:97\tack after visibility timeout\t{"job_id": "e7a1"}
main.(*Worker).ack
\t/app/worker/run.go:97
2026-11-29T07:16:41.990Z\tINFO\tworker/run.go:102\tjob succeeded\t{"job_id": "e7a1"}"""


def _owners(text: str, each_line_a_record: bool = False, keys=None) -> dict[int, int]:
    lines = text.split("\n")
    keys = keys or [None] * len(lines)
    return trace_owners(((n, line, key) for n, (line, key) in enumerate(zip(lines, keys), start=1)), each_line_a_record)


@pytest.mark.parametrize(("text", "owner", "joined"), [
    (PYTHON, 1, range(2, 9)),  # a chained traceback, its SQL line and its code with `=` in it
    (GO_PANIC, 1, range(2, 7)),  # after a logfmt record with no leading time; the signal line has k=v pairs
    (ZAP_STACK, 1, range(2, 4)),  # a function's name before its indented file
])
def test_a_trace_goes_on_with_the_record_before_it(text, owner, joined):
    assert _owners(text) == {line: owner for line in joined}


def test_lines_that_never_look_like_a_trace_are_left_alone():
    text = "2026-12-03 09:41:02,118 INFO [celery.worker] event=worker_started\nsending batch metrics to statsd every 10s\nretrying in 5s"
    assert _owners(text) == {}


def test_a_logfmt_record_ends_a_trace():
    text = 'time="2026-12-04T16:31:05Z" level=error msg=boom\ngoroutine 1 [running]:\n\t/app/main.go:12\nlevel=info msg="next record" job_id=7\n\t/app/main.go:40'
    # The last indented line goes on with the logfmt record before it, not with the first one.
    assert _owners(text) == {2: 1, 3: 1, 5: 4}


def test_where_each_line_is_a_record_only_trace_lines_go_on():
    # Docker's lines: the envelope gives each its time. After the trace, a line of text is a record.
    text = "2026-12-04 16:40:05,488 ERROR job failed\nTraceback (most recent call last):\n  File \"/app/t.py\", line 57, in send\nKeyError: 'order_shipped_v2'\nmetrics flushed\n  cache hit ratio: 0.93"
    assert _owners(text, each_line_a_record=True) == {2: 1, 3: 1, 4: 1, 6: 5}
    # An exception's line right after a record is a record of its own there, unless a trace began.
    assert _owners("job failed\nKeyError: 'x'", each_line_a_record=True) == {}
    assert _owners("job failed\nKeyError: 'x'") == {}  # no record: nothing to go on with


def test_a_trace_goes_on_only_right_after_its_own_source_s_record():
    lines = [(1, "2026-12-04 16:40:05,488 ERROR job failed", "stderr"), (2, None, "stdout"),
             (3, "  at com.example.Worker.run(Worker.java:42)", "stderr")]
    assert trace_owners(lines, True) == {}
    lines[2] = (3, lines[2][1], "stdout")
    assert trace_owners(lines, True) == {3: 2}


def test_a_record_read_apart_takes_a_trace_and_a_break_ends_one():
    lines = [(1, None, 0), (2, "Traceback (most recent call last):", 0), (3, '  File "/app/w.py", line 88', 0),
             (4, TRACE_BREAK, 0), (5, '  File "/app/w.py", line 90', 0), (6 | 1 << 32, "  at x", 1)]
    assert trace_owners(lines, False) == {2: 1, 3: 1}


def test_polars_check_finds_the_lines_python_s_patterns_do():
    # ANY_TRACE_LINE is run by polars (Rust's regex) on a whole block before any line is looked at.
    node = ["/app/worker.js:42", "      throw err;", "      ^", "Error: boom", "Emitted 'error' event on Client instance at:",
            "Node.js v20.18.1", "}", "[UnhandledPromiseRejection: x] {", "SystemError [ERR_TTY_INIT_FAILED]: x",
            "Unhandled exception. System.InvalidOperationException: x", "PHP Fatal error:  Allowed memory size",
            "Stack trace:", "#0 /var/www/app/Jobs/SendEmail.php(42): x()", "#1 {main}",
            "/app/worker.rb:42:in `deliver': undefined method `id' for nil:NilClass (NoMethodError)",
            "/app/worker.rb:42:in `deliver'", "#hashtag", "Unhandled exceptions are logged",
            "<--- Last few GCs --->", "[1:0x6b1c2f0]   412907 ms: Mark-Compact 2035.1", "FATAL ERROR: Reached heap limit",
            "Fatal Python error: Segmentation fault", "Current thread 0x00007f3b2c1ff740 (most recent call first):"]
    lines = pl.Series([*PYTHON.split("\n"), *GO_PANIC.split("\n"), *ZAP_STACK.split("\n"), *node])
    found = lines.str.contains(ANY_TRACE_LINE).to_list()
    assert found == [bool(TRACE_LINE.match(line) or EXCEPTION_LINE.match(line)) for line in lines]
    assert sum(found) >= 10


CHAINED = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/sqlalchemy/engine/default.py", line 924, in do_execute
    cursor.execute(statement, parameters)
psycopg2.OperationalError: server closed the connection unexpectedly
\tThis probably means the server terminated abnormally

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/mailer/repo.py", line 58, in mark_sent
    session.execute(update(Delivery).values(status="sent"))
sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) server closed the connection unexpectedly
\tThis probably means the server terminated abnormally

[SQL: UPDATE deliveries SET status=%(status)s WHERE deliveries.id = %(id_1)s]
(Background on this error at: https://sqlalche.me/e/20/e3q8)"""

JVM_IN_THREAD = """\
Exception in thread "pool-2-thread-1" java.lang.IllegalStateException: ledger row 88213 is locked
\tat com.example.billing.Ledger.debit(Ledger.java:212)
Caused by: org.postgresql.util.PSQLException: canceling statement due to lock timeout
\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2725)"""


@pytest.mark.parametrize(("text", "exception"), [
    # Python: the exception raised last (after the last `Traceback` header), not the SQL after it.
    (CHAINED, "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) server closed the connection unexpectedly"),
    ("\n".join(PYTHON.split("\n")[1:5]), "psycopg2.OperationalError: server closed the connection unexpectedly"),
    (JVM_IN_THREAD, "java.lang.IllegalStateException: ledger row 88213 is locked"),  # what was thrown, not its cause
    (GO_PANIC, "panic: runtime error: invalid memory address or nil pointer dereference"),
    (ZAP_STACK, None),  # a function's name and its file name no exception
    ("Traceback (most recent call last):\n  File \"x.py\", line 1, in f", None),  # cut before its last line
    # Lambda's runtime: the exception first, then the traceback without it
    ("[ERROR] KeyError: 'order_shipped_v2'\nTraceback (most recent call last):\n  File \"/var/task/handler.py\", line 57, in handler",
     "KeyError: 'order_shipped_v2'"),
    ("[INFO] retrying\nTraceback (most recent call last):\n  File \"/var/task/handler.py\", line 57, in handler", None),
    # Node: the line after the source line and its caret, even where the source line is not indented
    ("/app/worker.mjs:12\nawait main();\n^\n\nTypeError: Cannot read properties of undefined (reading 'id')\n"
     "    at main (file:///app/worker.mjs:9:21)\n\nNode.js v22.11.0", "TypeError: Cannot read properties of undefined (reading 'id')"),
    ("node:internal/process/promises:391\n    triggerUncaughtException(err, true /* fromPromise */);\n    ^\n\n"
     "Error: Redis connection lost\n    at RedisConnection.handleClose (/app/node_modules/bullmq/dist/cjs/classes/redis-connection.js:102:15)",
     "Error: Redis connection lost"),
    # .NET, PHP, Ruby: what ends the process, the exception as its runtime names it
    ("Unhandled exception. System.Net.Http.HttpRequestException: Connection refused (db:5432)\n"
     "   at Npgsql.Internal.NpgsqlConnector.Open()\n   --- End of stack trace from previous location ---",
     "System.Net.Http.HttpRequestException: Connection refused (db:5432)"),
    ("PHP Fatal error:  Allowed memory size of 134217728 bytes exhausted (tried to allocate 20480 bytes) in "
     "/var/www/vendor/guzzlehttp/psr7/src/Stream.php on line 123",
     "Fatal error: Allowed memory size of 134217728 bytes exhausted (tried to allocate 20480 bytes) in "
     "/var/www/vendor/guzzlehttp/psr7/src/Stream.php on line 123"),
    ("/app/worker.rb:42:in `deliver': undefined method `id' for nil:NilClass (NoMethodError)\n"
     "\tfrom /app/worker.rb:10:in `block in <main>'", "NoMethodError: undefined method `id' for nil:NilClass"),
])
def test_the_exception_a_trace_reports(text, exception):
    lines = text.split("\n")
    if LEADING_TS.match(lines[0]) or lines[0].startswith("time="):
        lines = lines[1:-1]  # the trace alone, without the records around it
    assert exception_of(lines) == exception


def test_a_long_exception_message_is_cut():
    assert exception_of(["ValueError: " + "x" * 2000]) == ("ValueError: " + "x" * 2000)[:MAX_ERROR_CHARS]


def test_each_record_gets_its_own_traces_exception():
    text = PYTHON + "\n" + GO_PANIC
    lines = dict(enumerate(text.split("\n"), start=1))
    owners = _owners(text)
    assert exceptions_by_owner(owners, lines) == {
        1: "psycopg2.OperationalError: server closed the connection unexpectedly",  # no header after the first
        10: "panic: runtime error: invalid memory address or nil pointer dereference",
    }

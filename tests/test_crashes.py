"""A crash report printed after a worker's last line (dupfind.crashes): a record of its own, the
worker's end where nothing of the worker follows it in its file or its restart's banner does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from dupfind.analyze import analyze
from dupfind.config import load_config
from dupfind.ingest import ingest
from dupfind.rules_registry import load_rules
from dupfind.schema import as_strings

from conftest import FIXTURES

CONFIG = load_config(cwd=Path("/"))
KUBECTL = FIXTURES / "scenarios" / "kubectl-logs-previous-crash" / "logs"
KUBELET = FIXTURES / "scenarios" / "k8s-worker-crash-redelivered" / "logs"

TRACEBACK = """\
Traceback (most recent call last):
  File "/app/worker.py", line 142, in <module>
    main()
  File "/app/store.py", line 41, in mark_sent
    cur.execute(
psycopg2.OperationalError: server closed the connection unexpectedly
\tThis probably means the server terminated abnormally"""
GO_PANIC = """\
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x6f2c3e]

goroutine 27 [running]:
main.(*Sender).record(0x0, {0xc0002a4000, 0x24})
\t/app/cmd/pusher/sender.go:88 +0x3e"""

NODE_REPORT = """\
/app/node_modules/pg/lib/client.js:132
      const error = this._ending ? new Error('Connection terminated') : new Error('Connection terminated unexpectedly')
                                                                        ^

Error: Connection terminated unexpectedly
    at Connection.<anonymous> (/app/node_modules/pg/lib/client.js:132:73)
    at Socket.emit (node:events:519:28)
Emitted 'error' event on Client instance at:
    at Client._handleErrorEvent (/app/node_modules/pg/lib/client.js:319:10)
    [... lines matching original stack trace ...]

Node.js v20.18.1"""
NODE_REJECTION = """\
node:internal/process/promises:391
    triggerUncaughtException(err, true /* fromPromise */);
    ^

[UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "lock lost".] {
  code: 'ERR_UNHANDLED_REJECTION'
}

Node.js v20.18.1"""

DOTNET_REPORT = """\
Unhandled exception. Npgsql.NpgsqlException (0x80004005): Exception while reading from stream
 ---> System.IO.EndOfStreamException: Attempted to read past the end of the stream.
   at Npgsql.Internal.NpgsqlReadBuffer.<Ensure>g__EnsureLong|55_0(NpgsqlReadBuffer buffer, Int32 count, Boolean async)
   --- End of inner exception stack trace ---
   at Notifier.Worker.MarkSentAsync(Guid notificationId) in /src/Notifier/Worker.cs:line 88"""
PHP_FATAL = ("PHP Fatal error:  Allowed memory size of 134217728 bytes exhausted (tried to allocate 20480 bytes) in "
             "/var/www/vendor/guzzlehttp/psr7/src/Stream.php on line 123")
PHP_UNCAUGHT = """\
PHP Fatal error:  Uncaught PDOException: SQLSTATE[HY000]: General error: 2006 MySQL server has gone away in /var/www/app/Jobs/SendConfirmation.php:42
Stack trace:
#0 /var/www/app/Jobs/SendConfirmation.php(42): PDOStatement->execute()
#1 {main}
  thrown in /var/www/app/Jobs/SendConfirmation.php on line 42"""
NODE_OOM = """\
<--- Last few GCs --->

[1:0x6b1c2f0]   412907 ms: Mark-Compact 2035.1 (2084.9) -> 2031.6 (2085.6) MB, 1734.21 / 0.00 ms  (average mu = 0.113, current mu = 0.046) allocation failure; scavenge might not succeed

<--- JS stacktrace --->

FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory
----- Native stack trace -----

 1: 0xb8d0a3 node::OOMErrorHandler(char const*, v8::OOMDetails const&) [node]
 2: 0xf06460 v8::Utils::ReportOOMFailure(v8::internal::Isolate*, char const*, v8::OOMDetails const&) [node]"""
PYTHON_FATAL = """\
Fatal Python error: Segmentation fault

Current thread 0x00007f3b2c1ff740 (most recent call first):
  File "/app/notifier/pdf.py", line 88 in render_receipt
  File "/app/notifier/worker.py", line 131 in handle

Extension modules: psycopg2._psycopg, lxml.etree (total: 2)"""
JVM_OOM_EXIT = "Terminating due to java.lang.OutOfMemoryError: Java heap space"
RUBY_REPORT = """\
/app/lib/mailer_consumer.rb:57:in `mark_sent': undefined method `[]' for nil:NilClass (NoMethodError)
\tfrom /app/lib/mailer_consumer.rb:31:in `block in run'
\tfrom /app/bin/consumer:12:in `<main>'"""


def _json(ms: int, event: str, level: str = "info", **fields) -> str:
    return json.dumps({"ts": f"2026-12-03T14:02:11.{ms:03d}Z", "level": level, "event": event, "worker": "w-1",
                       "job_id": "j-1", **fields})


def _read(tmp_path: Path, text: str, name: str = "worker.log"):
    path = tmp_path / name
    path.write_text(text + "\n")
    result = ingest([str(tmp_path)], CONFIG)
    rows = as_strings(result.text_table()).sort("line").select(
        "line", "kind", "worker_id", "job_id", "message", "stack_trace", "ts").rows(named=True)
    return result.files[0], {row["line"]: row for row in rows}


# Reports only an ending process prints, each with the exception it names.
FATAL_REPORTS = [
    (NODE_REPORT, "Error: Connection terminated unexpectedly"),
    (DOTNET_REPORT, "Npgsql.NpgsqlException (0x80004005): Exception while reading from stream"),
    (PHP_FATAL, PHP_FATAL.replace("PHP Fatal error:  ", "Fatal error: ")),
    (PHP_UNCAUGHT, PHP_UNCAUGHT.splitlines()[0].replace("PHP Fatal error:  ", "Fatal error: ")),
    (RUBY_REPORT, "NoMethodError: undefined method `[]' for nil:NilClass"),
    (NODE_OOM, "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"),
    (PYTHON_FATAL, "Fatal Python error: Segmentation fault"),
    (JVM_OOM_EXIT, "java.lang.OutOfMemoryError: Java heap space"),
]


@pytest.mark.parametrize("report, exception", [
    (TRACEBACK, "psycopg2.OperationalError: server closed the connection unexpectedly"),
    (GO_PANIC, "panic: runtime error: invalid memory address or nil pointer dereference"),
    (NODE_REJECTION, ("[UnhandledPromiseRejection: This error originated either by throwing inside of an async "
                      "function without a catch block, or by rejecting a promise which was not handled with .catch(). "
                      "The promise rejected with the reason \"lock lost\".] {")),
    *FATAL_REPORTS,
])
def test_a_crash_report_after_the_last_json_line_is_the_workers_exit(tmp_path, report, exception):
    lines = [_json(100, "job_started"), _json(300, "email_sent"), report]
    file, rows = _read(tmp_path, "\n".join(lines))
    crash = rows[3]
    assert crash["kind"] == "worker_exit" and crash["stack_trace"] == exception
    assert crash["message"] == report.splitlines()[0]
    # The process that printed it, at the time of its last record; none of the job's ids.
    assert crash["worker_id"] == "w-1" and crash["job_id"] is None and crash["ts"] == rows[2]["ts"]
    assert (file.records, file.parsed + file.blank, file.lines) == (3, file.lines, 2 + len(report.splitlines()))


def test_a_worker_that_goes_on_after_a_traceback_did_not_crash(tmp_path):
    lines = [_json(100, "job_started"), TRACEBACK, _json(200, "job_failed", "error"), _json(900, "job_started", job_id="j-2")]
    file, rows = _read(tmp_path, "\n".join(lines))
    assert rows[2]["kind"] == "other" and rows[2]["stack_trace"].startswith("psycopg2.OperationalError")
    assert not any(row["kind"] == "worker_exit" for row in rows.values())
    assert file.records == 4 and file.parsed == file.lines


def test_a_restart_banner_after_the_traceback_confirms_the_crash(tmp_path):
    lines = [_json(100, "job_started"), TRACEBACK, _json(950, "worker_started", job_id=None)]
    _, rows = _read(tmp_path, "\n".join(lines))
    assert rows[2]["kind"] == "worker_exit" and rows[9]["kind"] == "worker_start"


def test_the_restarts_own_lines_before_its_banner_confirm_the_crash(tmp_path):
    """Node's worker restarted by Docker logs `connected to redis`, then `worker ready`."""
    lines = [_json(100, "job_started"), NODE_REPORT, _json(950, "connected to redis", job_id=None),
             _json(961, "worker_ready", job_id=None)]
    _, rows = _read(tmp_path, "\n".join(lines))
    crash = len(NODE_REPORT.splitlines()) + 1
    assert rows[2]["kind"] == "worker_exit" and (rows[crash + 1]["kind"], rows[crash + 2]["kind"]) == ("other", "worker_start")


@pytest.mark.parametrize("report", [GO_PANIC, *(report for report, _ in FATAL_REPORTS)])
def test_a_report_only_an_ending_process_prints_is_its_end_whatever_follows(tmp_path, report):
    """supervisord restarts `php artisan queue:work`, which prints no banner: its next job follows."""
    lines = [_json(100, "job_started"), report, _json(900, "job_started", job_id="j-2")]
    _, rows = _read(tmp_path, "\n".join(lines))
    assert rows[2]["kind"] == "worker_exit" and rows[2]["worker_id"] == "w-1"
    assert rows[len(report.splitlines()) + 2]["kind"] == "start"


def test_a_worker_that_goes_on_with_its_jobs_after_other_lines_did_not_crash(tmp_path):
    lines = [_json(100, "job_started"), TRACEBACK, _json(300, "heartbeat", job_id=None), _json(900, "job_started", job_id="j-2")]
    _, rows = _read(tmp_path, "\n".join(lines))
    assert rows[2]["kind"] == "other" and not any(row["kind"] == "worker_exit" for row in rows.values())


@pytest.mark.parametrize("report, exception", FATAL_REPORTS)
def test_a_crash_in_a_container_log_of_timed_lines_is_the_workers_exit(tmp_path, report, exception):
    """The kubelet's CRI lines (each with its time and stream): the report's first line is the record."""
    def cri(ms: int, stream: str, text: str) -> str:
        return f"2026-12-03T14:02:11.{ms:03d}000000Z {stream} F {text}"
    lines = [cri(100, "stdout", _json(100, "job_started")), cri(300, "stdout", _json(300, "email_sent"))]
    lines += [cri(400 + i, "stderr", text) for i, text in enumerate(report.splitlines())]
    file, rows = _read(tmp_path, "\n".join(lines), name="0.log")
    crash = rows[3]
    assert crash["kind"] == "worker_exit" and crash["message"] == report.splitlines()[0]
    assert crash["stack_trace"] == exception
    assert [row["kind"] for row in rows.values()].count("worker_exit") == 1 and max(rows) == 3
    assert file.parsed + file.blank == file.lines


def test_another_workers_lines_after_it_do_not_keep_it_alive(tmp_path):
    lines = [_json(100, "job_started"), TRACEBACK, _json(700, "job_started", worker="w-2", job_id="j-9")]
    _, rows = _read(tmp_path, "\n".join(lines))
    assert rows[2]["kind"] == "worker_exit" and rows[2]["worker_id"] == "w-1"


def test_a_header_that_names_no_exception_is_no_crash_report(tmp_path):
    """`Traceback (most recent call last):` and a frame, cut off: it goes on with its record, as before."""
    lines = [_json(100, "job_started"), "\n".join(TRACEBACK.splitlines()[:3])]
    file, rows = _read(tmp_path, "\n".join(lines))
    assert list(rows) == [1] and file.parsed == file.lines


@pytest.mark.parametrize("line", [
    "PHP Warning:  Undefined array key \"email\" in /var/www/app/Jobs/SendConfirmation.php on line 30",
    "/app/lib/mailer_consumer.rb:57:in `mark_sent'",
    "      An unhandled exception has occurred while executing the request.",
    # One thread's end (the JVM goes on while another thread that is no daemon runs).
    'Exception in thread "kafka-coordinator-heartbeat-thread | notifier" java.lang.OutOfMemoryError: Java heap space',
])
def test_a_runtimes_warning_or_a_frame_alone_is_no_crash_report(tmp_path, line):
    lines = [_json(100, "job_started"), line]
    _, rows = _read(tmp_path, "\n".join(lines))
    assert not any(row["kind"] == "worker_exit" for row in rows.values())


def test_a_threads_traceback_is_no_crash_report(tmp_path):
    """`Exception in thread ...` before the traceback: a thread ended, not the process."""
    lines = [_json(100, "job_started"), "Exception in thread Thread-3 (flush_metrics):", TRACEBACK]
    file, rows = _read(tmp_path, "\n".join(lines))
    assert list(rows) == [1] and file.parsed == file.lines


def test_a_loggers_own_traceback_after_its_error_line_stays_that_records(tmp_path):
    text = "2026-12-03 14:02:11,300 ERROR [mailer] event=db_update_failed job_id=j-1\n" + TRACEBACK
    file, rows = _read(tmp_path, text)
    assert list(rows) == [1] and rows[1]["stack_trace"].startswith("psycopg2.OperationalError")
    assert file.parsed == file.lines


@pytest.mark.parametrize("last", [
    '2026-12-03 14:02:11,300 INFO [notifier.worker] sending email job_id=j-1 worker=w-1',
    'time="2026-12-03T14:02:11Z" level=info msg="sending email" job_id=j-1 worker=w-1',
])
def test_a_crash_report_after_a_quiet_line_of_text_is_the_workers_exit(tmp_path, last):
    """Python's logging or logrus at INFO, then the runtime's report: not that record's own traceback."""
    for report in (TRACEBACK, GO_PANIC):
        file, rows = _read(tmp_path, last + "\n" + report)
        assert rows[1]["stack_trace"] is None
        assert rows[2]["kind"] == "worker_exit" and rows[2]["worker_id"] == "w-1" and rows[2]["ts"] == rows[1]["ts"]
        assert file.records == 2 and file.parsed + file.blank == file.lines


def test_a_crash_report_after_a_rejected_record_is_rejected_with_it(tmp_path):
    lines = [_json(100, "job_started"), json.dumps({"ts": "not a time", "event": "email_sent", "job_id": "j-1"}), TRACEBACK]
    file, rows = _read(tmp_path, "\n".join(lines))
    assert list(rows) == [1]
    assert file.rejected == {"bad_timestamp": 2}
    assert file.parsed + sum(file.rejected.values()) == file.lines


def test_small_files_read_together_number_the_report_by_its_own_file(tmp_path):
    """A batch of small files numbers its lines apart from each file's: the report's line is its file's."""
    for k in range(30):
        (tmp_path / f"worker-{k:02d}.log").write_text(_json(k, "job_started", worker=f"w-{k}", job_id=f"j-{k}") + "\n")
    result = ingest([str(tmp_path)], CONFIG)
    assert result.table.height == 30
    (tmp_path / "worker-17.log").write_text("\n".join([_json(17, "job_started", worker="w-17"), TRACEBACK]) + "\n")
    table = as_strings(ingest([str(tmp_path)], CONFIG).text_table())
    crash = table.filter(table["kind"] == "worker_exit").rows(named=True)
    assert [(Path(r["source"]).name, r["line"], r["worker_id"]) for r in crash] == [("worker-17.log", 2, "w-17")]


def _analysis(logs: Path):
    report = analyze(ingest([str(logs)], CONFIG), CONFIG, load_rules(CONFIG))
    return {f.rule: f for f in report.findings if f.rule == "DF101"}, [f for f in report.findings if f.rule == "DF203"]


def test_the_duplicate_after_a_crash_names_the_crash_and_its_exception():
    df101, df203 = _analysis(KUBECTL)
    found = df101["DF101"]
    assert (found.cause, found.confidence) == ("worker_killed", "certain")
    assert "crashed on an uncaught psycopg2.OperationalError" in found.cause_detail
    assert sorted(f.summary.split(" (uncaught ")[1].split(":")[0] for f in df203) == [
        "psycopg2.OperationalError", "requests.exceptions.JSONDecodeError"]


def test_without_the_traceback_the_same_return_is_a_visibility_timeout_expiry(tmp_path):
    """The crash report taken out of the kubelet's file: nothing says the worker ended."""
    logs = tmp_path / "logs"
    shutil.copytree(KUBELET, logs)
    for path in logs.rglob("*.log"):
        path.write_text("".join(line for line in path.read_text().splitlines(keepends=True) if " stderr F " not in line))
    df101, df203 = _analysis(logs)
    assert df101["DF101"].cause == "lease_expired" and not df203


SPRING_KAFKA = FIXTURES / "scenarios" / "spring-kafka-max-poll-rebalance" / "logs"


def test_a_jvm_out_of_memory_exit_after_a_spring_line_is_the_pods_end(tmp_path):
    """The Kafka scenario's first pod ends on `Terminating due to java.lang.OutOfMemoryError` right
    after its send of ord_55520 (-XX:+ExitOnOutOfMemoryError) instead of hanging; the other pod
    sends again: the duplicate's cause is the pod's end, not a poll timeout. Before 2026-12-07 the
    line went on with logback's INFO line before it, as its trace."""
    logs = tmp_path / "logs"
    shutil.copytree(SPRING_KAFKA, logs)
    first = logs / "notifier-7b9c6d5f4-2kq8x.log"
    lines = first.read_text().splitlines()
    sent = next(i for i, line in enumerate(lines) if "Sending email order_id=ord_55520" in line)
    first.write_text("\n".join([*lines[:sent + 1], JVM_OOM_EXIT]) + "\n")
    report = analyze(ingest([str(logs)], CONFIG), CONFIG, load_rules(CONFIG))
    (duplicate,) = [f for f in report.findings if f.rule == "DF101"]
    assert (duplicate.cause, duplicate.confidence) == ("worker_killed", "certain"), duplicate.cause_detail
    assert "OutOfMemoryError" in duplicate.cause_detail
    exits = report.context.columns("kind", "line", "source").filter(pl.col("kind") == "worker_exit")
    assert exits.height == 1 and exits["line"][0] == sent + 2


def _spring_with(tmp_path: Path, text: str) -> list[str]:
    """The kinds of the spring-boot format fixture's records with `text` after its last line."""
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "formats" / "spring-boot" / "logs", logs)
    target = next(logs.iterdir())
    target.write_text(target.read_text() + text + "\n")
    table = as_strings(ingest([str(logs)], CONFIG).text_table())
    return table.filter(pl.col("source").str.ends_with(target.name)).sort("line")["kind"].to_list()


SPRING_ERROR = ("2026-12-06T10:14:21.900Z ERROR 1 --- [notifier] [ntainer#0-0-C-1] c.e.n.OrderConfirmationListener"
                "          : Postmark call failed order_id=ord_55520")


def test_the_jvms_out_of_memory_exit_after_an_error_line_is_still_its_end(tmp_path):
    """No logger prints `Terminating due to ...`: the JVM does, as it exits, whatever came before."""
    kinds = _spring_with(tmp_path, f"{SPRING_ERROR}\n{JVM_OOM_EXIT}")
    assert kinds[-1] == "worker_exit" and kinds.count("worker_exit") == 1


def test_the_exception_logback_logs_after_its_error_line_is_no_crash(tmp_path):
    """logback's ERROR line and the exception it logs (its trace): the JVM goes on."""
    trace = (f"{SPRING_ERROR}\njava.net.SocketTimeoutException: Read timed out\n"
             "\tat java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:278)\n"
             "\tat com.example.notifier.PostmarkClient.send(PostmarkClient.java:61)")
    assert "worker_exit" not in _spring_with(tmp_path, trace)
